// Fused optimizer updates (Backend::sgd_update / adam_update) against the tensor-op reference.
//
// Every SGD / Adam / AdamW option combination that changes the arithmetic runs for 7 steps with
// changing gradients twice, once with options.fused = true and once with false, from the same
// values; parameters and every state tensor are compared after each step. Tolerance: float64
// within 1e-12 relative, float32 within 4 ulps. Measured: 0 in both (bit for bit), because the
// fused kernel performs the reference's operations in its order with no contraction (Note [Fused
// optimizer arithmetic], kernels/optim_math.h); each test case reports its largest difference.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <octo/octo.h>

#include "kernels/backend.h"
#include "optim/fused_configs.h"
#include "optim/optim_helpers.h"

using namespace optim_test;

using namespace fused_configs;

namespace {

/// Distance in units in the last place of `dt` between two values of that dtype.
int64_t ulps(double a, double b, octo::DType dt) {
  if (a == b) return 0;
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b) ? 0 : INT64_MAX;
  if (dt == octo::kFloat64) {
    auto ordered = [](double x) {
      int64_t i;
      std::memcpy(&i, &x, sizeof i);
      return i < 0 ? INT64_MIN - i : i;
    };
    const int64_t ia = ordered(a), ib = ordered(b);
    return ia > ib ? ia - ib : ib - ia;
  }
  auto ordered = [](float x) {
    int32_t i;
    std::memcpy(&i, &x, sizeof i);
    return i < 0 ? int64_t(INT32_MIN) - i : int64_t(i);
  };
  const int64_t ia = ordered(static_cast<float>(a)), ib = ordered(static_cast<float>(b));
  return ia > ib ? ia - ib : ib - ia;
}

/// The largest differences seen by one test case, reported at its end.
struct Measured {
  int64_t max_ulps = 0;
  double max_rel = 0.0;
};

/// got equals want within the tolerance of their dtype (float64: 1e-12 relative; float32: 4
/// ulps); records the differences in m.
void check_same(const Tensor& got, const Tensor& want, const std::string& what, Measured& m) {
  INFO(what);
  REQUIRE(got.dtype() == want.dtype());
  REQUIRE(got.sizes() == want.sizes());
  REQUIRE(got.device() == want.device());
  const Vec g = values(got), w = values(want);
  size_t bad = 0, first_bad = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const int64_t u = ulps(g[i], w[i], got.dtype());
    const double rel = g[i] == w[i] ? 0.0 : std::abs(g[i] - w[i]) / std::abs(w[i]);
    m.max_ulps = std::max(m.max_ulps, u);
    m.max_rel = std::max(m.max_rel, rel);
    const bool ok =
        got.dtype() == octo::kFloat64 ? std::abs(g[i] - w[i]) <= 1e-12 * std::abs(w[i]) : u <= 4;
    if (!ok && bad++ == 0) first_bad = i;
  }
  INFO(bad << " elements differ; the first is " << first_bad << ": fused "
           << (bad ? g[first_bad] : 0.0) << ", reference " << (bad ? w[first_bad] : 0.0));
  CHECK(bad == 0);
}

/// The shapes of the parameters: the helpers' small ones plus one large enough to be split across
/// threads and to run the vectorised loop with a remainder.
std::vector<octo::Shape> shapes() {
  std::vector<octo::Shape> s = kShapes;
  s.push_back({129, 260});
  return s;
}

std::vector<Tensor> params_from(const std::vector<Vec>& vals, octo::DType dt,
                                bool non_contiguous_param = false) {
  const auto sh = shapes();
  std::vector<Tensor> ps;
  for (size_t k = 0; k < vals.size(); ++k) {
    if (non_contiguous_param && sh[k].size() == 2) {
      // a leaf over column-major storage: the kernels see a strided parameter
      Tensor leaf = octo::tensor(vals[k], sh[k], {.dtype = dt}).t().contiguous().t();
      REQUIRE_FALSE(leaf.is_contiguous());
      leaf.requires_grad_();
      ps.push_back(leaf);
    } else {
      ps.push_back(make_param(vals[k], sh[k], dt));
    }
  }
  return ps;
}

std::vector<Vec> start_values() {
  std::vector<Vec> out;
  const auto sh = shapes();
  for (size_t k = 0; k < sh.size(); ++k)
    out.push_back(random_vec(octo::detail::shape_numel(sh[k]), 11u + k));
  return out;
}

/// Runs `steps` steps of Opt with options o (fused) and with o.fused = false from the same
/// values, feeding both the same changing gradients; compares parameters and state every step.
template <typename Opt, typename Options>
Measured compare_fused(Options o, octo::DType dt, int steps, bool transposed_grads = false,
                       bool non_contiguous_param = false) {
  Measured m;
  const auto vals = start_values();
  auto fused_params = params_from(vals, dt, non_contiguous_param);
  auto ref_params = params_from(vals, dt);
  o.fused = true;
  Opt fused(fused_params, o);
  o.fused = false;
  Opt ref(ref_params, o);
  for (int s = 0; s < steps; ++s) {
    for (size_t k = 0; k < vals.size(); ++k) {
      const Vec g = grad_at(vals[k].size(), s, static_cast<int>(k));
      give_grad(fused_params[k], g, transposed_grads);
      give_grad(ref_params[k], g);
    }
    fused.step();
    ref.step();
    for (size_t k = 0; k < vals.size(); ++k) {
      const std::string where = "step " + std::to_string(s) + ", parameter " + std::to_string(k);
      check_same(fused_params[k], ref_params[k], where, m);
      const auto& fs = fused.state(static_cast<int64_t>(k));
      const auto& rs = ref.state(static_cast<int64_t>(k));
      REQUIRE(fs.size() == rs.size());
      for (const auto& [key, t] : rs) {
        REQUIRE(fs.count(key) == 1);
        check_same(fs.at(key), t, where + ", state " + key, m);
      }
    }
  }
  return m;
}

void report(const char* what, const Measured& m) {
  WARN(what << ": largest fused-vs-reference difference " << m.max_ulps << " ulps, " << m.max_rel
            << " relative");
}

}  // namespace

TEST_CASE("fused SGD equals the tensor-op SGD", "[optim][fused][sgd]") {
  const auto dt = GENERATE(octo::kFloat64, octo::kFloat32);
  Measured all;
  for (size_t c = 0; c < kSgdConfigs.size(); ++c) {
    INFO("config " << c << ", " << dt);
    const Measured m = compare_fused<optim::SGD>(kSgdConfigs[c], dt, 7);
    all.max_ulps = std::max(all.max_ulps, m.max_ulps);
    all.max_rel = std::max(all.max_rel, m.max_rel);
  }
  report(dt == octo::kFloat64 ? "SGD float64" : "SGD float32", all);
}

TEST_CASE("fused Adam and AdamW equal the tensor-op ones", "[optim][fused][adam]") {
  const auto dt = GENERATE(octo::kFloat64, octo::kFloat32);
  Measured all;
  for (size_t c = 0; c < kAdamConfigs.size(); ++c) {
    INFO("config " << c << ", " << dt);
    for (const Measured& m : {compare_fused<optim::Adam>(kAdamConfigs[c], dt, 7),
                              compare_fused<optim::AdamW>(as_adamw(kAdamConfigs[c]), dt, 7)}) {
      all.max_ulps = std::max(all.max_ulps, m.max_ulps);
      all.max_rel = std::max(all.max_rel, m.max_rel);
    }
  }
  // AdamW's own default weight decay (1e-2) too
  const Measured m = compare_fused<optim::AdamW>(optim::AdamWOptions{}, dt, 7);
  all.max_ulps = std::max(all.max_ulps, m.max_ulps);
  report(dt == octo::kFloat64 ? "Adam/AdamW float64" : "Adam/AdamW float32", all);
}

TEST_CASE("fused updates with non-contiguous gradients and parameters", "[optim][fused]") {
  const auto dt = GENERATE(octo::kFloat64, octo::kFloat32);
  const bool strided_param = GENERATE(false, true);
  INFO(dt << ", non-contiguous parameter " << strided_param);
  Measured m = compare_fused<optim::SGD>(
      optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true}, dt, 5,
      /*transposed_grads=*/true, strided_param);
  CHECK(m.max_ulps <= 4);
  m = compare_fused<optim::Adam>(
      optim::AdamOptions{.lr = 0.01, .weight_decay = 0.1, .amsgrad = true}, dt, 5, true,
      strided_param);
  CHECK(m.max_ulps <= 4);
  m = compare_fused<optim::AdamW>(optim::AdamWOptions{.lr = 0.01, .maximize = true}, dt, 5, true,
                                  strided_param);
  CHECK(m.max_ulps <= 4);
}

TEST_CASE("fused updates keep the state layout, state_dict and version counters",
          "[optim][fused]") {
  auto vals = initial_values();
  auto params = make_params(vals);
  optim::Adam opt(params, {.lr = 0.01, .amsgrad = true});
  for (size_t k = 0; k < params.size(); ++k) give_grad(params[k], grad_at(vals[k].size(), 0, 0));
  const uint32_t before = params[0].version();
  opt.step();
  CHECK(params[0].version() > before);  // saved-tensor checks see the in-place update
  const auto& st = opt.state(0);
  CHECK(st.size() == 4);
  CHECK(st.at("step").dtype() == octo::kFloat64);
  CHECK(st.at("step").device() == octo::kCPU);
  CHECK(st.at("step").item<double>() == 1.0);
  for (const char* key : {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"}) {
    INFO(key);
    CHECK(st.at(key).sizes() == params[0].sizes());
    CHECK_FALSE(st.at(key).requires_grad());
  }
  // the same keys as the reference path's state_dict
  auto ref_params = make_params(vals);
  optim::Adam ref(ref_params, {.lr = 0.01, .amsgrad = true, .fused = false});
  for (size_t k = 0; k < params.size(); ++k)
    give_grad(ref_params[k], grad_at(vals[k].size(), 0, 0));
  ref.step();
  const auto a = opt.state_dict(), b = ref.state_dict();
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) CHECK(a[i].first == b[i].first);
  CHECK_FALSE(opt.has_option("fused"));

  // SGD: the first step's buffer is a fresh tensor holding d_p
  Tensor w = make_param({1.0, 2.0}, {2});
  optim::SGD sgd({w}, {.lr = 0.5, .momentum = 0.9, .weight_decay = 0.5});
  give_grad(w, {1.0, -1.0});
  sgd.step();
  CHECK(values(sgd.state(0).at("momentum_buffer")) == Vec{1.5, 0.0});
  CHECK_FALSE(sgd.state(0).at("momentum_buffer").is_alias_of(w.grad()));
  CHECK(values(w) == Vec{0.25, 2.0});
}

TEST_CASE("fused updates of bfloat16 and float16 compute in float and round once",
          "[optim][fused]") {
  // The fused update of a 16-bit tensor equals the float32 fused update of the same values
  // rounded to 16 bits, step after step (state included).
  const auto dt = GENERATE(octo::kBFloat16, octo::kFloat16);
  const bool adam = GENERATE(false, true);
  INFO(dt << (adam ? ", Adam (amsgrad, L2)" : ", SGD (nesterov, weight decay)"));
  auto& be = octo::kernels::cpu_backend();
  const octo::Shape shape{37, 5};
  const Vec init = random_vec(185, 5);
  Tensor p16 = octo::tensor(init, shape, {.dtype = dt});
  Tensor p32 = p16.to(octo::kFloat32);
  std::vector<Tensor> s16, s32;
  for (int k = 0; k < 3; ++k) {
    s16.push_back(octo::zeros(shape, {.dtype = dt}));
    s32.push_back(octo::zeros(shape, {.dtype = octo::kFloat32}));
  }
  for (int step = 1; step <= 6; ++step) {
    Tensor g16 = octo::tensor(grad_at(185, step, 3), shape, {.dtype = dt});
    Tensor g32 = g16.to(octo::kFloat32);
    if (adam) {
      octo::kernels::AdamParams hp{
          .lr = 0.01, .weight_decay = 0.1, .step = double(step), .amsgrad = true};
      be.adam_update(p16.arg(), g16.arg(), s16[0].arg(), s16[1].arg(), s16[2].arg(), hp);
      be.adam_update(p32.arg(), g32.arg(), s32[0].arg(), s32[1].arg(), s32[2].arg(), hp);
    } else {
      octo::kernels::SgdParams hp{.lr = 0.1,
                                  .momentum = 0.9,
                                  .weight_decay = 0.05,
                                  .nesterov = true,
                                  .first_step = step == 1};
      be.sgd_update(p16.arg(), g16.arg(), s16[0].arg(), hp);
      be.sgd_update(p32.arg(), g32.arg(), s32[0].arg(), hp);
    }
    INFO("step " << step);
    CHECK(values(p16) == values(p32.to(dt)));
    for (int k = 0; k < (adam ? 3 : 1); ++k) CHECK(values(s16[k]) == values(s32[k].to(dt)));
    // continue the float32 run from the rounded values, as the 16-bit run does
    p32 = p16.to(octo::kFloat32);
    for (int k = 0; k < 3; ++k) s32[k] = s16[k].to(octo::kFloat32);
  }
  // and through the optimizer: a bfloat16/float16 model trains with the fused default
  Tensor w = make_param(init, shape, dt);
  optim::AdamW opt({w}, {.lr = 0.01});
  give_grad(w, grad_at(185, 0, 3));
  opt.step();
  CHECK(opt.state(0).at("exp_avg").dtype() == dt);
  CHECK(values(w) != values(octo::tensor(init, shape, {.dtype = dt})));
}

TEST_CASE("optimizers reject a gradient that does not match its parameter", "[optim][fused]") {
  const bool fused = GENERATE(true, false);
  INFO("fused " << fused);
  Tensor a = make_param({1.0, 2.0}, {2});
  Tensor b = make_param({1.0, 2.0, 3.0, 4.0, 5.0, 6.0}, {2, 3});
  give_grad(a, {0.5, 0.5});
  b.set_grad(octo::ones({2, 3}, {.dtype = octo::kFloat32}));  // float32 for a float64 parameter
  SECTION("SGD") {
    optim::SGD opt({a, b}, {.lr = 0.1, .momentum = 0.9, .fused = fused});
    CHECK_ERROR(opt.step(), octo::ValueError,
                "SGD: parameter 1 has dtype float64 but its gradient has dtype float32");
    CHECK(opt.state(0).empty());
  }
  SECTION("Adam") {
    optim::Adam opt({a, b}, {.fused = fused});
    CHECK_ERROR(opt.step(), octo::ValueError,
                "Adam: parameter 1 has dtype float64 but its gradient has dtype float32");
    CHECK(opt.state(0).empty());
  }
  SECTION("AdamW") {
    optim::AdamW opt({a, b}, {.fused = fused});
    CHECK_ERROR(opt.step(), octo::ValueError,
                "AdamW: parameter 1 has dtype float64 but its gradient has dtype float32");
  }
  // checked before anything changes: parameter 0, whose gradient is fine, was not updated
  CHECK(values(a) == Vec{1.0, 2.0});
}
