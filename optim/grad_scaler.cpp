// GradScaler: the loss scale, the per-optimizer inf checks and the scale's growth and backoff.
#include "optim/grad_scaler.h"

#include <cmath>
#include <string>

#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "core/error.h"
#include "tensor/factories.h"

namespace octo {

namespace {

/// The options' ranges; `where` starts the message, and a loaded state dict's values are named
/// by their keys ('scale' is init_scale's).
void check_options(const char* where, bool loaded, double init_scale, double growth_factor,
                   double backoff_factor, int64_t growth_interval) {
  OCTO_CHECK_VALUE(std::isfinite(init_scale) && init_scale > 0.0, where, ": expected a finite ",
                   loaded ? "'scale'" : "init_scale", " > 0, got ", init_scale);
  OCTO_CHECK_VALUE(std::isfinite(growth_factor) && growth_factor > 1.0, where, ": expected ",
                   loaded ? "'growth_factor'" : "growth_factor", " > 1, got ", growth_factor);
  OCTO_CHECK_VALUE(backoff_factor > 0.0 && backoff_factor < 1.0, where, ": expected 0 < ",
                   loaded ? "'backoff_factor'" : "backoff_factor", " < 1, got ", backoff_factor);
  OCTO_CHECK_VALUE(growth_interval > 0, where, ": expected ",
                   loaded ? "'growth_interval'" : "growth_interval", " > 0, got ", growth_interval);
}

}  // namespace

GradScaler::GradScaler(GradScalerOptions options)
    : scale_(options.init_scale),
      growth_factor_(options.growth_factor),
      backoff_factor_(options.backoff_factor),
      growth_interval_(options.growth_interval),
      enabled_(options.enabled) {
  check_options("GradScaler", false, scale_, growth_factor_, backoff_factor_, growth_interval_);
}

Tensor GradScaler::scale(const Tensor& loss) const {
  OCTO_CHECK_VALUE(loss.defined(), "GradScaler.scale: got an undefined tensor");
  if (!enabled_) return loss;
  OCTO_CHECK_VALUE(loss.is_floating_point(),
                   "GradScaler.scale: expected a floating-point loss, got ", loss.dtype());
  const Tensor l = is_half(loss.dtype()) ? loss.to(kFloat32) : loss;
  return l * scale_;
}

void GradScaler::unscale_grads(optim::Optimizer& opt, OptState& st) const {
  NoGradGuard no_grad;
  const double inv = 1.0 / scale_;
  bool found = false;
  for (const Tensor& p : opt.parameters()) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    g.mul_(inv);
    // an inf stays inf and a NaN stays NaN through the multiplication
    if (!found && !autograd::all_finite(g)) found = true;
  }
  st.found_inf = found;
  st.stage = Stage::kUnscaled;
}

void GradScaler::unscale_(optim::Optimizer& opt) {
  if (!enabled_) return;
  OptState& st = per_optimizer_[&opt];
  OCTO_CHECK_VALUE(
      st.stage == Stage::kReady,
      st.stage == Stage::kUnscaled
          ? "GradScaler.unscale_: unscale_() has already been called on this optimizer since the last update()"
          : "GradScaler.unscale_: unscale_() is being called after step()");
  unscale_grads(opt, st);
}

bool GradScaler::step(optim::Optimizer& opt) {
  if (!enabled_) {
    opt.step();
    return true;
  }
  OptState& st = per_optimizer_[&opt];
  OCTO_CHECK_VALUE(
      st.stage != Stage::kStepped,
      "GradScaler.step: step() has already been called on this optimizer since the last update()");
  if (st.stage == Stage::kReady) unscale_grads(opt, st);
  st.stage = Stage::kStepped;
  if (st.found_inf) return false;
  opt.step();
  return true;
}

void GradScaler::update() {
  if (!enabled_) return;
  OCTO_CHECK_VALUE(
      !per_optimizer_.empty(),
      "GradScaler.update: no inf checks were recorded prior to update() (call step() or unscale_() first)");
  bool found_inf = false;
  for (const auto& [opt, st] : per_optimizer_) found_inf = found_inf || st.found_inf;
  if (found_inf) {
    scale_ *= backoff_factor_;
    growth_tracker_ = 0;
  } else if (++growth_tracker_ == growth_interval_) {
    scale_ *= growth_factor_;
    growth_tracker_ = 0;
  }
  per_optimizer_.clear();
}

void GradScaler::update(double new_scale) {
  if (!enabled_) return;
  OCTO_CHECK_VALUE(std::isfinite(new_scale) && new_scale > 0.0,
                   "GradScaler.update: expected a finite new_scale > 0, got ", new_scale);
  scale_ = new_scale;
  per_optimizer_.clear();
}

optim::NamedTensors GradScaler::state_dict() const {
  optim::NamedTensors out;
  if (!enabled_) return out;
  out.emplace_back("scale", scalar_tensor(scale_, {.dtype = kFloat64}));
  out.emplace_back("growth_factor", scalar_tensor(growth_factor_, {.dtype = kFloat64}));
  out.emplace_back("backoff_factor", scalar_tensor(backoff_factor_, {.dtype = kFloat64}));
  out.emplace_back("growth_interval", scalar_tensor(growth_interval_, {.dtype = kInt64}));
  out.emplace_back("_growth_tracker", scalar_tensor(growth_tracker_, {.dtype = kInt64}));
  return out;
}

void GradScaler::load_state_dict(const optim::NamedTensors& state_dict) {
  if (!enabled_) return;
  OCTO_CHECK_VALUE(
      !state_dict.empty(),
      "GradScaler.load_state_dict: the state dict is empty, possibly because it was saved from a disabled GradScaler");
  std::map<std::string, double> entries;
  for (const auto& [key, t] : state_dict) {
    OCTO_CHECK_VALUE(t.defined() && t.numel() == 1, "GradScaler.load_state_dict: expected '", key,
                     "' to hold one number");
    OCTO_CHECK_VALUE(entries.emplace(key, t.to(kCPU).to(kFloat64).item<double>()).second,
                     "GradScaler.load_state_dict: duplicate key '", key, "'");
  }
  auto take = [&](const std::string& key) {
    auto it = entries.find(key);
    OCTO_CHECK_VALUE(it != entries.end(), "GradScaler.load_state_dict: missing key '", key, "'");
    const double v = it->second;
    entries.erase(it);
    return v;
  };
  auto counter = [&](const std::string& key, double lo) {
    const double v = take(key);
    OCTO_CHECK_VALUE(std::isfinite(v) && v == std::floor(v) && v >= lo && v <= 9007199254740992.0,
                     "GradScaler.load_state_dict: '", key, "' is ", v,
                     "; expected a whole number in [", lo, ", 2^53]");
    return static_cast<int64_t>(v);
  };
  const double scale = take("scale");
  const double growth = take("growth_factor");
  const double backoff = take("backoff_factor");
  const int64_t interval = counter("growth_interval", 1);
  const int64_t tracker = counter("_growth_tracker", 0);
  OCTO_CHECK_VALUE(entries.empty(), "GradScaler.load_state_dict: unexpected key '",
                   entries.empty() ? "" : entries.begin()->first, "'");
  check_options("GradScaler.load_state_dict", true, scale, growth, backoff, interval);
  scale_ = scale;
  growth_factor_ = growth;
  backoff_factor_ = backoff;
  growth_interval_ = interval;
  growth_tracker_ = tracker;
  per_optimizer_.clear();
}

}  // namespace octo
