// Tests for optim: gradient clipping (clip_grad_norm_, clip_grad_value_).
#include <octo/octo.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "optim/optim_helpers.h"

using namespace optim_test;

// --- gradient clipping --------------------------------------------------------------------------

namespace {

std::vector<Tensor> params_with_grads(const std::vector<Vec>& grads, octo::DType dt,
                                      bool transposed = false) {
  std::vector<Tensor> ps;
  for (size_t k = 0; k < grads.size(); ++k) {
    ps.push_back(make_param(Vec(grads[k].size(), 0.0), kShapes[k], dt));
    give_grad(ps.back(), grads[k], transposed);
  }
  return ps;
}

double ref_norm(const std::vector<Vec>& grads, double p) {
  double acc = 0;
  for (const Vec& g : grads)
    for (double x : g)
      acc = std::isinf(p) ? std::max(acc, std::abs(x)) : acc + std::pow(std::abs(x), p);
  return std::isinf(p) ? acc : std::pow(acc, 1.0 / p);
}

}  // namespace

TEST_CASE("clip_grad_norm_: total norm and scaling match hand-computed values", "[optim][clip]") {
  const double p = GENERATE(2.0, 1.0, 3.0, optim::kInf);
  const bool transposed = GENERATE(false, true);
  INFO("norm_type " << p << ", non-contiguous grads " << transposed);
  std::vector<Vec> grads;
  for (size_t k = 0; k < kShapes.size(); ++k)
    grads.push_back(random_vec(octo::detail::shape_numel(kShapes[k]), 50u + k, 2.0));
  const double total = ref_norm(grads, p);
  SECTION("clipping") {
    auto ps = params_with_grads(grads, octo::kFloat64, transposed);
    const double max_norm = total / 3;
    Tensor got = optim::clip_grad_norm_(ps, max_norm, p);
    CHECK(got.dim() == 0);
    CHECK(got.item<double>() == Approx(total).epsilon(1e-12));
    const double coef = max_norm / (total + 1e-6);
    for (size_t k = 0; k < ps.size(); ++k) {
      Vec want = grads[k];
      for (double& x : want) x *= coef;
      check_close(values(ps[k].grad()), want, 1e-12, 1e-14);
    }
    // the clipped gradients have the requested norm (up to the 1e-6)
    std::vector<Vec> after;
    for (auto& q : ps) after.push_back(values(q.grad()));
    CHECK(ref_norm(after, p) == Approx(max_norm).epsilon(1e-6));
  }
  SECTION("no clipping below max_norm") {
    auto ps = params_with_grads(grads, octo::kFloat32, transposed);
    Tensor got = optim::clip_grad_norm_(ps, total * 2, p);
    CHECK(got.dtype() == octo::kFloat32);
    CHECK(got.item<double>() == Approx(total).epsilon(1e-5));
    for (size_t k = 0; k < ps.size(); ++k) {
      Vec want = grads[k];
      for (double& x : want) x = static_cast<float>(x);
      CHECK(values(ps[k].grad()) == want);
    }
  }
}

TEST_CASE("clip_grad_norm_: edge cases and errors", "[optim][clip][errors]") {
  SECTION("no gradients: norm 0") {
    Tensor w = make_param({1.0}, {1});
    CHECK(optim::clip_grad_norm_({w}, 1.0).item<double>() == 0.0);
  }
  SECTION("parameters without a gradient and empty gradients are skipped") {
    Tensor a = make_param({0.0, 0.0}, {2});
    Tensor b = make_param({0.0}, {1});
    Tensor e = make_param({}, {0});
    give_grad(a, {3.0, 4.0});
    e.set_grad(octo::zeros({0}, {.dtype = octo::kFloat64}));
    Tensor n = optim::clip_grad_norm_({a, b, e}, 1.0);
    CHECK(n.item<double>() == Approx(5.0));
    check_close(values(a.grad()), {3.0 / (5.0 + 1e-6), 4.0 / (5.0 + 1e-6)}, 1e-14, 0);
    CHECK(optim::clip_grad_norm_({e}, 1.0, optim::kInf).item<double>() == 0.0);
  }
  SECTION("gradients on different devices") {
    Tensor a = make_param({0.0, 0.0}, {2});
    Tensor b = make_param({0.0}, {1}, octo::kFloat64, octo::Device("cpu:1"));
    give_grad(a, {1.0, 2.0});
    give_grad(b, {-2.0});
    Tensor n = optim::clip_grad_norm_({a, b}, 1.5, optim::kInf);
    CHECK(n.device() == octo::kCPU);
    CHECK(n.item<double>() == 2.0);
    check_close(values(b.grad()), {-2.0 * 1.5 / (2.0 + 1e-6)}, 1e-14, 0);
    CHECK(b.grad().device() == octo::Device("cpu:1"));
  }
  SECTION("non-finite norms") {
    Tensor a = make_param({0.0, 0.0}, {2});
    give_grad(a, {INFINITY, 1.0});
    CHECK_ERROR(optim::clip_grad_norm_({a}, 1.0, 2.0, true), octo::ValueError, "non-finite");
    CHECK(values(a.grad())[1] == 1.0);  // untouched when it throws
    Tensor n = optim::clip_grad_norm_({a}, 1.0);
    CHECK(std::isinf(n.item<double>()));
    give_grad(a, {NAN, 1.0});
    CHECK_ERROR(optim::clip_grad_norm_({a}, 1.0, optim::kInf, true), octo::ValueError,
                "non-finite");
  }
  SECTION("bad norm types") {
    Tensor a = make_param({0.0}, {1});
    give_grad(a, {1.0});
    CHECK_ERROR(optim::clip_grad_norm_({a}, 1.0, 0.0), octo::ValueError, "norm_type");
    CHECK_ERROR(optim::clip_grad_norm_({a}, 1.0, -optim::kInf), octo::ValueError, "norm_type");
  }
}

TEST_CASE("clip_grad_value_: clamps each gradient element", "[optim][clip]") {
  const auto dt = GENERATE(octo::kFloat32, octo::kFloat64);
  const bool transposed = GENERATE(false, true);
  std::vector<Vec> grads;
  for (size_t k = 0; k < kShapes.size(); ++k)
    grads.push_back(random_vec(octo::detail::shape_numel(kShapes[k]), 80u + k, 2.0));
  for (auto& g : grads)
    for (double& x : g) x = static_cast<float>(x);
  auto ps = params_with_grads(grads, dt, transposed);
  Tensor no_grad = make_param({5.0}, {1});
  ps.push_back(no_grad);
  optim::clip_grad_value_(ps, 0.75);
  for (size_t k = 0; k < grads.size(); ++k) {
    Vec want = grads[k];
    for (double& x : want) x = std::clamp(x, -0.75, 0.75);
    CHECK(values(ps[k].grad()) == want);
  }
  CHECK_FALSE(no_grad.grad().defined());
  CHECK_ERROR(optim::clip_grad_value_(ps, -1.0), octo::ValueError, "clip_value");
}
