// Tests for GradScaler: skipped steps on inf/NaN, backoff, growth, equivalence with plain training.
#include <octo/octo.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "optim/optim_helpers.h"

using namespace optim_test;

namespace {

/// loss = sum((p * x - y)^2) for fixed x, y: a gradient that depends on p.
Tensor quadratic_loss(const Tensor& p, int step) {
  const int64_t n = p.numel();
  Tensor x = octo::tensor(random_vec(static_cast<size_t>(n), 300u + step), p.sizes(),
                          {.dtype = p.dtype()});
  Tensor y = octo::tensor(random_vec(static_cast<size_t>(n), 400u + step), p.sizes(),
                          {.dtype = p.dtype()});
  Tensor d = p * x - y;
  return octo::sum(d * d);
}

Tensor float_param(unsigned seed) {
  return make_param(random_vec(12, seed), {3, 4}, octo::kFloat32);
}

}  // namespace

TEST_CASE("GradScaler: scale() multiplies the loss by the scale", "[optim][grad_scaler]") {
  octo::GradScaler scaler;
  CHECK(scaler.get_scale() == 65536.0);
  Tensor loss = octo::scalar_tensor(1.5, {.dtype = octo::kFloat32});
  CHECK(scaler.scale(loss).item<double>() == 1.5 * 65536.0);
  // a 16-bit loss is scaled in float32, so 65536 * 2 does not overflow float16
  Tensor half = octo::scalar_tensor(2.0, {.dtype = octo::kFloat16});
  Tensor scaled = scaler.scale(half);
  CHECK(scaled.dtype() == octo::kFloat32);
  CHECK(scaled.item<double>() == 131072.0);
  octo::GradScaler off({.enabled = false});
  CHECK(off.get_scale() == 1.0);
  CHECK(off.scale(loss).item<double>() == 1.5);
}

TEST_CASE("GradScaler: an inf or NaN gradient skips the step and halves the scale",
          "[optim][grad_scaler]") {
  const double bad =
      GENERATE(std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
               std::numeric_limits<double>::quiet_NaN());
  INFO("bad gradient value " << bad);
  Tensor p = float_param(1);
  Tensor q = float_param(2);
  const Vec p0 = values(p), q0 = values(q);
  optim::SGD opt({p, q}, {.lr = 0.1});
  octo::GradScaler scaler({.init_scale = 1024.0});
  Vec gp(12, 1.0), gq(12, 2.0);
  gq[5] = bad;
  give_grad(p, gp);
  give_grad(q, gq);
  CHECK_FALSE(scaler.step(opt));
  check_close(values(p), p0, 0, 0);
  for (size_t i = 0; i < q0.size(); ++i) {
    INFO("element " << i);
    CHECK(values(q)[i] == q0[i]);
  }
  // the gradients were unscaled all the same
  check_close(values(p.grad()), Vec(12, 1.0 / 1024.0), 0, 0);
  scaler.update();
  CHECK(scaler.get_scale() == 512.0);
  CHECK(scaler.growth_tracker() == 0);

  // the next good iteration steps
  give_grad(p, gp);
  give_grad(q, Vec(12, 2.0));
  CHECK(scaler.step(opt));
  CHECK(values(p)[0] == Approx(p0[0] - 0.1 * 1.0 / 512.0).epsilon(1e-6));
  scaler.update();
  CHECK(scaler.get_scale() == 512.0);
  CHECK(scaler.growth_tracker() == 1);
}

TEST_CASE("GradScaler: the scale grows after growth_interval good steps", "[optim][grad_scaler]") {
  Tensor p = float_param(3);
  optim::SGD opt({p}, {.lr = 0.01});
  octo::GradScaler scaler({.init_scale = 8.0, .growth_factor = 4.0, .growth_interval = 3});
  for (int it = 0; it < 7; ++it) {
    give_grad(p, Vec(12, 1.0));
    CHECK(scaler.step(opt));
    scaler.update();
    INFO("iteration " << it);
    // 3 good steps: x4, 3 more: x4 again
    const double want = it < 2 ? 8.0 : (it < 5 ? 32.0 : 128.0);
    CHECK(scaler.get_scale() == want);
  }
  CHECK(scaler.growth_tracker() == 1);
  // an overflow resets the growth counter
  give_grad(p, Vec(12, std::numeric_limits<double>::infinity()));
  CHECK_FALSE(scaler.step(opt));
  scaler.update();
  CHECK(scaler.get_scale() == 64.0);
  CHECK(scaler.growth_tracker() == 0);
}

TEST_CASE("GradScaler: without overflow, training equals training without a scaler",
          "[optim][grad_scaler]") {
  const bool explicit_unscale = GENERATE(false, true);
  INFO("explicit unscale_ " << explicit_unscale);
  Tensor a = float_param(5);
  Tensor b = float_param(5);
  optim::SGD opt_a({a}, {.lr = 0.05, .momentum = 0.9});
  optim::SGD opt_b({b}, {.lr = 0.05, .momentum = 0.9});
  octo::GradScaler scaler({.init_scale = 1024.0, .growth_interval = 4});
  const int steps = 10;
  for (int s = 0; s < steps; ++s) {
    opt_a.zero_grad();
    quadratic_loss(a, s).backward();
    opt_a.step();

    opt_b.zero_grad();
    scaler.scale(quadratic_loss(b, s)).backward();
    if (explicit_unscale) scaler.unscale_(opt_b);
    CHECK(scaler.step(opt_b));
    scaler.update();
  }
  CHECK(scaler.get_scale() == 1024.0 * 4.0);  // grew after steps 4 and 8
  check_close(values(b), values(a), 1e-6, 1e-6);
}

TEST_CASE("GradScaler: a disabled scaler steps plainly", "[optim][grad_scaler]") {
  Tensor p = float_param(6);
  const Vec p0 = values(p);
  optim::SGD opt({p}, {.lr = 1.0});
  octo::GradScaler scaler({.enabled = false});
  give_grad(p, Vec(12, 0.5));
  CHECK(scaler.step(opt));
  scaler.update();
  CHECK(values(p)[0] == Approx(p0[0] - 0.5));
  CHECK(scaler.state_dict().empty());
}

TEST_CASE("GradScaler: misuse is reported", "[optim][grad_scaler]") {
  Tensor p = float_param(7);
  optim::SGD opt({p}, {.lr = 1.0});
  octo::GradScaler scaler;
  CHECK_ERROR(scaler.update(), octo::ValueError, "no inf checks were recorded");
  give_grad(p, Vec(12, 0.5));
  scaler.unscale_(opt);
  CHECK_ERROR(scaler.unscale_(opt), octo::ValueError, "already been called");
  scaler.step(opt);
  CHECK_ERROR(scaler.step(opt), octo::ValueError, "already been called");
  CHECK_ERROR(scaler.unscale_(opt), octo::ValueError, "after step()");
  scaler.update();
  CHECK_ERROR(octo::GradScaler({.growth_factor = 0.5}), octo::ValueError, "growth_factor");
  CHECK_ERROR(octo::GradScaler({.backoff_factor = 1.5}), octo::ValueError, "backoff_factor");
  CHECK_ERROR(octo::GradScaler({.init_scale = -1}), octo::ValueError, "init_scale");
  CHECK_ERROR(octo::GradScaler({.growth_interval = 0}), octo::ValueError, "growth_interval");
}

TEST_CASE("GradScaler: state_dict round-trips", "[optim][grad_scaler]") {
  Tensor p = float_param(8);
  optim::SGD opt({p}, {.lr = 0.01});
  octo::GradScaler scaler({.init_scale = 256.0, .growth_interval = 5});
  for (int i = 0; i < 3; ++i) {
    give_grad(p, Vec(12, 1.0));
    scaler.step(opt);
    scaler.update();
  }
  give_grad(p, Vec(12, std::numeric_limits<double>::quiet_NaN()));
  scaler.step(opt);
  scaler.update();
  give_grad(p, Vec(12, 1.0));
  scaler.step(opt);
  scaler.update();
  optim::NamedTensors sd = scaler.state_dict();
  REQUIRE(sd.size() == 5);
  octo::GradScaler other;
  other.load_state_dict(sd);
  CHECK(other.get_scale() == 128.0);
  CHECK(other.growth_tracker() == 1);
  CHECK(other.growth_interval() == 5);
  CHECK(other.growth_factor() == 2.0);
  CHECK(other.backoff_factor() == 0.5);
  CHECK_ERROR(other.load_state_dict({}), octo::ValueError, "empty");
  optim::NamedTensors missing(sd.begin(), sd.end() - 1);
  CHECK_ERROR(other.load_state_dict(missing), octo::ValueError, "missing key '_growth_tracker'");
  optim::NamedTensors extra = sd;
  extra.emplace_back("bogus", octo::scalar_tensor(1.0));
  CHECK_ERROR(other.load_state_dict(extra), octo::ValueError, "unexpected key 'bogus'");
}
