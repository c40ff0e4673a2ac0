// Learning-rate schedulers, following torch/optim/lr_scheduler.py's chainable formulas.
#include "optim/lr_scheduler.h"

#include <cmath>
#include <numbers>
#include <set>

#include "core/error.h"
#include "tensor/factories.h"

namespace octo::optim {

// --- LRScheduler -------------------------------------------------------------------------------

LRScheduler::LRScheduler(Optimizer& optimizer, std::string name)
    : optimizer_(&optimizer), name_(std::move(name)) {}

void LRScheduler::initialize() {
  const int64_t n = optimizer_->num_param_groups();
  base_lrs_.assign(static_cast<size_t>(n), 0.0);
  for (int64_t g = 0; g < n; ++g) {
    if (!optimizer_->initial_lr(g)) optimizer_->set_initial_lr(g, optimizer_->lr(g));
    base_lrs_[static_cast<size_t>(g)] = *optimizer_->initial_lr(g);
  }
  step_count_ = 0;
  is_initial_ = true;
  try {
    step();
  } catch (...) {
    is_initial_ = false;
    throw;
  }
  is_initial_ = false;
}

std::vector<double> LRScheduler::group_lrs() const {
  std::vector<double> out;
  for (int64_t g = 0; g < optimizer_->num_param_groups(); ++g) out.push_back(optimizer_->lr(g));
  return out;
}

void LRScheduler::step() {
  ++step_count_;
  ++last_epoch_;
  std::vector<double> values;
  try {
    values = get_lr();
  } catch (...) {
    --step_count_;
    --last_epoch_;
    throw;
  }
  OCTO_INTERNAL_ASSERT(static_cast<int64_t>(values.size()) == optimizer_->num_param_groups());
  for (size_t g = 0; g < values.size(); ++g)
    optimizer_->set_lr(static_cast<int64_t>(g), values[g], /*validate=*/false);
  last_lr_ = group_lrs();
}

NamedTensors LRScheduler::state_dict() const {
  NamedTensors out;
  out.emplace_back("last_epoch", scalar_tensor(last_epoch_, {.dtype = kInt64}));
  out.emplace_back("step_count", scalar_tensor(step_count_, {.dtype = kInt64}));
  for (size_t g = 0; g < base_lrs_.size(); ++g)
    out.emplace_back("base_lrs." + std::to_string(g),
                     scalar_tensor(base_lrs_[g], {.dtype = kFloat64}));
  for (size_t g = 0; g < last_lr_.size(); ++g)
    out.emplace_back("last_lr." + std::to_string(g),
                     scalar_tensor(last_lr_[g], {.dtype = kFloat64}));
  return out;
}

void LRScheduler::load_state_dict(const NamedTensors& sd) {
  std::map<std::string, Tensor> entries;
  for (const auto& [key, t] : sd) {
    OCTO_CHECK_VALUE(t.defined() && t.numel() == 1, name_, ".load_state_dict: expected '", key,
                     "' to hold one number");
    OCTO_CHECK_VALUE(entries.emplace(key, t).second, name_, ".load_state_dict: duplicate key '",
                     key, "'");
  }
  auto take = [&](const std::string& key) {
    auto it = entries.find(key);
    OCTO_CHECK_VALUE(it != entries.end(), name_, ".load_state_dict: missing key '", key, "'");
    double v = it->second.to(kCPU).to(kFloat64).item<double>();
    entries.erase(it);
    return v;
  };
  const size_t n = static_cast<size_t>(optimizer_->num_param_groups());
  // Counters: whole numbers in range before any cast (a double -> int64 cast of NaN or 1e300 is
  // undefined behaviour).
  auto counter = [&](const std::string& key, double lo) {
    double v = take(key);
    OCTO_CHECK_VALUE(std::isfinite(v) && v == std::floor(v) && v >= lo && v <= 9007199254740992.0,
                     name_, ".load_state_dict: '", key, "' is ", v,
                     "; expected a whole number in [", lo, ", 2^53]");
    return static_cast<int64_t>(v);
  };
  const int64_t last_epoch = counter("last_epoch", -1);
  const int64_t step_count = counter("step_count", 0);
  std::vector<double> base(n), last(n);
  for (size_t g = 0; g < n; ++g) {
    for (auto [key, out] :
         {std::pair<std::string, double*>{"base_lrs." + std::to_string(g), &base[g]},
          {"last_lr." + std::to_string(g), &last[g]}}) {
      *out = take(key);
      OCTO_CHECK_VALUE(std::isfinite(*out) && *out >= 0, name_, ".load_state_dict: '", key, "' is ",
                       *out, "; a learning rate must be finite and non-negative");
    }
  }
  OCTO_CHECK_VALUE(entries.empty(), name_, ".load_state_dict: unexpected key '",
                   entries.empty() ? "" : entries.begin()->first, "' (the optimizer has ", n,
                   " parameter groups; was the state saved for another one?)");
  last_epoch_ = last_epoch;
  step_count_ = step_count;
  base_lrs_ = std::move(base);
  last_lr_ = std::move(last);
}

// --- StepLR ------------------------------------------------------------------------------------

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer, "StepLR"), step_size_(step_size), gamma_(gamma) {
  OCTO_CHECK_VALUE(step_size > 0, "StepLR: expected step_size > 0, got ", step_size);
  initialize();
}

std::vector<double> StepLR::get_lr() {
  std::vector<double> lrs = group_lrs();
  if (last_epoch_ == 0 || last_epoch_ % step_size_ != 0) return lrs;
  for (double& lr : lrs) lr *= gamma_;
  return lrs;
}

// --- MultiStepLR -------------------------------------------------------------------------------

MultiStepLR::MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma)
    : LRScheduler(optimizer, "MultiStepLR"), gamma_(gamma) {
  for (int64_t m : milestones) ++milestones_[m];
  initialize();
}

std::vector<double> MultiStepLR::get_lr() {
  std::vector<double> lrs = group_lrs();
  auto it = milestones_.find(last_epoch_);
  if (it == milestones_.end()) return lrs;
  for (double& lr : lrs) lr *= std::pow(gamma_, static_cast<double>(it->second));
  return lrs;
}

// --- CosineAnnealingLR -------------------------------------------------------------------------

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min)
    : LRScheduler(optimizer, "CosineAnnealingLR"), t_max_(T_max), eta_min_(eta_min) {
  OCTO_CHECK_VALUE(T_max > 0, "CosineAnnealingLR: expected T_max > 0, got ", T_max);
  initialize();
}

std::vector<double> CosineAnnealingLR::get_lr() {
  constexpr double kPi = std::numbers::pi;
  std::vector<double> lrs = group_lrs();
  const double t = static_cast<double>(last_epoch_);
  const double T = static_cast<double>(t_max_);
  if (is_initial_) return lrs;
  for (size_t g = 0; g < lrs.size(); ++g) {
    const double base = base_lrs_[g];
    if (step_count_ == 1 && last_epoch_ > 0) {
      // Resumed part-way: the closed form.
      lrs[g] = eta_min_ + (base - eta_min_) * (1 + std::cos(t * kPi / T)) / 2;
    } else if ((last_epoch_ - 1 - t_max_) % (2 * t_max_) == 0) {
      // Just past a minimum: the recursion would divide by 1 + cos(pi) = 0.
      lrs[g] = lrs[g] + (base - eta_min_) * (1 - std::cos(kPi / T)) / 2;
    } else {
      lrs[g] =
          (1 + std::cos(kPi * t / T)) / (1 + std::cos(kPi * (t - 1) / T)) * (lrs[g] - eta_min_) +
          eta_min_;
    }
  }
  return lrs;
}

// --- LinearLR ----------------------------------------------------------------------------------

LinearLR::LinearLR(Optimizer& optimizer, double start_factor, double end_factor,
                   int64_t total_iters)
    : LRScheduler(optimizer, "LinearLR"),
      start_factor_(start_factor),
      end_factor_(end_factor),
      total_iters_(total_iters) {
  OCTO_CHECK_VALUE(
      start_factor > 0.0 && start_factor <= 1.0,
      "LinearLR: starting multiplicative factor expected to be greater than 0 and less or equal to 1, got ",
      start_factor);
  OCTO_CHECK_VALUE(end_factor >= 0.0 && end_factor <= 1.0,
                   "LinearLR: ending multiplicative factor expected to be between 0 and 1, got ",
                   end_factor);
  OCTO_CHECK_VALUE(total_iters >= 0, "LinearLR: expected total_iters >= 0, got ", total_iters);
  initialize();
}

std::vector<double> LinearLR::get_lr() {
  std::vector<double> lrs = group_lrs();
  if (last_epoch_ == 0) {
    for (double& lr : lrs) lr *= start_factor_;
    return lrs;
  }
  if (is_initial_ || last_epoch_ > total_iters_) return lrs;
  const double delta = end_factor_ - start_factor_;
  const double factor = 1.0 + delta / (static_cast<double>(total_iters_) * start_factor_ +
                                       static_cast<double>(last_epoch_ - 1) * delta);
  for (double& lr : lrs) lr *= factor;
  return lrs;
}

// --- OneCycleLR --------------------------------------------------------------------------------

OneCycleLR::OneCycleLR(Optimizer& optimizer, double max_lr, int64_t total_steps,
                       OneCycleLROptions options)
    : OneCycleLR(optimizer,
                 std::vector<double>(static_cast<size_t>(optimizer.num_param_groups()), max_lr),
                 total_steps, options) {}

OneCycleLR::OneCycleLR(Optimizer& optimizer, std::vector<double> max_lrs, int64_t total_steps,
                       OneCycleLROptions options)
    : LRScheduler(optimizer, "OneCycleLR"), total_steps_(total_steps), options_(options) {
  OCTO_CHECK_VALUE(total_steps > 0, "OneCycleLR: expected positive integer total_steps, but got ",
                   total_steps);
  OCTO_CHECK_VALUE(options.pct_start >= 0.0 && options.pct_start <= 1.0,
                   "OneCycleLR: expected float between 0 and 1 pct_start, but got ",
                   options.pct_start);
  const int64_t n = optimizer.num_param_groups();
  OCTO_CHECK_VALUE(
      static_cast<int64_t>(max_lrs.size()) == n,
      "OneCycleLR: max_lr must have the same length as the optimizer's parameter groups; max_lr has ",
      max_lrs.size(), " values, there are ", n, " groups");
  const double total = static_cast<double>(total_steps);
  const double pct_steps = options.pct_start * total;
  if (options.three_phase) {
    phases_ = {
        {pct_steps - 1, 0, 1, 0, 1}, {2 * pct_steps - 2, 1, 0, 1, 0}, {total - 1, 0, 2, 0, 0}};
  } else {
    phases_ = {{pct_steps - 1, 0, 1, 0, 1}, {total - 1, 1, 2, 1, 0}};
  }
  for (int64_t g = 0; g < n; ++g) {
    const double max_lr = max_lrs[static_cast<size_t>(g)];
    const double initial_lr = max_lr / options.div_factor;
    lrs_.push_back({initial_lr, max_lr, initial_lr / options.final_div_factor});
    optimizer.set_initial_lr(g, initial_lr);
  }
  if (options.cycle_momentum) {
    use_beta1_ = optimizer.has_option("betas.0");
    OCTO_CHECK_VALUE(
        use_beta1_ || optimizer.has_option("momentum"), "OneCycleLR: ", optimizer.name(),
        " must support momentum or beta1 with the cycle_momentum option enabled (pass .cycle_momentum = false)");
    for (int64_t g = 0; g < n; ++g)
      optimizer.set_option(g, use_beta1_ ? "betas.0" : "momentum", options.max_momentum);
  }
  initialize();
}

double OneCycleLR::anneal(double start, double end, double pct) const {
  if (options_.anneal_strategy == AnnealStrategy::Cos) {
    const double cos_out = std::cos(std::numbers::pi * pct) + 1;
    return end + (start - end) / 2.0 * cos_out;
  }
  return (end - start) * pct + start;
}

std::vector<double> OneCycleLR::get_lr() {
  const int64_t step_num = last_epoch_;
  OCTO_CHECK_VALUE(step_num <= total_steps_, "OneCycleLR: tried to step ", step_num,
                   " times. The specified number of total steps is ", total_steps_);
  const double momenta[2] = {options_.max_momentum, options_.base_momentum};
  const double s = static_cast<double>(step_num);
  std::vector<double> out;
  for (size_t g = 0; g < lrs_.size(); ++g) {
    double start_step = 0.0, lr = 0.0, momentum = 0.0;
    for (size_t i = 0; i < phases_.size(); ++i) {
      const Phase& ph = phases_[i];
      if (s <= ph.end_step || i + 1 == phases_.size()) {
        const double pct = (s - start_step) / (ph.end_step - start_step);
        lr = anneal(lrs_[g][ph.start_lr], lrs_[g][ph.end_lr], pct);
        momentum = anneal(momenta[ph.start_momentum], momenta[ph.end_momentum], pct);
        break;
      }
      start_step = ph.end_step;
    }
    out.push_back(lr);
    if (options_.cycle_momentum)
      optimizer_->set_option(static_cast<int64_t>(g), use_beta1_ ? "betas.0" : "momentum", momentum,
                             /*validate=*/false);
  }
  return out;
}

}  // namespace octo::optim
