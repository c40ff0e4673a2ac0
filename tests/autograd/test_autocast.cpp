// Autocast (Note [Autocast]): octo's op lists against PyTorch's, and each CPU entry run.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <string>
#include <string_view>

#include <octo/octo.h>

#include "kernels/functors.h"
#include "parallel/models.h"

using octo::DeviceType;
using octo::DType;
using octo::Tensor;
using octo::amp::Policy;
namespace F = octo::nn::functional;

namespace {

// PyTorch's autocast lists (aten/src/ATen/autocast_mode.{h,cpp}; the "Autocast Op Reference" of
// torch.amp's docs), as PyTorch names the ops. Only the names matter here: each list is the
// reference octo's table is checked against.
const std::set<std::string> kTorchLower = {  // CPU and CUDA alike
    "_convolution",
    "conv1d",
    "conv2d",
    "conv3d",
    "conv_tbc",
    "conv_transpose1d",
    "conv_transpose2d",
    "conv_transpose3d",
    "convolution",
    "prelu",
    "addmm",
    "addmv",
    "addr",
    "matmul",
    "einsum",
    "mm",
    "mv",
    "linalg_vecdot",
    "linear",
    "addbmm",
    "baddbmm",
    "bmm",
    "chain_matmul",
    "linalg_multi_dot",
    "scaled_dot_product_attention"};
const std::set<std::string> kTorchCpuFloat32 = {"avg_pool3d",
                                                "binary_cross_entropy",
                                                "grid_sampler",
                                                "polar",
                                                "prod",
                                                "quantile",
                                                "nanquantile",
                                                "stft",
                                                "cdist",
                                                "trace",
                                                "view_as_complex",
                                                "cholesky",
                                                "cholesky_inverse",
                                                "cholesky_solve",
                                                "inverse",
                                                "lu_solve",
                                                "orgqr",
                                                "ormqr",
                                                "pinverse",
                                                "max_pool3d",
                                                "max_unpool2d",
                                                "max_unpool3d",
                                                "adaptive_avg_pool3d",
                                                "reflection_pad1d",
                                                "reflection_pad2d",
                                                "replication_pad1d",
                                                "replication_pad2d",
                                                "replication_pad3d",
                                                "mse_loss",
                                                "cosine_embedding_loss",
                                                "nll_loss",
                                                "nll_loss2d",
                                                "hinge_embedding_loss",
                                                "poisson_nll_loss",
                                                "smooth_l1_loss",
                                                "cross_entropy_loss",
                                                "l1_loss",
                                                "huber_loss",
                                                "margin_ranking_loss",
                                                "soft_margin_loss",
                                                "triplet_margin_loss",
                                                "multi_margin_loss",
                                                "ctc_loss",
                                                "kl_div",
                                                "multilabel_margin_loss",
                                                "binary_cross_entropy_with_logits"};
const std::set<std::string> kTorchCudaFloat32 = {
    "acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p", "reciprocal",
    "rsqrt", "sinh", "tan", "pow", "softplus", "layer_norm", "native_layer_norm", "group_norm",
    "frobenius_norm", "nuclear_norm", "cosine_similarity", "poisson_nll_loss",
    "cosine_embedding_loss", "nll_loss", "nll_loss2d", "hinge_embedding_loss", "kl_div", "l1_loss",
    "smooth_l1_loss", "huber_loss", "mse_loss", "margin_ranking_loss", "multilabel_margin_loss",
    "soft_margin_loss", "triplet_margin_loss", "multi_margin_loss",
    "binary_cross_entropy_with_logits", "dist", "pdist", "cdist", "renorm", "logsumexp",
    // float32 unless given an output dtype ("fp32_set_opt_dtype"):
    "prod", "softmax", "log_softmax", "cumprod", "cumsum", "linalg_vector_norm",
    "linalg_matrix_norm", "sum",
    // cross_entropy reaches CUDA's list through log_softmax and nll_loss, its parts there.
    "cross_entropy_loss"};
const std::set<std::string> kTorchCudaBanned = {"binary_cross_entropy"};

/// PyTorch's name for an octo op where they differ.
std::string torch_name(std::string_view op) {
  return op == "cross_entropy" ? "cross_entropy_loss" : std::string(op);
}

std::optional<Policy> torch_policy(const std::string& op, DeviceType type) {
  if (kTorchLower.count(op)) return Policy::kLowerPrecision;
  if (type == DeviceType::CPU) {
    if (kTorchCpuFloat32.count(op)) return Policy::kFloat32;
  } else {
    if (kTorchCudaBanned.count(op)) return Policy::kBanned;
    if (kTorchCudaFloat32.count(op)) return Policy::kFloat32;
  }
  return std::nullopt;
}

Tensor leaf(const octo::Shape& shape, uint64_t seed, DType dt = octo::kFloat32) {
  octo::manual_seed(seed);
  return octo::randn(shape).to(dt).requires_grad_();
}

}  // namespace

TEST_CASE("autocast: every entry of octo's table is PyTorch's policy for that op", "[autocast]") {
  for (const octo::amp::OpPolicy& p : octo::amp::op_policies()) {
    INFO(p.op);
    CHECK(p.cpu == torch_policy(torch_name(p.op), DeviceType::CPU));
    CHECK(p.cuda == torch_policy(torch_name(p.op), DeviceType::CUDA));
  }
}

TEST_CASE("autocast: every op octo has on PyTorch's lists is in octo's table", "[autocast]") {
  // octo's elementwise ops come from the op table, so a new one on PyTorch's lists fails here
  // until autocast knows it; the rest are octo's other public ops.
  std::set<std::string> octo_ops = {"conv2d",
                                    "linear",
                                    "matmul",
                                    "mm",
                                    "bmm",
                                    "binary_cross_entropy",
                                    "binary_cross_entropy_with_logits",
                                    "cross_entropy",
                                    "huber_loss",
                                    "l1_loss",
                                    "mse_loss",
                                    "nll_loss",
                                    "smooth_l1_loss",
                                    "prod",
                                    "softmax",
                                    "log_softmax",
                                    "layer_norm",
                                    "sum",
                                    "logsumexp",
                                    "batch_norm",
                                    "max_pool2d",
                                    "avg_pool2d",
                                    "adaptive_avg_pool2d",
                                    "mean",
                                    "var",
                                    "dropout",
                                    "embedding"};
#define OCTO_TEST_OP_NAME(Kind, name, dtypes) octo_ops.insert(name);
  OCTO_UNARY_OPS(OCTO_TEST_OP_NAME)
  OCTO_BINARY_OPS(OCTO_TEST_OP_NAME)
#undef OCTO_TEST_OP_NAME
  for (const std::string& op : octo_ops) {
    INFO(op);
    CHECK(octo::amp::policy(op, DeviceType::CPU) == torch_policy(torch_name(op), DeviceType::CPU));
    CHECK(octo::amp::policy(op, DeviceType::CUDA) ==
          torch_policy(torch_name(op), DeviceType::CUDA));
  }
}

TEST_CASE("autocast on the CPU: products and convolutions run in the low precision", "[autocast]") {
  const DType dt = GENERATE(octo::kBFloat16, octo::kFloat16);
  INFO(dt);
  const Tensor x = leaf({4, 6}, 1), w = leaf({3, 6}, 2), b = leaf({3}, 3);
  const Tensor img = leaf({2, 3, 6, 6}, 4), k = leaf({4, 3, 3, 3}, 5);
  octo::autocast amp(dt);
  CHECK(octo::linear(x, w, b).dtype() == dt);
  CHECK(octo::mm(x, w.t()).dtype() == dt);
  CHECK(octo::matmul(x, w.t()).dtype() == dt);
  CHECK(octo::bmm(x.unsqueeze(0), w.t().unsqueeze(0)).dtype() == dt);
  CHECK(octo::conv2d(img, k).dtype() == dt);
  // The result is the float32 op on the cast inputs, rounded: within 16-bit rounding of float32.
  const Tensor y = octo::linear(x, w, b).to(octo::kFloat32);
  Tensor ref;
  {
    octo::autocast off(dt, /*enabled=*/false);
    ref = octo::linear(x.to(dt), w.to(dt), b.to(dt)).to(octo::kFloat32);
  }
  CHECK(octo::allclose(y, ref, 0, 0));
  // float64 is never cast; ops off the lists keep their inputs' dtypes.
  CHECK(octo::mm(x.to(octo::kFloat64), w.t().to(octo::kFloat64)).dtype() == octo::kFloat64);
  CHECK(octo::relu(x).dtype() == octo::kFloat32);
  CHECK(octo::softmax(x, 1).dtype() == octo::kFloat32);  // on CUDA's list only
  CHECK(octo::relu(octo::linear(x, w)).dtype() == dt);
  CHECK((octo::linear(x, w) + b).dtype() == octo::kFloat32);  // type promotion
}

TEST_CASE("autocast on the CPU: losses and prod run in float32", "[autocast]") {
  const DType dt = GENERATE(octo::kBFloat16, octo::kFloat16);
  INFO(dt);
  const Tensor logits = leaf({4, 5}, 10, dt), p = octo::sigmoid(leaf({4, 5}, 11, dt)).detach();
  const Tensor labels = octo::tensor({0, 4, 2, 1}).to(octo::kInt64);
  octo::autocast amp(dt);
  CHECK(F::cross_entropy(logits, labels).dtype() == octo::kFloat32);
  CHECK(octo::cross_entropy_per_sample(logits, labels).dtype() == octo::kFloat32);
  CHECK(F::nll_loss(octo::log_softmax(logits, 1), labels).dtype() == octo::kFloat32);
  CHECK(F::mse_loss(logits, p).dtype() == octo::kFloat32);
  CHECK(F::l1_loss(logits, p).dtype() == octo::kFloat32);
  CHECK(F::smooth_l1_loss(logits, p).dtype() == octo::kFloat32);
  CHECK(F::huber_loss(logits, p).dtype() == octo::kFloat32);
  CHECK(F::binary_cross_entropy(p, p).dtype() == octo::kFloat32);
  CHECK(F::binary_cross_entropy_with_logits(logits, p).dtype() == octo::kFloat32);
  CHECK(octo::prod(logits, 1).dtype() == octo::kFloat32);
  // Off the CPU lists: 16-bit stays 16-bit.
  CHECK(octo::exp(logits).dtype() == dt);
  CHECK(octo::sum(logits).dtype() == dt);
  CHECK(octo::log_softmax(logits, 1).dtype() == dt);
  // The float32 loss equals the float32 op on the widened logits.
  Tensor ref;
  {
    octo::autocast off(dt, false);
    ref = F::cross_entropy(logits.to(octo::kFloat32), labels);
  }
  CHECK(F::cross_entropy(logits, labels).item<double>() == ref.item<double>());
}

TEST_CASE(
    "autocast: gradients reach float32 parameters in float32; backward runs in forward's "
    "dtypes",
    "[autocast]") {
  const Tensor x = leaf({8, 6}, 20), w = leaf({5, 6}, 21), b = leaf({5}, 22);
  const Tensor labels = octo::tensor({0, 4, 2, 1, 3, 3, 0, 1}).to(octo::kInt64);
  Tensor loss;
  {
    octo::autocast amp(octo::kBFloat16);
    loss = F::cross_entropy(octo::linear(x, w, b), labels);
    CHECK(loss.dtype() == octo::kFloat32);
    loss.backward();  // inside the region too: backward turns autocast off
  }
  CHECK(w.grad().dtype() == octo::kFloat32);
  CHECK(b.grad().dtype() == octo::kFloat32);
  // Against float32 throughout: bfloat16's 8 bits, a few roundings deep.
  const Tensor w32 = w.detach().clone().requires_grad_(), b32 = b.detach().clone().requires_grad_();
  F::cross_entropy(octo::linear(x.detach(), w32, b32), labels).backward();
  CHECK(octo::allclose(w.grad(), w32.grad(), 0.03, 0.01));
  CHECK(octo::allclose(b.grad(), b32.grad(), 0.03, 0.01));
  CHECK_FALSE(octo::allclose(w.grad(), w32.grad(), 0, 0));  // bfloat16 did change something
}

TEST_CASE("autocast: scopes nest, enabled = false turns it off, per device type", "[autocast]") {
  const Tensor x = leaf({2, 2}, 30);
  CHECK_FALSE(octo::amp::is_enabled(DeviceType::CPU));
  {
    octo::autocast amp(octo::kBFloat16);
    CHECK(octo::amp::is_enabled(DeviceType::CPU));
    CHECK(octo::amp::is_enabled(DeviceType::CUDA));
    {
      octo::autocast inner(octo::kFloat16);
      CHECK(octo::mm(x, x).dtype() == octo::kFloat16);
      octo::autocast off(octo::kFloat16, false);
      CHECK(octo::mm(x, x).dtype() == octo::kFloat32);
    }
    CHECK(octo::mm(x, x).dtype() == octo::kBFloat16);
    octo::autocast cuda_only(DeviceType::CUDA, octo::kFloat16, false);
    CHECK(octo::amp::is_enabled(DeviceType::CPU));
    CHECK_FALSE(octo::amp::is_enabled(DeviceType::CUDA));
  }
  CHECK_FALSE(octo::amp::is_enabled(DeviceType::CPU));
  CHECK(octo::mm(x, x).dtype() == octo::kFloat32);
  {
    octo::autocast cuda(DeviceType::CUDA, octo::kBFloat16);
    CHECK(octo::mm(x, x).dtype() == octo::kFloat32);  // a CPU op: CUDA's autocast leaves it
  }
  CHECK_THROWS_WITH(octo::autocast(octo::kFloat64),
                    Catch::Contains("autocast: expected dtype bfloat16 or float16, got float64"));
  CHECK(octo::amp::policy("binary_cross_entropy", DeviceType::CUDA) == Policy::kBanned);
}

TEST_CASE("autocast under DataParallel equals one device under autocast", "[autocast][parallel]") {
  // parallel_apply hands the caller's autocast state to each replica's thread.
  octo::manual_seed(41);
  auto single = std::make_shared<test_models::Cnn>();
  octo::manual_seed(41);
  auto replicated = std::make_shared<test_models::Cnn>();
  octo::parallel::DataParallel dp(replicated, {octo::Device("cpu:0"), octo::Device("cpu:1")});
  const Tensor x = octo::randn({6, 1, 8, 8});
  const Tensor labels = octo::tensor({0, 1, 2, 3, 4, 0}).to(octo::kInt64);
  octo::autocast amp(octo::kBFloat16);
  const Tensor y1 = single->forward(x), y2 = dp.forward(x);
  CHECK(y1.dtype() == octo::kBFloat16);
  CHECK(y2.dtype() == octo::kBFloat16);
  CHECK(octo::allclose(y1.to(octo::kFloat32), y2.to(octo::kFloat32), 0, 0));
  F::cross_entropy(y1, labels).backward();
  F::cross_entropy(y2, labels).backward();
  const auto p1 = single->parameters(), p2 = replicated->parameters();
  REQUIRE(p1.size() == p2.size());
  for (size_t i = 0; i < p1.size(); ++i) {
    CHECK(p2[i].grad().dtype() == octo::kFloat32);
    CHECK(octo::allclose(p1[i].grad(), p2[i].grad(), 1e-2, 1e-3));
  }
}
