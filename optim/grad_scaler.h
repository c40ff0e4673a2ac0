// GradScaler: dynamic loss scaling for mixed-precision training, as torch.amp.GradScaler.
#pragma once

#include <cstdint>
#include <map>

#include "optim/optimizer.h"
#include "tensor/tensor.h"

namespace octo {

/// The options of a GradScaler, with PyTorch's defaults.
struct GradScalerOptions {
  /// The scale the first iterations multiply the loss by.
  double init_scale = 65536.0;
  /// The factor the scale grows by after growth_interval consecutive steps without inf/NaN.
  double growth_factor = 2.0;
  /// The factor the scale shrinks by when an iteration finds inf/NaN gradients.
  double backoff_factor = 0.5;
  /// The number of consecutive good steps after which the scale grows.
  int64_t growth_interval = 2000;
  /// false: scale() returns the loss unchanged, step() just steps, update() does nothing.
  bool enabled = true;
};

/// Dynamic loss scaling (torch.amp.GradScaler). The loss is multiplied by the scale before
/// backward, so that small 16-bit gradients do not flush to zero; unscale_() divides the
/// gradients by it again and records whether any of them is inf or NaN; step() skips the
/// optimizer's step when one was; update() halves the scale after such an iteration and doubles
/// it after growth_interval good ones.
///
///   octo::GradScaler scaler;
///   for (...) {
///     opt.zero_grad();
///     scaler.scale(loss(...)).backward();
///     scaler.unscale_(opt);  // optional: only needed to clip or inspect the true gradients
///     scaler.step(opt);
///     scaler.update();
///   }
class GradScaler {
 public:
  explicit GradScaler(GradScalerOptions options = {});

  /// The loss times the scale (differentiable). A 16-bit loss is multiplied in float32 (as
  /// PyTorch's float32 scale tensor promotes it), so the scaled loss cannot overflow float16.
  Tensor scale(const Tensor& loss) const;
  /// Divides the gradients of opt's parameters by the scale, in place, and records whether any
  /// of them holds inf or NaN. At most once per optimizer between two update() calls (ValueError
  /// otherwise); step() calls it when it has not been called.
  void unscale_(optim::Optimizer& opt);
  /// Unscales opt's gradients if unscale_(opt) has not, then runs opt.step() unless an inf or NaN
  /// gradient was found. Returns whether the optimizer stepped. Once per optimizer per update().
  bool step(optim::Optimizer& opt);
  /// Adjusts the scale from the iteration's inf checks (backoff on overflow, growth after
  /// growth_interval good steps) and starts the next iteration. ValueError when no step() or
  /// unscale_() ran since the last update().
  void update();
  /// Sets the scale directly (PyTorch's update(new_scale)) and starts the next iteration.
  void update(double new_scale);

  /// The current scale (1 when disabled).
  double get_scale() const { return enabled_ ? scale_ : 1.0; }
  bool is_enabled() const { return enabled_; }
  /// Consecutive good steps since the scale last changed.
  int64_t growth_tracker() const { return growth_tracker_; }
  double growth_factor() const { return growth_factor_; }
  double backoff_factor() const { return backoff_factor_; }
  int64_t growth_interval() const { return growth_interval_; }

  /// PyTorch's keys, 0-d tensors: "scale", "growth_factor", "backoff_factor" (float64),
  /// "growth_interval", "_growth_tracker" (int64). Empty when disabled.
  optim::NamedTensors state_dict() const;
  /// Restores a state_dict(); ValueError on missing, unexpected or invalid entries, or an empty
  /// one (saved from a disabled scaler). Does nothing when this scaler is disabled.
  void load_state_dict(const optim::NamedTensors& state_dict);

 private:
  enum class Stage { kReady, kUnscaled, kStepped };
  struct OptState {
    Stage stage = Stage::kReady;
    bool found_inf = false;
  };
  void unscale_grads(optim::Optimizer& opt, OptState& st) const;

  double scale_;
  double growth_factor_;
  double backoff_factor_;
  int64_t growth_interval_;
  bool enabled_;
  int64_t growth_tracker_ = 0;
  /// This iteration's per-optimizer stage and inf check (PyTorch's _per_optimizer_states).
  std::map<const optim::Optimizer*, OptState> per_optimizer_;
};

}  // namespace octo
