// Tests for optim's learning-rate schedulers against PyTorch's closed-form formulas.
#include <octo/octo.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numbers>

namespace {

using octo::Tensor;
namespace optim = octo::optim;
constexpr double kPi = std::numbers::pi;

#define CHECK_ERROR(expr, Type, fragment)               \
  do {                                                  \
    CHECK_THROWS_AS(expr, Type);                        \
    CHECK_THROWS_WITH(expr, Catch::Contains(fragment)); \
  } while (0)

Tensor leaf(double v) {
  Tensor t = octo::tensor({v}, {.dtype = octo::kFloat64});
  t.requires_grad_();
  return t;
}

/// SGD with two groups (lr 0.1 and 0.03) over two scalars.
struct TwoGroups {
  Tensor a = leaf(1.0), b = leaf(2.0);
  optim::SGD opt{
      std::vector<optim::SGD::Group>{{{a}, {.lr = 0.1, .momentum = 0.9}}, {{b}, {.lr = 0.03}}}};
  std::vector<double> base = {0.1, 0.03};
};

void check_lr(double got, double want) {
  CHECK(std::abs(got - want) <= 1e-13 + 1e-12 * std::abs(want));
}

/// Checks the lr after construction (epoch 0) and after each of `steps` steps against
/// closed(base_lr, epoch), for every group, both from the optimizer and get_last_lr().
void check_schedule(optim::LRScheduler& sched, optim::Optimizer& opt,
                    const std::vector<double>& base,
                    const std::function<double(double, int)>& closed, int steps = 20) {
  for (int e = 0; e <= steps; ++e) {
    if (e > 0) sched.step();
    CHECK(sched.last_epoch() == e);
    for (int64_t g = 0; g < opt.num_param_groups(); ++g) {
      INFO("epoch " << e << ", group " << g);
      const double want = closed(base[static_cast<size_t>(g)], e);
      check_lr(opt.lr(g), want);
      CHECK(sched.get_last_lr()[static_cast<size_t>(g)] == opt.lr(g));
    }
  }
}

}  // namespace

TEST_CASE("StepLR: lr = base * gamma^(epoch // step_size)", "[optim][sched]") {
  TwoGroups m;
  optim::StepLR sched(m.opt, 3, 0.5);
  CHECK(sched.base_lrs() == m.base);
  check_schedule(sched, m.opt, m.base, [](double b, int e) { return b * std::pow(0.5, e / 3); });
}

TEST_CASE("StepLR: the default gamma is 0.1", "[optim][sched]") {
  TwoGroups m;
  optim::StepLR sched(m.opt, 4);
  check_schedule(sched, m.opt, m.base, [](double b, int e) { return b * std::pow(0.1, e / 4); });
}

TEST_CASE("MultiStepLR: lr = base * gamma^(milestones <= epoch)", "[optim][sched]") {
  TwoGroups m;
  const std::vector<int64_t> milestones = {2, 5, 5, 9, 30};  // 5 listed twice counts twice
  optim::MultiStepLR sched(m.opt, milestones, 0.3);
  check_schedule(sched, m.opt, m.base, [&](double b, int e) {
    const auto n = std::upper_bound(milestones.begin(), milestones.end(), e) - milestones.begin();
    return b * std::pow(0.3, static_cast<double>(n));
  });
}

TEST_CASE("CosineAnnealingLR: eta_min + (base - eta_min)(1 + cos(pi t / T_max)) / 2",
          "[optim][sched]") {
  const int64_t t_max = GENERATE(7, 10, 20);
  const double eta_min = GENERATE(0.0, 0.001);
  INFO("T_max " << t_max << ", eta_min " << eta_min);
  TwoGroups m;
  optim::CosineAnnealingLR sched(m.opt, t_max, eta_min);
  // 20 steps: past T_max the schedule follows the cosine back up
  check_schedule(sched, m.opt, m.base, [&](double b, int e) {
    return eta_min + (b - eta_min) * (1 + std::cos(kPi * e / static_cast<double>(t_max))) / 2;
  });
}

TEST_CASE("LinearLR: base * (start + (end - start) * min(t, T) / T)", "[optim][sched]") {
  SECTION("defaults: 1/3 -> 1 over 5 iterations") {
    TwoGroups m;
    optim::LinearLR sched(m.opt);
    check_schedule(sched, m.opt, m.base, [](double b, int e) {
      return b * (1.0 / 3 + (1 - 1.0 / 3) * std::min(e, 5) / 5.0);
    });
  }
  SECTION("decay 1 -> 0.2 over 8 iterations") {
    TwoGroups m;
    optim::LinearLR sched(m.opt, 1.0, 0.2, 8);
    check_schedule(sched, m.opt, m.base,
                   [](double b, int e) { return b * (1.0 + (0.2 - 1.0) * std::min(e, 8) / 8.0); });
  }
  SECTION("warmup 0.25 -> 0.75 over 12 iterations") {
    TwoGroups m;
    optim::LinearLR sched(m.opt, 0.25, 0.75, 12);
    check_schedule(sched, m.opt, m.base,
                   [](double b, int e) { return b * (0.25 + 0.5 * std::min(e, 12) / 12.0); });
  }
}

TEST_CASE("schedulers chain as in PyTorch: LinearLR warmup + StepLR", "[optim][sched]") {
  TwoGroups m;
  optim::LinearLR warmup(m.opt, 0.5, 1.0, 4);
  optim::StepLR decay(m.opt, 5, 0.5);
  // the second scheduler starts from the initial lr, not the warmup-scaled one
  CHECK(decay.base_lrs() == m.base);
  for (int e = 0; e <= 20; ++e) {
    if (e > 0) {
      warmup.step();
      decay.step();
    }
    for (int64_t g = 0; g < 2; ++g) {
      INFO("epoch " << e << ", group " << g);
      const double want = m.base[static_cast<size_t>(g)] * (0.5 + 0.5 * std::min(e, 4) / 4.0) *
                          std::pow(0.5, e / 5);
      check_lr(m.opt.lr(g), want);
    }
  }
}

namespace {

double anneal(bool cos, double start, double end, double pct) {
  return cos ? end + (start - end) / 2 * (std::cos(kPi * pct) + 1) : start + (end - start) * pct;
}

/// OneCycleLR's lr and momentum at step s, written out phase by phase.
std::pair<double, double> one_cycle(double max_lr, int total, double pct_start, bool cos,
                                    bool three_phase, int s, double div = 25,
                                    double final_div = 1e4, double m_lo = 0.85,
                                    double m_hi = 0.95) {
  const double lr0 = max_lr / div, lr_min = lr0 / final_div;
  const double up_end = pct_start * total - 1;
  if (s <= up_end) {
    const double pct = s / up_end;
    return {anneal(cos, lr0, max_lr, pct), anneal(cos, m_hi, m_lo, pct)};
  }
  if (!three_phase) {
    const double pct = (s - up_end) / (total - 1 - up_end);
    return {anneal(cos, max_lr, lr_min, pct), anneal(cos, m_lo, m_hi, pct)};
  }
  const double down_end = 2 * pct_start * total - 2;
  if (s <= down_end) {
    const double pct = (s - up_end) / (down_end - up_end);
    return {anneal(cos, max_lr, lr0, pct), anneal(cos, m_lo, m_hi, pct)};
  }
  const double pct = (s - down_end) / (total - 1 - down_end);
  return {anneal(cos, lr0, lr_min, pct), m_hi};
}

}  // namespace

TEST_CASE("OneCycleLR: lr and momentum through the phases", "[optim][sched]") {
  const bool cos = GENERATE(true, false);
  const bool three = GENERATE(false, true);
  const double pct_start = GENERATE(0.3, 0.25);
  const int total = 20;
  INFO("cos " << cos << ", three_phase " << three << ", pct_start " << pct_start);
  TwoGroups m;
  const std::vector<double> max_lrs = {0.5, 0.2};
  optim::OneCycleLR sched(
      m.opt, max_lrs, total,
      {.pct_start = pct_start,
       .anneal_strategy = cos ? optim::AnnealStrategy::Cos : optim::AnnealStrategy::Linear,
       .three_phase = three});
  CHECK(sched.base_lrs() == std::vector<double>{0.5 / 25, 0.2 / 25});
  for (int s = 0; s <= total; ++s) {
    if (s > 0) sched.step();
    for (int64_t g = 0; g < 2; ++g) {
      INFO("step " << s << ", group " << g);
      auto [lr, mom] = one_cycle(max_lrs[static_cast<size_t>(g)], total, pct_start, cos, three, s);
      check_lr(m.opt.lr(g), lr);
      check_lr(m.opt.get_option(g, "momentum"), mom);
    }
  }
  if (m.opt.lr(0) < 0) {  // linear annealing ends just below 0 at step total_steps
    m.a.set_grad(octo::ones({1}, {.dtype = octo::kFloat64}));
    CHECK_ERROR(m.opt.step(), octo::ValueError, "invalid learning rate");
  }
  CHECK_ERROR(sched.step(), octo::ValueError, "tried to step 21 times");
  CHECK(sched.last_epoch() == total);  // a failed step does not advance
}

TEST_CASE("OneCycleLR: cycles Adam's beta1; options", "[optim][sched]") {
  Tensor w = leaf(1.0);
  optim::Adam opt({w}, {.lr = 1.0, .betas = {0.9, 0.99}});
  optim::OneCycleLR sched(
      opt, 0.1, 10,
      {.base_momentum = 0.8, .max_momentum = 0.9, .div_factor = 10, .final_div_factor = 100});
  CHECK(opt.lr() == Approx(0.01));  // max_lr / div_factor
  for (int s = 0; s <= 10; ++s) {
    if (s > 0) sched.step();
    auto [lr, mom] = one_cycle(0.1, 10, 0.3, true, false, s, 10, 100, 0.8, 0.9);
    INFO("step " << s);
    check_lr(opt.lr(), lr);
    check_lr(opt.options().betas[0], mom);
    CHECK(opt.options().betas[1] == 0.99);
  }
  SECTION("without momentum cycling the betas stay") {
    Tensor v = leaf(1.0);
    optim::Adam o2({v}, {.betas = {0.5, 0.99}});
    optim::OneCycleLR s2(o2, 0.1, 10, {.cycle_momentum = false});
    s2.step();
    CHECK(o2.options().betas[0] == 0.5);
  }
}

namespace {

/// An optimizer without momentum, defined outside the library: plain gradient descent.
struct PlainOptions {
  double lr = 0.1;
  std::vector<optim::detail::OptionRef> refs() { return {{"lr", &lr}}; }
  void validate(const std::string& who) const {
    OCTO_CHECK_VALUE(lr >= 0, who, ": invalid learning rate: ", lr);
  }
};
struct Plain : optim::OptimizerBase<PlainOptions> {
  explicit Plain(std::vector<Tensor> ps) : OptimizerBase("Plain", {Group{std::move(ps), {}}}) {}
  void step() override {
    octo::NoGradGuard ng;
    for (Tensor p : groups_[0].params)
      if (p.grad().defined()) p.add_(p.grad(), -groups_[0].options.lr);
  }
};

}  // namespace

TEST_CASE("schedulers: errors", "[optim][sched][errors]") {
  TwoGroups m;
  CHECK_ERROR(optim::StepLR(m.opt, 0), octo::ValueError, "step_size > 0");
  CHECK_ERROR(optim::CosineAnnealingLR(m.opt, 0), octo::ValueError, "T_max > 0");
  CHECK_ERROR(optim::LinearLR(m.opt, 0.0), octo::ValueError, "starting multiplicative factor");
  CHECK_ERROR(optim::LinearLR(m.opt, 1.5), octo::ValueError, "starting multiplicative factor");
  CHECK_ERROR(optim::LinearLR(m.opt, 0.5, 1.5), octo::ValueError, "ending multiplicative factor");
  CHECK_ERROR(optim::OneCycleLR(m.opt, 0.1, 0), octo::ValueError, "total_steps");
  CHECK_ERROR(optim::OneCycleLR(m.opt, 0.1, 10, {.pct_start = 1.5}), octo::ValueError, "pct_start");
  CHECK_ERROR(optim::OneCycleLR(m.opt, std::vector<double>{0.1}, 10), octo::ValueError,
              "max_lr has 1 values, there are 2 groups");
  Plain plain({leaf(1.0)});
  CHECK_ERROR(optim::OneCycleLR(plain, 0.1, 10), octo::ValueError,
              "Plain must support momentum or beta1");
  optim::OneCycleLR ok(plain, 0.1, 10, {.cycle_momentum = false});
  CHECK(plain.lr() == Approx(0.004));
}

TEST_CASE("schedulers: a custom optimizer works with them", "[optim][sched]") {
  Tensor w = leaf(1.0);
  Plain plain({w});
  optim::StepLR sched(plain, 2, 0.5);
  for (int e = 0; e < 6; ++e) {
    w.set_grad(octo::ones({1}, {.dtype = octo::kFloat64}));
    plain.step();
    sched.step();
  }
  // lrs used: 0.1, 0.1, 0.05, 0.05, 0.025, 0.025
  CHECK(w.item<double>() == Approx(1.0 - 0.35));
}

namespace {

/// Runs `make` for `total` steps uninterrupted, and for `split` steps, then saves optimizer and
/// scheduler, builds fresh ones, loads both and runs the rest; the lr sequences must agree.
template <typename Make>
void check_resume(Make make, int split, int total) {
  std::vector<std::vector<double>> want;
  {
    TwoGroups m;
    auto s = make(m.opt);
    for (int e = 0; e < total; ++e) {
      s->step();
      want.push_back(s->get_last_lr());
    }
  }
  optim::NamedTensors opt_state, sched_state;
  {
    TwoGroups m;
    auto s = make(m.opt);
    for (int e = 0; e < split; ++e) s->step();
    opt_state = m.opt.state_dict();
    sched_state = s->state_dict();
  }
  TwoGroups m;
  auto s = make(m.opt);
  s->step();  // some progress that loading must overwrite
  m.opt.load_state_dict(opt_state);
  s->load_state_dict(sched_state);
  CHECK(s->last_epoch() == split);
  for (int e = split; e < total; ++e) {
    s->step();
    INFO("epoch " << e + 1);
    CHECK(s->get_last_lr() == want[static_cast<size_t>(e)]);
  }
}

}  // namespace

TEST_CASE("schedulers: state_dict save and load continue the schedule", "[optim][sched][state]") {
  SECTION("StepLR") {
    check_resume([](optim::Optimizer& o) { return std::make_unique<optim::StepLR>(o, 3, 0.5); }, 4,
                 12);
  }
  SECTION("MultiStepLR") {
    check_resume(
        [](optim::Optimizer& o) {
          return std::make_unique<optim::MultiStepLR>(o, std::vector<int64_t>{3, 7}, 0.1);
        },
        5, 12);
  }
  SECTION("CosineAnnealingLR") {
    check_resume(
        [](optim::Optimizer& o) { return std::make_unique<optim::CosineAnnealingLR>(o, 6, 0.01); },
        4, 15);
  }
  SECTION("LinearLR") {
    check_resume(
        [](optim::Optimizer& o) { return std::make_unique<optim::LinearLR>(o, 0.2, 1.0, 6); }, 3,
        10);
  }
  SECTION("OneCycleLR") {
    check_resume(
        [](optim::Optimizer& o) { return std::make_unique<optim::OneCycleLR>(o, 0.4, 12); }, 5, 12);
  }
}

TEST_CASE("schedulers: state_dict contents and errors", "[optim][sched][state][errors]") {
  TwoGroups m;
  optim::StepLR sched(m.opt, 2, 0.5);
  sched.step();
  sched.step();
  auto sd = sched.state_dict();
  std::map<std::string, Tensor> entries(sd.begin(), sd.end());
  CHECK(entries.at("last_epoch").item<int64_t>() == 2);
  CHECK(entries.at("base_lrs.1").item<double>() == 0.03);
  CHECK(entries.at("last_lr.0").item<double>() == Approx(0.05));
  // the optimizer's state dict remembers the initial lr
  auto osd = m.opt.state_dict();
  std::map<std::string, Tensor> o(osd.begin(), osd.end());
  CHECK(o.at("param_groups.0.initial_lr").item<double>() == 0.1);

  Tensor w = leaf(1.0);
  optim::SGD one({w}, {.lr = 0.1});
  optim::StepLR other(one, 2);
  CHECK_ERROR(other.load_state_dict(sd), octo::ValueError, "unexpected key 'base_lrs.1'");
  auto missing = sd;
  missing.erase(missing.begin());
  CHECK_ERROR(sched.load_state_dict(missing), octo::ValueError, "missing key 'last_epoch'");
  CHECK(sched.last_epoch() == 2);
}
