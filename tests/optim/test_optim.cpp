// Tests for optim: SGD, Adam, AdamW vs the published update rules; groups, options, zero_grad.
#include <octo/octo.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "optim/optim_helpers.h"

using namespace optim_test;

namespace {

// --- reference implementations: plain loops over doubles ----------------------------------------

struct SGDRef {
  optim::SGDOptions o;
  std::vector<Vec> buf;
  void step(std::vector<Vec>& ps, const std::vector<Vec>& gs) {
    if (buf.empty()) buf.resize(ps.size());
    for (size_t k = 0; k < ps.size(); ++k) {
      Vec& p = ps[k];
      const bool first = buf[k].empty();
      if (o.momentum != 0 && first) buf[k].assign(p.size(), 0.0);
      for (size_t i = 0; i < p.size(); ++i) {
        double d = o.maximize ? -gs[k][i] : gs[k][i];
        d += o.weight_decay * p[i];
        if (o.momentum != 0) {
          double& b = buf[k][i];
          b = first ? d : o.momentum * b + (1 - o.dampening) * d;
          d = o.nesterov ? d + o.momentum * b : b;
        }
        p[i] -= o.lr * d;
      }
    }
  }
};

struct AdamRef {
  double lr = 0, beta1 = 0, beta2 = 0, eps = 0, wd = 0;
  bool amsgrad = false, maximize = false, decoupled = false;
  std::vector<Vec> m, v, vmax;
  int t = 0;
  void step(std::vector<Vec>& ps, const std::vector<Vec>& gs) {
    if (m.empty()) {
      for (auto& p : ps) {
        m.emplace_back(p.size(), 0.0);
        v.emplace_back(p.size(), 0.0);
        vmax.emplace_back(p.size(), 0.0);
      }
    }
    ++t;
    const double bc1 = 1 - std::pow(beta1, t), bc2 = 1 - std::pow(beta2, t);
    for (size_t k = 0; k < ps.size(); ++k) {
      for (size_t i = 0; i < ps[k].size(); ++i) {
        double& p = ps[k][i];
        double g = maximize ? -gs[k][i] : gs[k][i];
        if (decoupled) {
          p *= 1 - lr * wd;
        } else {
          g += wd * p;
        }
        m[k][i] = beta1 * m[k][i] + (1 - beta1) * g;
        v[k][i] = beta2 * v[k][i] + (1 - beta2) * g * g;
        vmax[k][i] = std::max(vmax[k][i], v[k][i]);
        const double second = amsgrad ? vmax[k][i] : v[k][i];
        const double mhat = m[k][i] / bc1;
        p -= lr * mhat / (std::sqrt(second) / std::sqrt(bc2) + eps);
      }
    }
  }
};

template <typename Options>
AdamRef adam_ref(const Options& o, bool decoupled) {
  AdamRef r;
  r.lr = o.lr;
  r.beta1 = o.betas[0];
  r.beta2 = o.betas[1];
  r.eps = o.eps;
  r.wd = o.weight_decay;
  r.amsgrad = o.amsgrad;
  r.maximize = o.maximize;
  r.decoupled = decoupled;
  return r;
}

/// Runs `steps` steps of optimizer `opt` over params and of `ref` over plain copies; compares.
template <typename Ref>
void run_and_compare(optim::Optimizer& opt, const std::vector<Tensor>& params, Ref& ref,
                     std::vector<Vec> ref_vals, int steps, double rtol, double atol,
                     bool transposed_grads = false) {
  for (int s = 0; s < steps; ++s) {
    std::vector<Vec> gs;
    for (size_t k = 0; k < params.size(); ++k) {
      gs.push_back(grad_at(ref_vals[k].size(), s, static_cast<int>(k)));
      give_grad(params[k], gs.back(), transposed_grads);
    }
    opt.step();
    ref.step(ref_vals, gs);
    for (size_t k = 0; k < params.size(); ++k) {
      INFO("step " << s << ", parameter " << k);
      check_close(values(params[k]), ref_vals[k], rtol, atol);
    }
  }
}

}  // namespace

// --- SGD --------------------------------------------------------------------------------------

TEST_CASE("SGD: the first steps match PyTorch's update rule", "[optim][sgd]") {
  const std::vector<optim::SGDOptions> configs = {
      {.lr = 0.1},
      {.lr = 0.1, .momentum = 0.9},
      {.lr = 0.05, .momentum = 0.9, .dampening = 0.5},
      {.lr = 0.1, .momentum = 0.9, .nesterov = true},
      {.lr = 0.1, .momentum = 0.5, .weight_decay = 0.01},
      {.lr = 0.2, .weight_decay = 0.1},
      {.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.1, .maximize = true},
      {.lr = 0.1, .momentum = 0.8, .weight_decay = 0.05, .nesterov = true, .maximize = true},
  };
  const auto cfg = GENERATE_COPY(range(size_t{0}, configs.size()));
  const bool transposed = GENERATE(false, true);
  const auto o = configs[cfg];
  INFO("config " << cfg << ", non-contiguous grads " << transposed);
  SECTION("float64") {
    auto vals = initial_values();
    auto params = make_params(vals);
    optim::SGD opt(params, o);
    SGDRef ref{o, {}};
    run_and_compare(opt, params, ref, vals, 5, 1e-12, 1e-13, transposed);
  }
  SECTION("float32") {
    auto vals = initial_values();
    auto params = make_params(vals, octo::kFloat32);
    for (auto& v : vals)  // the reference starts from the same (rounded) values
      for (double& x : v) x = static_cast<float>(x);
    optim::SGD opt(params, o);
    SGDRef ref{o, {}};
    run_and_compare(opt, params, ref, vals, 5, 1e-5, 1e-5, transposed);
  }
}

TEST_CASE("SGD: momentum buffer state, skipped parameters without a gradient", "[optim][sgd]") {
  Tensor a = make_param({1.0, 2.0}, {2});
  Tensor b = make_param({3.0}, {1});
  optim::SGD opt({a, b}, {.lr = 0.5, .momentum = 0.9});
  give_grad(a, {1.0, -1.0});
  opt.step();
  CHECK(values(a) == Vec{0.5, 2.5});
  CHECK(values(b) == Vec{3.0});  // no grad: untouched, no state
  CHECK(opt.state(0).count("momentum_buffer") == 1);
  CHECK(values(opt.state(0).at("momentum_buffer")) == Vec{1.0, -1.0});
  CHECK(opt.state(1).empty());
  // the buffer is a copy, not the gradient itself
  CHECK_FALSE(opt.state(0).at("momentum_buffer").is_alias_of(a.grad()));
  CHECK_FALSE(opt.state(0).at("momentum_buffer").requires_grad());
  CHECK_FALSE(a.grad_fn());  // still a leaf
}

TEST_CASE("SGD: a step after backward on a Linear module", "[optim][sgd]") {
  octo::manual_seed(3);
  auto lin = std::make_shared<octo::nn::Linear>(4, 3);
  lin->to(octo::kFloat64);
  optim::SGD opt(lin->parameters(), {.lr = 0.1});
  Tensor x = octo::randn({5, 4}, {.dtype = octo::kFloat64});
  Tensor loss = octo::sum(octo::square(lin->forward(x)));
  loss.backward();
  std::vector<Vec> before, grads;
  for (const Tensor& p : lin->parameters()) {
    before.push_back(values(p));
    grads.push_back(values(p.grad()));
  }
  opt.step();
  auto ps = lin->parameters();
  for (size_t k = 0; k < ps.size(); ++k) {
    Vec want = before[k];
    for (size_t i = 0; i < want.size(); ++i) want[i] -= 0.1 * grads[k][i];
    check_close(values(ps[k]), want, 1e-14, 1e-15);
  }
}

TEST_CASE("optim: step(closure) evaluates the loss with grad mode on", "[optim]") {
  Tensor w = make_param({2.0, -1.0}, {2});
  optim::SGD opt({w}, {.lr = 0.25});
  octo::NoGradGuard no_grad;  // the closure still records
  Tensor loss = opt.step([&] {
    opt.zero_grad();
    Tensor l = octo::sum(octo::square(w));  // grad 2w
    l.backward();
    return l;
  });
  CHECK(loss.item<double>() == 5.0);
  CHECK(values(w) == Vec{1.0, -0.5});
}

// --- Adam / AdamW -------------------------------------------------------------------------------

TEST_CASE("Adam: the first steps match the published rule", "[optim][adam]") {
  const std::vector<optim::AdamOptions> configs = {
      {},
      {.lr = 0.01, .weight_decay = 0.1},
      {.lr = 0.01, .amsgrad = true},
      {.lr = 0.02, .betas = {0.8, 0.99}, .eps = 1e-6, .weight_decay = 0.05, .amsgrad = true},
      {.lr = 0.01, .betas = {0.5, 0.9}, .weight_decay = 0.01, .maximize = true},
      {.lr = 0.01, .betas = {0.0, 0.0}, .eps = 1e-3},
  };
  const auto cfg = GENERATE_COPY(range(size_t{0}, configs.size()));
  const bool transposed = GENERATE(false, true);
  const auto o = configs[cfg];
  INFO("config " << cfg << ", non-contiguous grads " << transposed);
  auto vals = initial_values();
  auto params = make_params(vals);
  optim::Adam opt(params, o);
  AdamRef ref = adam_ref(o, false);
  run_and_compare(opt, params, ref, vals, 5, 1e-11, 1e-13, transposed);
  CHECK(opt.state(0).at("step").item<double>() == 5.0);
  CHECK(opt.state(0).count("max_exp_avg_sq") == (o.amsgrad ? 1u : 0u));
}

TEST_CASE("AdamW: decoupled weight decay matches the published rule", "[optim][adam]") {
  const std::vector<optim::AdamWOptions> configs = {
      {},
      {.lr = 0.01, .weight_decay = 0.1},
      {.lr = 0.01, .weight_decay = 0.1, .amsgrad = true},
      {.lr = 0.05, .betas = {0.7, 0.95}, .weight_decay = 0.5, .maximize = true},
      {.lr = 0.01, .weight_decay = 0.0, .amsgrad = true},
  };
  const auto cfg = GENERATE_COPY(range(size_t{0}, configs.size()));
  const auto o = configs[cfg];
  INFO("config " << cfg);
  SECTION("float64") {
    auto vals = initial_values();
    auto params = make_params(vals);
    optim::AdamW opt(params, o);
    AdamRef ref = adam_ref(o, true);
    run_and_compare(opt, params, ref, vals, 5, 1e-11, 1e-13);
  }
  SECTION("float32") {
    auto vals = initial_values();
    for (auto& v : vals)
      for (double& x : v) x = static_cast<float>(x);
    auto params = make_params(vals, octo::kFloat32);
    optim::AdamW opt(params, o);
    AdamRef ref = adam_ref(o, true);
    run_and_compare(opt, params, ref, vals, 5, 1e-4, 1e-5);
    CHECK(opt.state(1).at("exp_avg").dtype() == octo::kFloat32);
  }
}

TEST_CASE("AdamW: defaults are PyTorch's, and differ from Adam only by weight decay",
          "[optim][adam]") {
  optim::AdamWOptions w;
  optim::AdamOptions a;
  CHECK(w.weight_decay == 1e-2);
  CHECK(a.weight_decay == 0.0);
  CHECK(
      (w.lr == 1e-3 && a.lr == 1e-3 && w.eps == 1e-8 && a.betas[0] == 0.9 && a.betas[1] == 0.999));
  // with weight decay 0 the two are the same update
  auto vals = initial_values();
  auto pa = make_params(vals), pw = make_params(vals);
  optim::Adam adam(pa, {.lr = 0.01});
  optim::AdamW adamw(pw, {.lr = 0.01, .weight_decay = 0.0});
  for (int s = 0; s < 3; ++s) {
    for (size_t k = 0; k < pa.size(); ++k) {
      Vec g = grad_at(vals[k].size(), s, static_cast<int>(k));
      give_grad(pa[k], g);
      give_grad(pw[k], g);
    }
    adam.step();
    adamw.step();
  }
  for (size_t k = 0; k < pa.size(); ++k) CHECK(values(pa[k]) == values(pw[k]));
}

TEST_CASE("Adam: parameters and state on a virtual device cpu:1", "[optim][adam]") {
  auto vals = initial_values();
  auto params = make_params(vals, octo::kFloat64, octo::Device("cpu:1"));
  optim::Adam opt(params, {.lr = 0.01, .amsgrad = true});
  AdamRef ref = adam_ref(optim::AdamOptions{.lr = 0.01, .amsgrad = true}, false);
  run_and_compare(opt, params, ref, vals, 3, 1e-11, 1e-13);
  CHECK(opt.state(0).at("exp_avg").device() == octo::Device("cpu:1"));
  CHECK(opt.state(0).at("max_exp_avg_sq").device() == octo::Device("cpu:1"));
}

// --- parameter groups ---------------------------------------------------------------------------

TEST_CASE("optim: parameter groups with their own options", "[optim][groups]") {
  auto vals = initial_values();
  SECTION("SGD") {
    auto params = make_params(vals);
    optim::SGDOptions o1{.lr = 0.1, .momentum = 0.9, .nesterov = true};
    optim::SGDOptions o2{.lr = 0.01, .weight_decay = 0.1};
    optim::SGD opt({optim::SGD::Group{{params[0], params[1]}, o1},
                    optim::SGD::Group{{params[2], params[3]}, o2}});
    REQUIRE(opt.num_param_groups() == 2);
    CHECK(opt.num_params() == 4);
    CHECK(opt.lr(0) == 0.1);
    CHECK(opt.lr(1) == 0.01);
    CHECK(opt.get_option(0, "nesterov") == 1.0);
    CHECK(opt.get_option(1, "weight_decay") == 0.1);
    SGDRef r1{o1, {}}, r2{o2, {}};
    std::vector<Vec> v1{vals[0], vals[1]}, v2{vals[2], vals[3]};
    for (int s = 0; s < 4; ++s) {
      std::vector<Vec> g1, g2;
      for (size_t k = 0; k < 4; ++k) {
        Vec g = grad_at(vals[k].size(), s, static_cast<int>(k));
        give_grad(params[k], g);
        (k < 2 ? g1 : g2).push_back(g);
      }
      opt.step();
      r1.step(v1, g1);
      r2.step(v2, g2);
      check_close(values(params[0]), v1[0], 1e-12, 1e-13);
      check_close(values(params[1]), v1[1], 1e-12, 1e-13);
      check_close(values(params[2]), v2[0], 1e-12, 1e-13);
      check_close(values(params[3]), v2[1], 1e-12, 1e-13);
    }
    // state is indexed across groups: only the momentum group has buffers
    CHECK(opt.state(0).count("momentum_buffer") == 1);
    CHECK(opt.state(2).empty());
  }
  SECTION("Adam, and a group added later") {
    auto params = make_params(vals);
    optim::Adam opt({optim::Adam::Group{{params[0]}, {.lr = 0.01}},
                     optim::Adam::Group{{params[1]}, {.lr = 0.001, .amsgrad = true}}});
    opt.add_param_group({{params[2], params[3]}, {.lr = 0.1, .weight_decay = 0.1}});
    CHECK(opt.num_param_groups() == 3);
    AdamRef r1 = adam_ref(optim::AdamOptions{.lr = 0.01}, false);
    AdamRef r2 = adam_ref(optim::AdamOptions{.lr = 0.001, .amsgrad = true}, false);
    AdamRef r3 = adam_ref(optim::AdamOptions{.lr = 0.1, .weight_decay = 0.1}, false);
    std::vector<Vec> v1{vals[0]}, v2{vals[1]}, v3{vals[2], vals[3]};
    for (int s = 0; s < 3; ++s) {
      std::vector<Vec> g(4);
      for (size_t k = 0; k < 4; ++k) {
        g[k] = grad_at(vals[k].size(), s, static_cast<int>(k));
        give_grad(params[k], g[k]);
      }
      opt.step();
      std::vector<Vec> g1{g[0]}, g2{g[1]}, g3{g[2], g[3]};
      r1.step(v1, g1);
      r2.step(v2, g2);
      r3.step(v3, g3);
    }
    check_close(values(params[0]), v1[0], 1e-11, 1e-13);
    check_close(values(params[1]), v2[0], 1e-11, 1e-13);
    check_close(values(params[2]), v3[0], 1e-11, 1e-13);
    check_close(values(params[3]), v3[1], 1e-11, 1e-13);
  }
}

TEST_CASE("optim: options by name, set_option validates", "[optim][groups]") {
  Tensor w = make_param({1.0}, {1});
  optim::Adam opt({w}, {.lr = 0.01});
  CHECK(opt.has_option("betas.0"));
  CHECK_FALSE(opt.has_option("momentum"));
  opt.set_option(0, "betas.0", 0.8);
  CHECK(opt.options().betas[0] == 0.8);
  opt.set_lr(0, 0.5);
  CHECK(opt.options(0).lr == 0.5);
  CHECK_ERROR(opt.get_option(0, "momentum"), octo::ValueError, "no option 'momentum'");
  CHECK_ERROR(opt.set_option(0, "betas.1", 1.0), octo::ValueError,
              "invalid beta parameter at index 1");
  CHECK(opt.options().betas[1] == 0.999);  // unchanged after the failed set
  CHECK_ERROR(opt.lr(2), octo::IndexError, "parameter group 2 out of range");
  // options changed directly are validated at the next step
  opt.options().lr = -1.0;
  give_grad(w, {1.0});
  CHECK_ERROR(opt.step(), octo::ValueError, "invalid learning rate");
}

// --- zero_grad ----------------------------------------------------------------------------------

TEST_CASE("optim: zero_grad drops or zeroes the gradients", "[optim]") {
  auto params = make_params(initial_values());
  optim::SGD opt(params, {.lr = 0.1});
  for (auto& p : params) give_grad(p, Vec(static_cast<size_t>(p.numel()), 1.5));
  SECTION("set_to_none (the default)") {
    opt.zero_grad();
    for (auto& p : params) CHECK_FALSE(p.grad().defined());
    opt.step();  // no gradients: nothing changes
    auto vals = initial_values();
    for (size_t k = 0; k < params.size(); ++k) CHECK(values(params[k]) == vals[k]);
  }
  SECTION("zeroing in place") {
    std::vector<Tensor> grads;
    for (auto& p : params) grads.push_back(p.grad());
    opt.zero_grad(false);
    for (size_t k = 0; k < params.size(); ++k) {
      REQUIRE(params[k].grad().defined());
      CHECK(params[k].grad().is_alias_of(grads[k]));
      for (double x : values(params[k].grad())) CHECK(x == 0.0);
    }
  }
}
