// optim::Adam and optim::AdamW: adaptive moment estimation, with L2 or decoupled weight decay.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "optim/optimizer.h"

namespace octo::optim {

namespace detail {
/// The options Adam and AdamW share. kDecoupledWeightDecay says how weight decay is applied: true
/// (AdamW) shrinks the parameter, false (Adam) adds the L2 penalty to the gradient; it also sets
/// weight_decay's default (1e-2 for AdamW, 0 for Adam, as PyTorch). A template rather than a base
/// struct so that designated initializers ({.lr = 0.01}) keep naming every field.
template <bool kDecoupledWeightDecay>
struct AdamOptionsFor {
  double lr = 1e-3;
  std::array<double, 2> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = kDecoupledWeightDecay ? 1e-2 : 0.0;
  bool amsgrad = false;
  bool maximize = false;
  /// true: one fused backend pass per parameter (Backend::adam_update); false: the update written
  /// in tensor ops, kept as the reference. Both give the same numbers (bit for bit for float32
  /// and float64). Not an option by name: state_dict() neither saves nor restores it.
  bool fused = true;
  /// true: a bfloat16 / float16 parameter is updated through a float32 master copy kept as state,
  /// with float32 moments (Note [Master weights] in optim/optimizer.cpp). Not an option by name.
  bool master_weights = false;

  std::vector<OptionRef> refs() {
    return {{"lr", &lr},
            {"betas.0", &betas[0]},
            {"betas.1", &betas[1]},
            {"eps", &eps},
            {"weight_decay", &weight_decay},
            {"amsgrad", &amsgrad},
            {"maximize", &maximize}};
  }
  void validate(const std::string& who) const;
};

/// What Adam and AdamW share: their step(), which differs only by the options' weight decay.
template <bool kDecoupledWeightDecay>
class AdamBase : public OptimizerBase<AdamOptionsFor<kDecoupledWeightDecay>> {
 public:
  using Optimizer::step;
  void step() override;

 protected:
  using OptimizerBase<AdamOptionsFor<kDecoupledWeightDecay>>::OptimizerBase;
};
}  // namespace detail

/// Adam's options; defaults as torch.optim.Adam.
using AdamOptions = detail::AdamOptionsFor<false>;
/// AdamW's options: Adam's, with torch.optim.AdamW's default weight_decay of 1e-2.
using AdamWOptions = detail::AdamOptionsFor<true>;

/// Adam (Kingma & Ba), with PyTorch's update for each parameter p with gradient g at step t:
///
///   g = maximize ? -g : g
///   g = g + weight_decay * p                      (Adam: L2 penalty added to the gradient)
///   m = beta1 * m + (1 - beta1) * g
///   v = beta2 * v + (1 - beta2) * g * g
///   v_max = max(v_max, v)                         (amsgrad; the denominator then uses v_max)
///   p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
///
/// State per parameter: "step" (0-d float64 on the cpu), "exp_avg", "exp_avg_sq" and, with
/// amsgrad, "max_exp_avg_sq". By default (options.fused) each parameter is updated in one pass of
/// the backend's fused kernel; see docs/optim.md.
///
///   octo::optim::Adam opt(model->parameters(), {.lr = 3e-4, .betas = {0.9, 0.98}});
class Adam : public detail::AdamBase<false> {
 public:
  explicit Adam(std::vector<Tensor> params, AdamOptions options = {});
  explicit Adam(std::vector<Group> groups);
};

/// AdamW (Loshchilov & Hutter): Adam with decoupled weight decay. Instead of adding
/// weight_decay * p to the gradient, each step first shrinks the parameter:
///   p = p * (1 - lr * weight_decay)
/// then applies Adam's update without weight decay.
class AdamW : public detail::AdamBase<true> {
 public:
  explicit AdamW(std::vector<Tensor> params, AdamWOptions options = {});
  explicit AdamW(std::vector<Group> groups);
};

namespace detail {
/// The hyperparameters of one Adam / AdamW update.
struct AdamHyper {
  double lr, beta1, beta2, eps, weight_decay;
  bool amsgrad, maximize, decoupled_weight_decay, fused, master_weights;
};
/// One Adam step of p (a parameter, or its master copy) with gradient `grad`; creates the state
/// on first use. The caller checked the gradient (detail::check_grads).
void adam_update(const Tensor& p, const Tensor& grad, ParamState& state, const AdamHyper& h);
}  // namespace detail

}  // namespace octo::optim
