// Tests for optim: SGD, Adam, AdamW against the published update rules, groups, state, clipping.
#include <octo/octo.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>

namespace {

using octo::Tensor;
using Vec = std::vector<double>;
namespace optim = octo::optim;

#define CHECK_ERROR(expr, Type, fragment)               \
  do {                                                  \
    CHECK_THROWS_AS(expr, Type);                        \
    CHECK_THROWS_WITH(expr, Catch::Contains(fragment)); \
  } while (0)

Vec random_vec(size_t n, unsigned seed, double scale = 1.0) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> dist(0.0, scale);
  Vec v(n);
  for (double& x : v) x = dist(gen);
  return v;
}

Tensor make_param(const Vec& v, const octo::Shape& shape, octo::DType dt = octo::kFloat64,
                  octo::Device dev = octo::kCPU) {
  Tensor t = octo::tensor(v, shape, {.dtype = dt, .device = dev});
  t.requires_grad_();
  return t;
}

Vec values(const Tensor& t) { return t.to(octo::kCPU).to_vector<double>(); }

/// Sets p's gradient; `transposed` stores it as a non-contiguous view (a [n, m] tensor's t()).
void give_grad(const Tensor& p, const Vec& g, bool transposed = false) {
  if (transposed && p.dim() == 2) {
    Tensor base =
        octo::tensor(g, {p.size(0), p.size(1)}, {.dtype = p.dtype(), .device = p.device()});
    // the same values, laid out column-major: build the transpose, then view it back
    Tensor tt = base.t().contiguous().t();
    REQUIRE_FALSE(tt.is_contiguous());
    p.set_grad(tt);
  } else {
    p.set_grad(octo::tensor(g, p.sizes(), {.dtype = p.dtype(), .device = p.device()}));
  }
}

void check_close(const Vec& got, const Vec& want, double rtol, double atol) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << ": got " << got[i] << ", want " << want[i]);
    CHECK(std::abs(got[i] - want[i]) <= atol + rtol * std::abs(want[i]));
  }
}

/// The gradient fed at step s to parameter k: varying in size so that amsgrad's max matters.
Vec grad_at(size_t n, int step, int k) {
  const double scale = (step % 2 == 0) ? 1.0 : 0.1 * (step + 1);
  return random_vec(n, 1000u + 37u * step + k, scale);
}

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

const std::vector<octo::Shape> kShapes = {{3, 4}, {5}, {1}, {2, 1, 3}};

std::vector<Vec> initial_values() {
  std::vector<Vec> out;
  for (size_t k = 0; k < kShapes.size(); ++k)
    out.push_back(random_vec(octo::detail::shape_numel(kShapes[k]), 7u + k));
  return out;
}

std::vector<Tensor> make_params(const std::vector<Vec>& vals, octo::DType dt = octo::kFloat64,
                                octo::Device dev = octo::kCPU) {
  std::vector<Tensor> ps;
  for (size_t k = 0; k < vals.size(); ++k) ps.push_back(make_param(vals[k], kShapes[k], dt, dev));
  return ps;
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

// --- state_dict -------------------------------------------------------------------------------

namespace {

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    path = std::filesystem::temp_directory_path() /
           ("octo_optim_test_" + std::to_string(std::random_device{}()));
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

/// Runs `total` steps uninterrupted, and `split` steps + save to a safetensors file (model and
/// optimizer together) + load into a fresh model and optimizer + the rest; compares bitwise.
template <typename Make>
void check_resume(Make make_opt, int split, int total) {
  const auto vals = initial_values();
  auto feed = [&](const std::vector<Tensor>& ps, int s) {
    for (size_t k = 0; k < ps.size(); ++k)
      give_grad(ps[k], grad_at(vals[k].size(), s, static_cast<int>(k)));
  };
  auto pa = make_params(vals);
  auto a = make_opt(pa, false);
  for (int s = 0; s < total; ++s) {
    feed(pa, s);
    a->step();
  }

  TempDir dir;
  const std::string file = (dir.path / "ckpt.safetensors").string();
  {
    auto pb = make_params(vals);
    auto b = make_opt(pb, false);
    for (int s = 0; s < split; ++s) {
      feed(pb, s);
      b->step();
    }
    optim::NamedTensors ckpt;
    for (size_t k = 0; k < pb.size(); ++k) ckpt.emplace_back("model." + std::to_string(k), pb[k]);
    for (auto& [key, t] : b->state_dict()) ckpt.emplace_back("optim." + key, t);
    octo::save_safetensors(ckpt, file);
  }
  auto loaded = octo::load_safetensors(file);
  auto pc = make_params(initial_values());
  auto c = make_opt(pc, /*other_options=*/true);
  optim::NamedTensors opt_state;
  for (auto& [key, t] : loaded.tensors) {
    if (key.rfind("model.", 0) == 0) {
      octo::NoGradGuard ng;
      pc[static_cast<size_t>(std::stoi(key.substr(6)))].copy_(t);
    } else {
      opt_state.emplace_back(key.substr(6), t);
    }
  }
  c->load_state_dict(opt_state);
  for (int s = split; s < total; ++s) {
    feed(pc, s);
    c->step();
  }
  for (size_t k = 0; k < pa.size(); ++k) {
    INFO("parameter " << k);
    CHECK(values(pc[k]) == values(pa[k]));
  }
}

}  // namespace

TEST_CASE("optim: state_dict layout", "[optim][state]") {
  auto params = make_params(initial_values());
  optim::Adam opt({optim::Adam::Group{{params[0], params[1]}, {.lr = 0.01, .amsgrad = true}},
                   optim::Adam::Group{{params[2], params[3]}, {.lr = 0.02}}});
  for (size_t k = 0; k < params.size(); ++k) give_grad(params[k], Vec(params[k].numel(), 0.5));
  opt.step();
  auto sd = opt.state_dict();
  std::map<std::string, Tensor> m(sd.begin(), sd.end());
  REQUIRE(m.count("param_groups.0.lr"));
  CHECK(m.at("param_groups.0.lr").dim() == 0);
  CHECK(m.at("param_groups.0.lr").dtype() == octo::kFloat64);
  CHECK(m.at("param_groups.0.lr").item<double>() == 0.01);
  CHECK(m.at("param_groups.1.lr").item<double>() == 0.02);
  CHECK(m.at("param_groups.0.betas.1").item<double>() == 0.999);
  CHECK(m.at("param_groups.0.amsgrad").item<double>() == 1.0);
  CHECK(m.at("param_groups.1.params").to_vector<int64_t>() == std::vector<int64_t>{2, 3});
  CHECK(m.at("state.3.step").item<double>() == 1.0);
  CHECK(m.at("state.3.exp_avg").sizes() == params[3].sizes());
  CHECK(m.count("state.1.max_exp_avg_sq") == 1);
  CHECK(m.count("state.2.max_exp_avg_sq") == 0);
}

TEST_CASE("optim: save, load into a fresh optimizer, continue == uninterrupted", "[optim][state]") {
  SECTION("SGD with momentum and groups") {
    check_resume(
        [](const std::vector<Tensor>& ps, bool other) {
          const double lr = other ? 9.0 : 0.1;  // loading must restore the saved options
          return std::make_unique<optim::SGD>(std::vector<optim::SGD::Group>{
              {{ps[0], ps[1]}, {.lr = lr, .momentum = 0.9, .dampening = 0.1}},
              {{ps[2], ps[3]}, {.lr = 0.05, .momentum = 0.5, .nesterov = true}}});
        },
        2, 5);
  }
  SECTION("Adam with amsgrad") {
    check_resume(
        [](const std::vector<Tensor>& ps, bool other) {
          return std::make_unique<optim::Adam>(
              ps,
              optim::AdamOptions{.lr = other ? 1.0 : 0.01, .weight_decay = 0.1, .amsgrad = !other});
        },
        3, 6);
  }
  SECTION("AdamW") {
    check_resume(
        [](const std::vector<Tensor>& ps, bool other) {
          return std::make_unique<optim::AdamW>(
              ps, optim::AdamWOptions{.lr = 0.01, .betas = {other ? 0.1 : 0.9, 0.99}});
        },
        1, 4);
  }
}

TEST_CASE("optim: load_state_dict moves state to the parameters' device and dtype",
          "[optim][state]") {
  auto vals = initial_values();
  auto pa = make_params(vals);
  optim::Adam a(pa, {.lr = 0.01});
  for (size_t k = 0; k < pa.size(); ++k)
    give_grad(pa[k], grad_at(vals[k].size(), 0, static_cast<int>(k)));
  a.step();
  auto pb = make_params(vals, octo::kFloat32, octo::Device("cpu:1"));
  optim::Adam b(pb, {.lr = 0.01});
  b.load_state_dict(a.state_dict());
  CHECK(b.state(0).at("exp_avg").device() == octo::Device("cpu:1"));
  CHECK(b.state(0).at("exp_avg").dtype() == octo::kFloat32);
  CHECK(b.state(0).at("step").dtype() == octo::kFloat64);
  CHECK(b.state(0).at("step").item<double>() == 1.0);
  // the loaded state is a copy: stepping b leaves a's state alone
  const Vec before = values(a.state(0).at("exp_avg"));
  for (size_t k = 0; k < pb.size(); ++k) give_grad(pb[k], Vec(vals[k].size(), 1.0));
  b.step();
  CHECK(values(a.state(0).at("exp_avg")) == before);
}

TEST_CASE("optim: load_state_dict rejects mismatched state dicts", "[optim][state][errors]") {
  auto vals = initial_values();
  auto params = make_params(vals);
  optim::Adam full(params, {.lr = 0.01});
  for (auto& p : params) give_grad(p, Vec(static_cast<size_t>(p.numel()), 1.0));
  full.step();
  const auto sd = full.state_dict();

  SECTION("a different number of parameters") {
    optim::Adam fewer({params[0], params[1]}, {});
    CHECK_ERROR(fewer.load_state_dict(sd), octo::ValueError, "parameters in group 0");
  }
  SECTION("a different number of groups") {
    optim::Adam two({optim::Adam::Group{{params[0], params[1]}, {}},
                     optim::Adam::Group{{params[2], params[3]}, {}}});
    CHECK_ERROR(two.load_state_dict(sd), octo::ValueError,
                "1 parameter groups, but the optimizer has 2");
  }
  SECTION("another optimizer's state dict") {
    optim::SGD sgd(params, {.lr = 0.5});
    CHECK_ERROR(sgd.load_state_dict(sd), octo::ValueError, "missing key 'param_groups.0.momentum'");
    CHECK(sgd.lr() == 0.5);
  }
  SECTION("wrong shapes, unexpected keys, invalid options; nothing changes on failure") {
    optim::Adam other(params, {.lr = 0.3});
    auto bad = sd;
    for (auto& [k, t] : bad)
      if (k == "state.1.exp_avg") t = octo::zeros({7}, {.dtype = octo::kFloat64});
    CHECK_ERROR(other.load_state_dict(bad), octo::ValueError,
                "has shape [7] but parameter 1 has shape [5]");
    CHECK(other.lr() == 0.3);
    CHECK(other.state(0).empty());

    auto extra = sd;
    extra.emplace_back("momentum", octo::scalar_tensor(1.0));
    CHECK_ERROR(other.load_state_dict(extra), octo::ValueError, "unexpected key 'momentum'");

    auto neg = sd;
    for (auto& [k, t] : neg)
      if (k == "param_groups.0.lr") t = octo::scalar_tensor(-1.0, {.dtype = octo::kFloat64});
    CHECK_ERROR(other.load_state_dict(neg), octo::ValueError, "invalid learning rate");
    CHECK(other.lr() == 0.3);

    auto orphan = sd;
    orphan.emplace_back("state.9.exp_avg", octo::zeros({1}));
    CHECK_ERROR(other.load_state_dict(orphan), octo::ValueError, "state for parameter 9");
  }
}

// --- validation ---------------------------------------------------------------------------------

TEST_CASE("optim: constructor validation", "[optim][errors]") {
  Tensor w = make_param({1.0, 2.0}, {2});
  Tensor b = make_param({0.0}, {1});
  CHECK_ERROR(optim::SGD({w}, {.lr = -0.1}), octo::ValueError, "SGD: invalid learning rate: -0.1");
  CHECK_ERROR(optim::SGD({w}, {.momentum = -0.5}), octo::ValueError, "invalid momentum");
  CHECK_ERROR(optim::SGD({w}, {.weight_decay = -1}), octo::ValueError, "invalid weight_decay");
  CHECK_ERROR(optim::SGD({w}, {.nesterov = true}), octo::ValueError,
              "Nesterov momentum requires a momentum and zero dampening");
  CHECK_ERROR(optim::SGD({w}, {.momentum = 0.9, .dampening = 0.1, .nesterov = true}),
              octo::ValueError, "Nesterov momentum requires");
  CHECK_ERROR(optim::Adam({w}, {.lr = -1e-3}), octo::ValueError, "Adam: invalid learning rate");
  CHECK_ERROR(optim::Adam({w}, {.betas = {1.0, 0.999}}), octo::ValueError,
              "invalid beta parameter at index 0: 1");
  CHECK_ERROR(optim::AdamW({w}, {.betas = {0.9, -0.1}}), octo::ValueError,
              "AdamW: invalid beta parameter at index 1");
  CHECK_ERROR(optim::Adam({w}, {.eps = -1e-8}), octo::ValueError, "invalid epsilon");
  CHECK_ERROR(optim::AdamW({w}, {.weight_decay = -0.1}), octo::ValueError, "invalid weight_decay");
  CHECK_ERROR(optim::SGD(std::vector<Tensor>{}, {}), octo::ValueError, "empty parameter list");
  CHECK_ERROR(optim::SGD({w, b, w}, {}), octo::ValueError, "appear more than once");
  CHECK_ERROR(optim::Adam({optim::Adam::Group{{w}, {}}, optim::Adam::Group{{b, w}, {}}}),
              octo::ValueError, "appear more than once");
  Tensor non_leaf = octo::mul(w, w);
  CHECK_ERROR(optim::SGD({non_leaf}, {}), octo::ValueError, "non-leaf");
  CHECK_ERROR(optim::SGD({Tensor()}, {}), octo::ValueError, "undefined");
  Tensor ints = octo::zeros({2}, {.dtype = octo::kInt64});
  CHECK_ERROR(optim::SGD({ints}, {}), octo::ValueError, "floating point");
  optim::SGD ok({w}, {});
  CHECK_ERROR(ok.add_param_group({{w}, {}}), octo::ValueError, "appear more than once");
  CHECK_ERROR(ok.state(1), octo::IndexError, "state index 1 out of range");
}

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
