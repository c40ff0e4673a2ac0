// optim::Adam and optim::AdamW: PyTorch's single-tensor Adam update, fused into one backend pass
// per parameter or written in tensor ops (the reference, options.fused = false).
#include "optim/adam.h"

#include <cmath>

#include "autograd/grad_mode.h"
#include "autograd/ops/elementwise.h"
#include "core/trace.h"
#include "kernels/backend.h"
#include "optim/sgd.h"
#include "tensor/factories.h"

namespace octo::optim {

namespace {

template <bool kDecoupled>
detail::AdamHyper hyper(const detail::AdamOptionsFor<kDecoupled>& o) {
  return {.lr = o.lr,
          .beta1 = o.betas[0],
          .beta2 = o.betas[1],
          .eps = o.eps,
          .weight_decay = o.weight_decay,
          .amsgrad = o.amsgrad,
          .maximize = o.maximize,
          .decoupled_weight_decay = kDecoupled,
          .fused = o.fused,
          .master_weights = o.master_weights};
}

/// The update in tensor ops, at step `step` (already counted): the reference the fused kernel
/// reproduces.
void adam_reference(Tensor p, Tensor grad, ParamState& state, const detail::AdamHyper& h,
                    double step) {
  if (h.maximize) grad = neg(grad);
  if (h.weight_decay != 0.0) {
    if (h.decoupled_weight_decay) {
      p.mul_(1.0 - h.lr * h.weight_decay);
    } else {
      grad = add(grad, p, h.weight_decay);
    }
  }
  Tensor& exp_avg = state.at("exp_avg");
  Tensor& exp_avg_sq = state.at("exp_avg_sq");
  exp_avg.mul_(h.beta1).add_(grad, 1.0 - h.beta1);
  exp_avg_sq.mul_(h.beta2).add_(mul(grad, grad), 1.0 - h.beta2);

  const double bias_correction1 = 1.0 - std::pow(h.beta1, step);
  const double bias_correction2 = 1.0 - std::pow(h.beta2, step);
  const double step_size = h.lr / bias_correction1;
  const double bias_correction2_sqrt = std::sqrt(bias_correction2);
  Tensor second = exp_avg_sq;
  if (h.amsgrad) {
    Tensor& max_sq = state.at("max_exp_avg_sq");
    max_sq.copy_(maximum(max_sq, exp_avg_sq));
    second = max_sq;
  }
  Tensor denom = sqrt(second) / bias_correction2_sqrt + h.eps;
  p.add_(div(exp_avg, denom), -step_size);
}

/// The fused update (kernels::Backend::adam_update) at step `step`.
void adam_fused(const Tensor& p, const Tensor& grad, ParamState& state, const detail::AdamHyper& h,
                double step) {
  const kernels::AdamParams params{.lr = h.lr,
                                   .beta1 = h.beta1,
                                   .beta2 = h.beta2,
                                   .eps = h.eps,
                                   .weight_decay = h.weight_decay,
                                   .step = step,
                                   .amsgrad = h.amsgrad,
                                   .maximize = h.maximize,
                                   .decoupled_weight_decay = h.decoupled_weight_decay};
  const Tensor& exp_avg = state.at("exp_avg");
  const Tensor& exp_avg_sq = state.at("exp_avg_sq");
  const Tensor max_sq = h.amsgrad ? state.at("max_exp_avg_sq") : Tensor();
  kernels::backend(p.device())
      .adam_update(p.arg(), grad.arg(), exp_avg.arg(), exp_avg_sq.arg(),
                   max_sq.defined() ? max_sq.arg() : kernels::TensorArg{}, params);
  for (const Tensor* t : {&p, &exp_avg, &exp_avg_sq, &max_sq})
    if (t->defined()) t->bump_version();
}

}  // namespace

template <bool kDecoupled>
void detail::AdamOptionsFor<kDecoupled>::validate(const std::string& who) const {
  OCTO_CHECK_VALUE(lr >= 0.0, who, ": invalid learning rate: ", lr, " (expected lr >= 0)");
  OCTO_CHECK_VALUE(eps >= 0.0, who, ": invalid epsilon value: ", eps, " (expected eps >= 0)");
  for (int i = 0; i < 2; ++i) {
    OCTO_CHECK_VALUE(betas[i] >= 0.0 && betas[i] < 1.0, who, ": invalid beta parameter at index ",
                     i, ": ", betas[i], " (expected 0 <= beta < 1)");
  }
  OCTO_CHECK_VALUE(weight_decay >= 0.0, who, ": invalid weight_decay value: ", weight_decay,
                   " (expected weight_decay >= 0)");
}
template struct detail::AdamOptionsFor<false>;
template struct detail::AdamOptionsFor<true>;

void detail::adam_update(const Tensor& p, const Tensor& grad, ParamState& state,
                         const AdamHyper& h) {
  if (!state.count("step")) state["step"] = scalar_tensor(0.0, {.dtype = kFloat64});
  if (!state.count("exp_avg")) state["exp_avg"] = zeros_like(p);
  if (!state.count("exp_avg_sq")) state["exp_avg_sq"] = zeros_like(p);
  if (h.amsgrad && !state.count("max_exp_avg_sq")) state["max_exp_avg_sq"] = zeros_like(p);
  Tensor& step_t = state.at("step");
  const double step = step_t.item<double>() + 1.0;
  step_t.fill_(step);

  const Tensor none;
  const bool fused = h.fused && fusable(p, {&state.at("exp_avg"), &state.at("exp_avg_sq"),
                                            h.amsgrad ? &state.at("max_exp_avg_sq") : &none});
  if (fused) {
    adam_fused(p, grad, state, h, step);
  } else {
    adam_reference(p, grad, state, h, step);
  }
}

template <bool kDecoupled>
void detail::AdamBase<kDecoupled>::step() {
  this->validate_all();
  check_grads(*this);
  NoGradGuard no_grad;
  TraceSpan span("optimizer", this->groups_.front().params.front().device());
  int64_t index = 0;
  for (const auto& group : this->groups_) {
    const AdamHyper h = hyper(group.options);
    for (const Tensor& p : group.params) {
      const int64_t i = index++;
      Tensor grad = p.grad();
      if (!grad.defined()) continue;
      const Tensor target = this->update_target(i, p, h.master_weights, &grad);
      adam_update(target, grad, this->mutable_state(i), h);
      this->finish_update(i, p, target);
    }
  }
}
template class detail::AdamBase<false>;
template class detail::AdamBase<true>;

Adam::Adam(std::vector<Tensor> params, AdamOptions options)
    : Adam(std::vector<Group>{Group{std::move(params), options}}) {}
Adam::Adam(std::vector<Group> groups) : AdamBase("Adam", std::move(groups)) {}

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions options)
    : AdamW(std::vector<Group>{Group{std::move(params), options}}) {}
AdamW::AdamW(std::vector<Group> groups) : AdamBase("AdamW", std::move(groups)) {}

}  // namespace octo::optim
