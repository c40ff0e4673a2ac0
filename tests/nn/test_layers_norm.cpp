// BatchNorm1d/2d and LayerNorm layers: forward/backward vs references, running stats, errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <octo/octo.h>

#include "nn/layer_helpers.h"

using octo::Shape;
using octo::Tensor;
namespace nn = octo::nn;
using namespace layer_test;

// --- BatchNorm
// ------------------------------------------------------------------------------------

namespace {
/// Normalisation over groups of element indices (channels for batch norm, rows for layer norm)
/// with per-element gamma/beta: y, xhat, batch mean and biased variance per group, and for an
/// upstream gradient g: dx = invstd / M * (M gh - sum gh - xhat sum(gh xhat)), gh = g * gamma.
struct NormRef {
  Vec y, xhat, dx, mean, var;
};
NormRef ref_norm(const Vec& x, const std::vector<std::vector<size_t>>& groups, const Vec& gamma,
                 const Vec& beta, double eps, const Vec& g) {
  NormRef r;
  r.y.resize(x.size());
  r.xhat.resize(x.size());
  r.dx.resize(x.size());
  for (const auto& idx : groups) {
    const double M = static_cast<double>(idx.size());
    double mu = 0, var = 0;
    for (size_t i : idx) mu += x[i];
    mu /= M;
    for (size_t i : idx) var += (x[i] - mu) * (x[i] - mu);
    var /= M;
    r.mean.push_back(mu);
    r.var.push_back(var);
    const double invstd = 1.0 / std::sqrt(var + eps);
    double sg = 0, sgx = 0;
    for (size_t i : idx) {
      r.xhat[i] = (x[i] - mu) * invstd;
      r.y[i] = gamma[i] * r.xhat[i] + beta[i];
      sg += g[i] * gamma[i];
      sgx += g[i] * gamma[i] * r.xhat[i];
    }
    for (size_t i : idx) r.dx[i] = invstd / M * (M * g[i] * gamma[i] - sg - r.xhat[i] * sgx);
  }
  return r;
}

/// Channel c of [N, C, S] data: indices (n * C + c) * S + s.
std::vector<std::vector<size_t>> channel_groups(int64_t N, int64_t C, int64_t S) {
  std::vector<std::vector<size_t>> groups(static_cast<size_t>(C));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t s = 0; s < S; ++s)
        groups[static_cast<size_t>(c)].push_back(static_cast<size_t>((n * C + c) * S + s));
  return groups;
}

/// Per-element values of a per-channel vector over [N, C, S].
Vec per_channel(const Vec& v, int64_t N, int64_t C, int64_t S) {
  Vec out;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t s = 0; s < S; ++s) out.push_back(v[static_cast<size_t>(c)]);
  return out;
}

void set_values(Tensor& t, const Tensor& v) {
  octo::NoGradGuard no_grad;
  t.copy_(v);
}
}  // namespace

TEST_CASE("BatchNorm2d in training: batch statistics, running-stat update, backward") {
  const int64_t N = 3, C = 4, H = 3, W = 2, S = H * W;
  nn::BatchNorm2d bn(C);
  bn.to(octo::kFloat64);
  set_values(bn.weight, rand_tensor({C}, 1, 0.5, 1.5));
  set_values(bn.bias, rand_tensor({C}, 2));
  Vec rm(C, 0.0), rv(C, 1.0);
  for (int step = 1; step <= 2; ++step) {
    Tensor x = leaf({N, C, H, W}, 10 + step);
    bn.zero_grad();
    Tensor y = bn.forward(x);
    Vec g = backprop(y, 20 + step);
    NormRef r = ref_norm(vals(x), channel_groups(N, C, S), per_channel(vals(bn.weight), N, C, S),
                         per_channel(vals(bn.bias), N, C, S), 1e-5, g);
    check_close(vals(y), r.y);
    check_close(vals(x.grad()), r.dx, 1e-8);
    Vec gw(C, 0.0), gb(C, 0.0);
    auto groups = channel_groups(N, C, S);
    for (int64_t c = 0; c < C; ++c)
      for (size_t i : groups[static_cast<size_t>(c)]) {
        gw[static_cast<size_t>(c)] += g[i] * r.xhat[i];
        gb[static_cast<size_t>(c)] += g[i];
      }
    check_close(vals(bn.weight.grad()), gw, 1e-8);
    check_close(vals(bn.bias.grad()), gb, 1e-8);
    // running = 0.9 running + 0.1 batch, with the unbiased variance
    const double M = static_cast<double>(N * S);
    for (int64_t c = 0; c < C; ++c) {
      rm[c] = 0.9 * rm[c] + 0.1 * r.mean[c];
      rv[c] = 0.9 * rv[c] + 0.1 * r.var[c] * M / (M - 1);
    }
    check_close(vals(bn.running_mean), rm, 1e-12);
    check_close(vals(bn.running_var), rv, 1e-12);
    CHECK(bn.num_batches_tracked.item<int64_t>() == step);
  }
  CHECK(bn.num_batches_tracked.dtype() == octo::kInt64);
  CHECK(bn.num_batches_tracked.dim() == 0);
}

TEST_CASE("BatchNorm2d in eval uses the running statistics and leaves them alone") {
  const int64_t N = 2, C = 3, H = 2, W = 3;
  nn::BatchNorm2d bn(C);
  bn.to(octo::kFloat64);
  set_values(bn.weight, rand_tensor({C}, 3, 0.5, 1.5));
  set_values(bn.bias, rand_tensor({C}, 4));
  set_values(bn.running_mean, rand_tensor({C}, 5));
  set_values(bn.running_var, rand_tensor({C}, 6, 0.5, 2.0));
  bn.eval();
  Tensor x = leaf({N, C, H, W}, 7);
  Tensor y = bn.forward(x);
  Vec g = backprop(y, 8);
  Vec xv = vals(x), w = vals(bn.weight), b = vals(bn.bias), m = vals(bn.running_mean),
      v = vals(bn.running_var);
  Vec want, want_dx, gw(C, 0.0), gb(C, 0.0);
  for (int64_t i = 0; i < N * C * H * W; ++i) {
    const size_t c = static_cast<size_t>((i / (H * W)) % C);
    const double invstd = 1.0 / std::sqrt(v[c] + 1e-5);
    want.push_back((xv[i] - m[c]) * invstd * w[c] + b[c]);
    want_dx.push_back(g[i] * w[c] * invstd);
    gw[c] += g[i] * (xv[i] - m[c]) * invstd;
    gb[c] += g[i];
  }
  check_close(vals(y), want);
  check_close(vals(x.grad()), want_dx);
  check_close(vals(bn.weight.grad()), gw);
  check_close(vals(bn.bias.grad()), gb);
  check_close(vals(bn.running_mean), m, 0.0);
  check_close(vals(bn.running_var), v, 0.0);
  CHECK(bn.num_batches_tracked.item<int64_t>() == 0);
  check_clone_equal(bn, x.detach());
}

TEST_CASE("BatchNorm1d on [N, C] and [N, C, L]; momentum=None; no running stats; no affine") {
  for (const Shape& shape : {Shape{6, 3}, Shape{4, 3, 5}}) {
    const int64_t N = shape[0], C = shape[1], S = shape.size() == 3 ? shape[2] : 1;
    nn::BatchNorm1d bn(C);
    bn.to(octo::kFloat64);
    Tensor x = leaf(shape, 30 + static_cast<uint32_t>(S));
    Tensor y = bn.forward(x);
    Vec g = backprop(y, 40);
    NormRef r = ref_norm(vals(x), channel_groups(N, C, S), Vec(x.numel(), 1.0), Vec(x.numel(), 0.0),
                         1e-5, g);
    check_close(vals(y), r.y);
    check_close(vals(x.grad()), r.dx, 1e-8);
  }
  // momentum = None: the running statistics are the cumulative average of the batch stats
  nn::BatchNorm1d cma(2, {.momentum = std::nullopt});
  cma.to(octo::kFloat64);
  Tensor a = rand_tensor({5, 2}, 50), b = rand_tensor({5, 2}, 51);
  cma.forward(a);
  cma.forward(b);
  Vec ma = vals(octo::mean(a, {0})), mb = vals(octo::mean(b, {0}));
  check_close(vals(cma.running_mean), {(ma[0] + mb[0]) / 2, (ma[1] + mb[1]) / 2}, 1e-12);
  CHECK(repr(cma) ==
        "BatchNorm1d(2, eps=1e-05, momentum=None, affine=True, track_running_stats=True)");

  // track_running_stats = false: no buffers, batch statistics even in eval
  nn::BatchNorm1d nostats(2, {.track_running_stats = false});
  nostats.to(octo::kFloat64);
  CHECK(state_keys(nostats) == std::set<std::string>{"weight", "bias"});
  nostats.eval();
  NormRef r =
      ref_norm(vals(a), channel_groups(5, 2, 1), Vec(10, 1.0), Vec(10, 0.0), 1e-5, Vec(10, 0.0));
  check_close(vals(nostats.forward(a)), r.y);
  // affine = false: no parameters
  nn::BatchNorm2d plain(3, {.affine = false});
  CHECK(plain.parameters().empty());
  CHECK(state_keys(plain) ==
        std::set<std::string>{"running_mean", "running_var", "num_batches_tracked"});
}

TEST_CASE("BatchNorm: names, printing, init, clone, errors") {
  nn::BatchNorm2d bn(64);
  CHECK(state_keys(bn) == std::set<std::string>{"weight", "bias", "running_mean", "running_var",
                                                "num_batches_tracked"});
  check_close(vals(bn.weight), Vec(64, 1.0), 0.0);
  check_close(vals(bn.bias), Vec(64, 0.0), 0.0);
  check_close(vals(bn.running_mean), Vec(64, 0.0), 0.0);
  check_close(vals(bn.running_var), Vec(64, 1.0), 0.0);
  CHECK(bn.buffers().size() == 3);
  CHECK(repr(bn) ==
        "BatchNorm2d(64, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)");
  CHECK(repr(nn::BatchNorm1d(8, {.eps = 1e-3, .momentum = 0.01, .affine = false})) ==
        "BatchNorm1d(8, eps=0.001, momentum=0.01, affine=False, track_running_stats=True)");

  // clone in training mode: same output, same running-stat update, independent buffers
  nn::BatchNorm2d src(3);
  Tensor x = octo::randn({4, 3, 2, 2});
  src.forward(x);
  auto copy = std::dynamic_pointer_cast<nn::BatchNorm2d>(src.clone());
  REQUIRE(copy);
  CHECK(copy->is_training());
  check_close(vals(copy->forward(x)), vals(src.forward(x)), 1e-6);
  check_close(vals(copy->running_mean), vals(src.running_mean), 1e-7);
  CHECK(copy->num_batches_tracked.item<int64_t>() == 2);
  CHECK_FALSE(copy->running_mean.is_alias_of(src.running_mean));
  src.reset_running_stats();
  CHECK(src.num_batches_tracked.item<int64_t>() == 0);
  CHECK(copy->num_batches_tracked.item<int64_t>() == 2);

  check_throws<octo::ValueError>(
      [&] {
        bn.forward(octo::randn({2, 64, 3}));
      },
      "BatchNorm2d: expected 4D input (got 3D input");
  check_throws<octo::ValueError>(
      [] {
        nn::BatchNorm1d(3).forward(octo::randn({2, 3, 4, 4}));
      },
      "BatchNorm1d: expected 2D or 3D input (got 4D input");
  check_throws<octo::ValueError>(
      [&] {
        bn.forward(octo::randn({2, 3, 4, 4}));
      },
      "expected input with 64 channels");
  check_throws<octo::ValueError>(
      [] {
        nn::BatchNorm1d(3).forward(octo::randn({1, 3}));
      },
      "Expected more than 1 value per channel");
  check_throws<octo::ValueError>([] { nn::BatchNorm2d(0); }, "num_features must be positive");
}

TEST_CASE("Sequential fuses a BatchNorm followed by a ReLU, with the unfused bits") {
  // Note [Sequential fusion]: the same values, gradients and running statistics as the two
  // modules run in turn; only the tape has one node for the pair.
  struct MyReLU : nn::ReLU {  // a subclass: run as written, never fused
    Tensor forward(const Tensor& x) override { return nn::ReLU::forward(x); }
  };
  auto make = [](bool subclass) {
    octo::manual_seed(7);
    std::shared_ptr<nn::Module> relu =
        subclass ? std::make_shared<MyReLU>()
                 : std::shared_ptr<nn::Module>(std::make_shared<nn::ReLU>());
    return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
        std::make_shared<nn::Conv2d>(2, 3, 3, nn::Conv2dOptions{.padding = 1, .bias = false}),
        std::make_shared<nn::BatchNorm2d>(3), relu, std::make_shared<nn::Flatten>(),
        std::make_shared<nn::Linear>(3 * 5 * 5, 4), std::make_shared<nn::BatchNorm1d>(4),
        std::make_shared<nn::ReLU>()});
  };
  for (bool training : {true, false}) {
    INFO("training " << training);
    auto fused = make(false), plain = make(true);
    fused->train(training);
    plain->train(training);
    octo::manual_seed(8);
    Tensor x = octo::randn({6, 2, 5, 5});
    Tensor yf = fused->forward(x), yp = plain->forward(x);
    // The first pair of `plain` is not fused (MyReLU); its last pair is.
    CHECK(yf.grad_fn()->name() == "BatchNormReluBackward");
    Tensor g = octo::randn(yf.sizes());
    yf.backward(g);
    // The unfused reference, module by module.
    auto ref = make(false);
    ref->train(training);
    Tensor h = x;
    for (size_t i = 0; i < ref->size(); ++i) h = (*ref)[i]->forward(h);
    CHECK(h.grad_fn()->name() == "ReluBackward");
    h.backward(g);
    CHECK(vals(yf) == vals(h));
    CHECK(vals(yp) == vals(h));
    const auto pf = fused->named_parameters(), pr = ref->named_parameters();
    REQUIRE(pf.size() == pr.size());
    for (size_t i = 0; i < pf.size(); ++i) {
      INFO(pf[i].first);
      CHECK(vals(pf[i].second.grad()) == vals(pr[i].second.grad()));
    }
    const auto bf = fused->named_buffers(), br = ref->named_buffers();
    for (size_t i = 0; i < bf.size(); ++i) {
      INFO(bf[i].first);
      CHECK(vals(bf[i].second) == vals(br[i].second));
    }
  }
}

// --- LayerNorm
// ------------------------------------------------------------------------------------

TEST_CASE("LayerNorm: forward, backward, names, printing, clone") {
  const int64_t R = 4, A = 2, B = 3, D = A * B;
  nn::LayerNorm ln({A, B}, {.eps = 1e-4});
  ln.to(octo::kFloat64);
  check_close(vals(ln.weight), Vec(D, 1.0), 0.0);
  check_close(vals(ln.bias), Vec(D, 0.0), 0.0);
  set_values(ln.weight, rand_tensor({A, B}, 60, 0.5, 1.5));
  set_values(ln.bias, rand_tensor({A, B}, 61));
  Tensor x = leaf({2, 2, A, B}, 62);
  Tensor y = ln.forward(x);
  Vec g = backprop(y, 63);
  std::vector<std::vector<size_t>> rows(R);
  Vec gamma, beta;
  Vec w = vals(ln.weight), b = vals(ln.bias);
  for (int64_t r = 0; r < R; ++r)
    for (int64_t j = 0; j < D; ++j) {
      rows[r].push_back(static_cast<size_t>(r * D + j));
      gamma.push_back(w[j]);
      beta.push_back(b[j]);
    }
  NormRef ref = ref_norm(vals(x), rows, gamma, beta, 1e-4, g);
  check_close(vals(y), ref.y);
  check_close(vals(x.grad()), ref.dx, 1e-8);
  Vec gw(D, 0.0), gb(D, 0.0);
  for (int64_t i = 0; i < R * D; ++i) {
    gw[i % D] += g[i] * ref.xhat[i];
    gb[i % D] += g[i];
  }
  check_close(vals(ln.weight.grad()), gw, 1e-8);
  check_close(vals(ln.bias.grad()), gb, 1e-8);

  CHECK(state_keys(ln) == std::set<std::string>{"weight", "bias"});
  CHECK(nn::LayerNorm({5}, {.elementwise_affine = false}).parameters().empty());
  CHECK(repr(nn::LayerNorm({10})) == "LayerNorm((10,), eps=1e-05, elementwise_affine=True)");
  CHECK(repr(ln) == "LayerNorm((2, 3), eps=0.0001, elementwise_affine=True)");
  check_clone_equal(ln, x.detach());
  check_throws<octo::ValueError>(
      [&] {
        ln.forward(octo::randn({2, 3, 2}, {.dtype = octo::kFloat64}));
      },
      "normalized_shape");
}
