// cuDNN paths of the CUDA backend against the CPU backend: conv2d and batch norm, forward and
// backward, strided arguments, the conv algorithm cache, TF32, and the errors cuDNN's limits cause.
#include "gpu/gpu_helpers.h"
#include "gpu/gpu_main.h"

#include <octo/octo.h>

#include <array>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "kernels/cuda/cudnn_util.h"

using octo::Device;
using octo::DeviceType;
using octo::DType;
using octo::Shape;
using octo::Tensor;

using namespace gpu_test;

namespace {

/// float64 must agree to rounding; float32 to 1e-4 relative (different summation orders).
double tol(DType dtype) { return dtype == octo::kFloat32 ? 1e-4 : 1e-10; }

Tensor randn_cpu(const Shape& shape, DType dtype) { return octo::randn(shape, {.dtype = dtype}); }

/// A CPU leaf and a GPU leaf holding the same values, both requiring grad.
struct LeafPair {
  Tensor cpu, gpu;
};
LeafPair leaf_pair(const Tensor& values_cpu) {
  Tensor c = values_cpu.clone();
  c.requires_grad_();
  Tensor g = values_cpu.to(kGpu);
  g.requires_grad_();
  return {c, g};
}

/// Sets octo::cuda::allow_tf32 for a scope.
class Tf32Scope {
 public:
  explicit Tf32Scope(bool allow) : previous_(octo::cuda::allow_tf32()) {
    octo::cuda::set_allow_tf32(allow);
  }
  ~Tf32Scope() { octo::cuda::set_allow_tf32(previous_); }
  Tf32Scope(const Tf32Scope&) = delete;
  Tf32Scope& operator=(const Tf32Scope&) = delete;

 private:
  bool previous_;
};

struct ConvCase {
  std::string name;
  Shape x, w;
  bool bias;
  std::array<int64_t, 2> stride, padding, dilation;
  int64_t groups;
};

const std::vector<ConvCase> kConvCases = {
    {"3x3 padding 1", {2, 3, 9, 8}, {4, 3, 3, 3}, true, {1, 1}, {1, 1}, {1, 1}, 1},
    {"stride 2", {2, 4, 11, 10}, {6, 4, 3, 3}, true, {2, 2}, {0, 1}, {1, 1}, 1},
    {"dilation 2", {1, 3, 12, 11}, {5, 3, 3, 2}, true, {1, 1}, {2, 1}, {2, 2}, 1},
    {"groups 2", {2, 4, 7, 7}, {6, 2, 3, 3}, true, {1, 1}, {1, 1}, {1, 1}, 2},
    {"depthwise", {2, 5, 8, 8}, {5, 1, 3, 3}, true, {1, 1}, {1, 1}, {1, 1}, 5},
    {"depthwise x2 stride 2", {2, 3, 9, 9}, {6, 1, 3, 3}, true, {2, 2}, {1, 1}, {1, 1}, 3},
    {"no bias", {3, 2, 6, 6}, {3, 2, 2, 2}, false, {2, 1}, {0, 0}, {1, 1}, 1},
    {"1x1", {2, 8, 5, 5}, {4, 8, 1, 1}, true, {1, 1}, {0, 0}, {1, 1}, 1},
    {"mixed", {2, 4, 10, 9}, {4, 2, 3, 2}, true, {2, 1}, {1, 2}, {1, 2}, 2},
};

/// conv2d forward and backward (loss = sum(y * g)) on both devices from the same values; compares
/// the output and the gradients of input, weight and bias. permuted: the input is a
/// non-contiguous permute of an NHWC base (whose gradient is compared).
void compare_conv(const ConvCase& c, DType dtype, bool permuted) {
  INFO(c.name << ", " << dtype << (permuted ? ", permuted input" : ""));
  const Shape base_shape = permuted ? Shape{c.x[0], c.x[2], c.x[3], c.x[1]} : c.x;
  auto view = [&](const Tensor& t) { return permuted ? t.permute({0, 3, 1, 2}) : t; };
  const LeafPair x = leaf_pair(randn_cpu(base_shape, dtype));
  const LeafPair w = leaf_pair(randn_cpu(c.w, dtype));
  const std::optional<LeafPair> b =
      c.bias ? std::optional<LeafPair>(leaf_pair(randn_cpu({c.w[0]}, dtype))) : std::nullopt;
  const Tensor xc = view(x.cpu), xg = view(x.gpu);
  REQUIRE(xg.is_contiguous() == !permuted);

  Tensor yc =
      octo::conv2d(xc, w.cpu, b ? b->cpu : Tensor(), c.stride, c.padding, c.dilation, c.groups);
  Tensor yg =
      octo::conv2d(xg, w.gpu, b ? b->gpu : Tensor(), c.stride, c.padding, c.dilation, c.groups);
  check_match(yg.detach(), yc.detach(), tol(dtype), tol(dtype));

  const Tensor g = randn_cpu(yc.sizes(), dtype);
  octo::sum(octo::mul(yc, g)).backward();
  octo::sum(octo::mul(yg, g.to(kGpu))).backward();
  check_match(x.gpu.grad(), x.cpu.grad(), tol(dtype), tol(dtype));
  check_match(w.gpu.grad(), w.cpu.grad(), tol(dtype), tol(dtype));
  if (b) check_match(b->gpu.grad(), b->cpu.grad(), tol(dtype), tol(dtype));
}

}  // namespace

TEST_CASE("cuda conv2d (cuDNN) matches the cpu, forward and backward", "[cuda][cudnn][conv]") {
  octo::manual_seed(11);
  for (DType dtype : {octo::kFloat64, octo::kFloat32}) {
    for (const ConvCase& c : kConvCases) {
      compare_conv(c, dtype, /*permuted=*/false);
      compare_conv(c, dtype, /*permuted=*/true);
    }
  }
}

TEST_CASE("cuda conv2d takes strided weights, offset views and expanded gradients",
          "[cuda][cudnn][conv]") {
  octo::manual_seed(12);
  for (DType dtype : {octo::kFloat64, octo::kFloat32}) {
    INFO(dtype);
    // The input: samples 1..2 of a [4, 3, 9, 8] base (contiguous, at an offset of one sample);
    // the weight: a permute of a [3, 3, 3, 4] base, i.e. not packed NCHW.
    const LeafPair xb = leaf_pair(randn_cpu({4, 3, 9, 8}, dtype));
    const LeafPair wb = leaf_pair(randn_cpu({3, 3, 3, 4}, dtype));
    const LeafPair b = leaf_pair(randn_cpu({4}, dtype));
    auto x_of = [](const Tensor& t) { return t.slice(0, 1, 3); };
    auto w_of = [](const Tensor& t) { return t.permute({3, 2, 0, 1}); };
    REQUIRE_FALSE(w_of(wb.gpu).is_contiguous());
    Tensor yc = octo::conv2d(x_of(xb.cpu), w_of(wb.cpu), b.cpu, {1, 2}, {1, 0});
    Tensor yg = octo::conv2d(x_of(xb.gpu), w_of(wb.gpu), b.gpu, {1, 2}, {1, 0});
    check_match(yg.detach(), yc.detach(), tol(dtype), tol(dtype));
    // sum() hands back a gradient expanded from one value (stride 0 everywhere)
    octo::sum(yc).backward();
    octo::sum(yg).backward();
    check_match(xb.gpu.grad(), xb.cpu.grad(), tol(dtype), tol(dtype));
    check_match(wb.gpu.grad(), wb.cpu.grad(), tol(dtype), tol(dtype));
    check_match(b.gpu.grad(), b.cpu.grad(), tol(dtype), tol(dtype));
  }
}

TEST_CASE("cuda conv2d with an empty batch or no input channels needs no cuDNN call",
          "[cuda][cudnn][conv]") {
  octo::manual_seed(13);
  // N == 0: empty output; the weight and bias gradients are empty sums (zeros).
  const LeafPair x = leaf_pair(randn_cpu({0, 3, 5, 5}, octo::kFloat64));
  const LeafPair w = leaf_pair(randn_cpu({2, 3, 3, 3}, octo::kFloat64));
  const LeafPair b = leaf_pair(randn_cpu({2}, octo::kFloat64));
  Tensor yc = octo::conv2d(x.cpu, w.cpu, b.cpu, {1, 1}, {1, 1});
  Tensor yg = octo::conv2d(x.gpu, w.gpu, b.gpu, {1, 1}, {1, 1});
  CHECK(yg.sizes() == Shape{0, 2, 5, 5});
  octo::sum(yc).backward();
  octo::sum(yg).backward();
  check_match(w.gpu.grad(), w.cpu.grad(), 0, 0);
  check_match(b.gpu.grad(), b.cpu.grad(), 0, 0);
  // no input channels: the output is the bias broadcast
  const Tensor x0 = randn_cpu({2, 0, 4, 4}, octo::kFloat64);
  const Tensor w0 = randn_cpu({3, 0, 3, 3}, octo::kFloat64);
  const Tensor b0 = randn_cpu({3}, octo::kFloat64);
  check_match(octo::conv2d(x0.to(kGpu), w0.to(kGpu), b0.to(kGpu)), octo::conv2d(x0, w0, b0), 0, 0);
}

TEST_CASE("cuda conv2d caches one algorithm per shape and direction", "[cuda][cudnn][conv]") {
  octo::manual_seed(14);
  using octo::cuda::conv_algorithm_cache_size;
  // Shapes no other test uses.
  const Tensor w = randn_cpu({2, 3, 3, 3}, octo::kFloat32).to(kGpu);
  auto input = [](int64_t h) { return randn_cpu({1, 3, h, 17}, octo::kFloat32).to(kGpu); };

  const size_t start = conv_algorithm_cache_size();
  octo::conv2d(input(13), w);
  CHECK(conv_algorithm_cache_size() == start + 1);  // a new shape: benchmarked once
  octo::conv2d(input(13), w);
  octo::conv2d(input(13), w);
  CHECK(conv_algorithm_cache_size() == start + 1);  // repeats: cache hits
  octo::conv2d(input(14), w);
  CHECK(conv_algorithm_cache_size() == start + 2);  // another shape

  // backward adds the data and filter directions once
  Tensor x = input(13).requires_grad_();
  Tensor wg = w.clone().requires_grad_();
  octo::sum(octo::conv2d(x, wg)).backward();
  CHECK(conv_algorithm_cache_size() == start + 4);
  octo::sum(octo::conv2d(x, wg)).backward();
  CHECK(conv_algorithm_cache_size() == start + 4);

  // float64 is a different problem
  octo::conv2d(input(13).to(octo::kFloat64), w.to(octo::kFloat64));
  CHECK(conv_algorithm_cache_size() == start + 5);
}

TEST_CASE("cuda conv2d with TF32 allowed is a separate choice, close to float32",
          "[cuda][cudnn][conv]") {
  octo::manual_seed(15);
  const Tensor x = randn_cpu({2, 16, 12, 12}, octo::kFloat32);
  const Tensor w = randn_cpu({8, 16, 3, 3}, octo::kFloat32);
  const Tensor want = octo::conv2d(x, w, {}, {1, 1}, {1, 1});
  octo::conv2d(x.to(kGpu), w.to(kGpu), {}, {1, 1}, {1, 1});
  const size_t before = octo::cuda::conv_algorithm_cache_size();
  {
    Tf32Scope tf32(true);
    Tensor got = octo::conv2d(x.to(kGpu), w.to(kGpu), {}, {1, 1}, {1, 1});
    CHECK(octo::cuda::conv_algorithm_cache_size() == before + 1);
    // TF32 keeps 10 mantissa bits: about 1e-3 relative per product, over 144-term sums.
    check_match(got, want, 1e-2, 5e-2);
  }
  // back to exact float32: the earlier choice is reused
  check_match(octo::conv2d(x.to(kGpu), w.to(kGpu), {}, {1, 1}, {1, 1}), want, 1e-4, 1e-4);
  CHECK(octo::cuda::conv_algorithm_cache_size() == before + 1);
}

namespace {

struct BnCase {
  Shape shape;
  bool affine;
  bool track_running_stats;
  bool permuted;        // 4-d only: the input is a permute of an NHWC base
  bool strided_params;  // weight, bias and running stats are every-other-element views
};

/// Two training steps, then one eval step, of batch_norm on both devices from the same values:
/// compares outputs, running statistics and the gradients of input, weight and bias.
void compare_batch_norm(const BnCase& bc, DType dtype) {
  const Shape& shape = bc.shape;
  INFO(octo::shape_str(shape) << ", " << dtype << (bc.affine ? "" : ", affine false")
                              << (bc.track_running_stats ? "" : ", no running stats")
                              << (bc.permuted ? ", permuted input" : "")
                              << (bc.strided_params ? ", strided parameters" : ""));
  const int64_t C = shape[1];
  const double tl = tol(dtype);
  // A [C] tensor, or an every-other-element view of a [2C] one.
  auto channel_tensor = [&](const Tensor& values_cpu, const Device& device) {
    if (!bc.strided_params) return values_cpu.to(device);
    Tensor base = octo::zeros({2 * C}, {.dtype = dtype}).to(device);
    Tensor v = base.slice(0, 0, std::nullopt, 2);
    v.copy_(values_cpu.to(device));
    return v;
  };
  std::optional<LeafPair> w, b;
  if (bc.affine) {
    w = leaf_pair(randn_cpu({C}, dtype));
    b = leaf_pair(randn_cpu({C}, dtype));
    if (bc.strided_params) {
      // leaves that are strided: views of zero-padded bases made leaves again
      for (LeafPair* p : {&*w, &*b}) {
        p->cpu = channel_tensor(p->cpu.detach(), octo::kCPU).requires_grad_();
        p->gpu = channel_tensor(p->cpu.detach(), kGpu).requires_grad_();
      }
    }
  }
  Tensor rm_c, rv_c, rm_g, rv_g;
  if (bc.track_running_stats) {
    const Tensor rm0 = randn_cpu({C}, dtype);
    const Tensor rv0 = octo::rand({C}, {.dtype = dtype}) + 0.5;
    rm_c = channel_tensor(rm0, octo::kCPU);
    rv_c = channel_tensor(rv0, octo::kCPU);
    rm_g = channel_tensor(rm0, kGpu);
    rv_g = channel_tensor(rv0, kGpu);
  }
  const Shape base_shape = bc.permuted ? Shape{shape[0], shape[2], shape[3], shape[1]} : shape;
  auto view = [&](const Tensor& t) { return bc.permuted ? t.permute({0, 3, 1, 2}) : t; };

  for (int step = 0; step < 3; ++step) {
    const bool training = step < 2 || !bc.track_running_stats;
    INFO("step " << step << (training ? " (training)" : " (eval)"));
    // mean 1, std 2: the centring matters
    const LeafPair x = leaf_pair(randn_cpu(base_shape, dtype) * 2.0 + 1.0);
    Tensor yc = octo::batch_norm(view(x.cpu), rm_c, rv_c, w ? w->cpu : Tensor(),
                                 b ? b->cpu : Tensor(), training, 0.2, 1e-5);
    Tensor yg = octo::batch_norm(view(x.gpu), rm_g, rv_g, w ? w->gpu : Tensor(),
                                 b ? b->gpu : Tensor(), training, 0.2, 1e-5);
    check_match(yg.detach(), yc.detach(), tl, tl);
    if (bc.track_running_stats) {
      check_match(rm_g, rm_c, tl, tl);
      check_match(rv_g, rv_c, tl, tl);
    }
    const Tensor g = randn_cpu(shape, dtype);
    octo::sum(octo::mul(yc, g)).backward();
    octo::sum(octo::mul(yg, g.to(kGpu))).backward();
    check_match(x.gpu.grad(), x.cpu.grad(), tl, tl);
    if (w) {  // accumulated over the steps on both devices
      check_match(w->gpu.grad(), w->cpu.grad(), tl, tl);
      check_match(b->gpu.grad(), b->cpu.grad(), tl, tl);
    }
  }
}

}  // namespace

TEST_CASE("cuda batch_norm (cuDNN) matches the cpu: train, running stats, eval, backward",
          "[cuda][cudnn][norm]") {
  octo::manual_seed(21);
  const std::vector<BnCase> cases = {
      {{8, 3}, true, true, false, false},           // 2-d: [N, C] as [N, C, 1, 1]
      {{4, 3, 5}, true, true, false, false},        // 3-d: [N, C, L] as [N, C, L, 1]
      {{2, 3, 4, 5}, true, true, false, false},     // 4-d
      {{2, 3, 2, 3, 2}, true, true, false, false},  // 5-d: spatial dims flattened
      {{2, 3, 4, 5}, false, true, false, false},    // affine false
      {{6, 4}, false, true, false, false},          // affine false, 2-d
      {{2, 3, 4, 5}, true, false, false, false},    // no running statistics
      {{2, 3, 4, 5}, true, true, true, false},      // non-contiguous input
      {{3, 4, 5}, true, true, false, true},         // strided weight, bias and running stats
  };
  for (DType dtype : {octo::kFloat64, octo::kFloat32}) {
    for (const BnCase& c : cases) compare_batch_norm(c, dtype);
  }
}

TEST_CASE("cuda batch_norm on an empty batch leaves the running stats alone",
          "[cuda][cudnn][norm]") {
  octo::manual_seed(22);
  const Tensor rm0 = randn_cpu({3}, octo::kFloat32);
  Tensor rm_c = rm0.clone(), rv_c = octo::ones({3});
  Tensor rm_g = rm0.to(kGpu), rv_g = octo::ones({3}, {.device = kGpu});
  const LeafPair w = leaf_pair(randn_cpu({3}, octo::kFloat32));
  const LeafPair b = leaf_pair(randn_cpu({3}, octo::kFloat32));
  const LeafPair x = leaf_pair(randn_cpu({0, 3, 4}, octo::kFloat32));
  Tensor yc = octo::batch_norm(x.cpu, rm_c, rv_c, w.cpu, b.cpu, true);
  Tensor yg = octo::batch_norm(x.gpu, rm_g, rv_g, w.gpu, b.gpu, true);
  CHECK(yg.sizes() == Shape{0, 3, 4});
  check_match(rm_g, rm_c, 0, 0);
  check_match(rv_g, rv_c, 0, 0);
  octo::sum(yc).backward();
  octo::sum(yg).backward();
  check_match(w.gpu.grad(), w.cpu.grad(), 0, 0);
  check_match(b.gpu.grad(), b.cpu.grad(), 0, 0);
}

TEST_CASE("cuda batch_norm rejects an eps below cuDNN's minimum with a clear error",
          "[cuda][cudnn][norm]") {
  const Tensor x = octo::randn({4, 3, 2}, {.device = kGpu});
  const Tensor rm = octo::zeros({3}, {.device = kGpu}), rv = octo::ones({3}, {.device = kGpu});
  for (bool training : {true, false}) {
    INFO("training " << training);
    CHECK_THROWS_AS(octo::batch_norm(x, rm, rv, {}, {}, training, 0.1, -1e-3),
                    octo::NotImplementedError);
    CHECK_THROWS_WITH(
        octo::batch_norm(x, rm, rv, {}, {}, training, 0.1, -1e-3),
        Catch::Contains("eps >= CUDNN_BN_MIN_EPSILON") && Catch::Contains("got eps = -0.001"));
  }
}

TEST_CASE("cuda batch_norm chunks large eval batches and rejects oversized training batches",
          "[cuda][cudnn][norm]") {
  octo::manual_seed(23);
  // eval: 70000 samples, over cuDNN's inference limit of 65535, run in two chunks
  const Tensor x = randn_cpu({70000, 2}, octo::kFloat64);
  const Tensor rm = randn_cpu({2}, octo::kFloat64);
  const Tensor rv = octo::rand({2}, {.dtype = octo::kFloat64}) + 0.5;
  const Tensor w = randn_cpu({2}, octo::kFloat64), b = randn_cpu({2}, octo::kFloat64);
  check_match(octo::batch_norm(x.to(kGpu), rm.to(kGpu), rv.to(kGpu), w.to(kGpu), b.to(kGpu),
                               /*training=*/false),
              octo::batch_norm(x, rm, rv, w, b, /*training=*/false), 1e-10, 1e-10);
  // training: one sample more than cuDNN takes
  const Tensor big = octo::randn({880802, 1}, {.device = kGpu});
  CHECK_THROWS_AS(octo::batch_norm(big, {}, {}, {}, {}, /*training=*/true),
                  octo::NotImplementedError);
  CHECK_THROWS_WITH(octo::batch_norm(big, {}, {}, {}, {}, /*training=*/true),
                    Catch::Contains("at most 880801 samples") && Catch::Contains("got 880802"));
}
