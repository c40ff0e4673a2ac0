// optim::SGD: PyTorch's single-tensor SGD update, fused into one backend pass per parameter or
// written in tensor ops (the reference, options.fused = false).
#include "optim/sgd.h"

#include "autograd/grad_mode.h"
#include "autograd/ops/elementwise.h"
#include "core/trace.h"
#include "kernels/backend.h"
#include "tensor/factories.h"

namespace octo::optim {

namespace {

/// The update in tensor ops: the reference the fused kernel reproduces.
void sgd_reference(Tensor p, const Tensor& grad, ParamState& state, const SGDOptions& o) {
  Tensor d_p = o.maximize ? neg(grad) : grad;
  if (o.weight_decay != 0.0) d_p = add(d_p, p, o.weight_decay);
  if (o.momentum != 0.0) {
    auto it = state.find("momentum_buffer");
    Tensor buf;
    if (it == state.end()) {
      buf = d_p.detach().clone();
      state["momentum_buffer"] = buf;
    } else {
      buf = it->second;
      buf.mul_(o.momentum).add_(d_p, 1.0 - o.dampening);
    }
    d_p = o.nesterov ? add(d_p, buf, o.momentum) : buf;
  }
  p.add_(d_p, -o.lr);
}

/// The fused update (kernels::Backend::sgd_update); false, with nothing changed, when an existing
/// momentum buffer's device, dtype or shape differs from p's (detail::fusable).
bool sgd_fused(const Tensor& p, const Tensor& grad, ParamState& state, const SGDOptions& o) {
  kernels::SgdParams params{.lr = o.lr,
                            .momentum = o.momentum,
                            .dampening = o.dampening,
                            .weight_decay = o.weight_decay,
                            .nesterov = o.nesterov,
                            .maximize = o.maximize};
  Tensor buf;
  if (o.momentum != 0.0) {
    auto it = state.find("momentum_buffer");
    if (it == state.end()) {
      buf = zeros_like(p);  // written with d_p by the kernel (first_step)
      params.first_step = true;
    } else {
      buf = it->second;
      if (!detail::fusable(p, {&buf})) return false;
    }
  }
  kernels::backend(p.device())
      .sgd_update(p.arg(), grad.arg(), buf.defined() ? buf.arg() : kernels::TensorArg{}, params);
  p.bump_version();
  if (buf.defined()) {
    buf.bump_version();
    if (params.first_step) state["momentum_buffer"] = buf;
  }
  return true;
}

}  // namespace

void detail::check_grads(const Optimizer& opt) {
  int64_t index = 0;
  for (const Tensor& param : opt.parameters()) {
    const int64_t i = index++;
    const Tensor grad = param.grad();
    if (!grad.defined()) continue;
    OCTO_CHECK_DEVICE(grad.device() == param.device(), opt.name(), ": parameter ", i, " is on ",
                      param.device(), " but its gradient is on ", grad.device(),
                      " (expected the gradient on the parameter's device)");
    OCTO_CHECK_VALUE(grad.sizes() == param.sizes(), opt.name(), ": parameter ", i, " has shape ",
                     param.sizes(), " but its gradient has shape ", grad.sizes(),
                     " (expected the same shape)");
    OCTO_CHECK_VALUE(grad.dtype() == param.dtype(), opt.name(), ": parameter ", i, " has dtype ",
                     param.dtype(), " but its gradient has dtype ", grad.dtype(),
                     " (expected the same dtype)");
  }
}

bool detail::fusable(const Tensor& param, std::initializer_list<const Tensor*> state) {
  for (const Tensor* t : state) {
    if (t->defined() && (t->device() != param.device() || t->dtype() != param.dtype() ||
                         t->sizes() != param.sizes()))
      return false;
  }
  return true;
}

void SGDOptions::validate(const std::string& who) const {
  OCTO_CHECK_VALUE(lr >= 0.0, who, ": invalid learning rate: ", lr, " (expected lr >= 0)");
  OCTO_CHECK_VALUE(momentum >= 0.0, who, ": invalid momentum value: ", momentum,
                   " (expected momentum >= 0)");
  OCTO_CHECK_VALUE(weight_decay >= 0.0, who, ": invalid weight_decay value: ", weight_decay,
                   " (expected weight_decay >= 0)");
  OCTO_CHECK_VALUE(!nesterov || (momentum > 0.0 && dampening == 0.0), who,
                   ": Nesterov momentum requires a momentum and zero dampening, got momentum=",
                   momentum, " and dampening=", dampening);
}

SGD::SGD(std::vector<Tensor> params, SGDOptions options)
    : SGD(std::vector<Group>{Group{std::move(params), options}}) {}

SGD::SGD(std::vector<Group> groups) : OptimizerBase("SGD", std::move(groups)) {}

void SGD::step() {
  validate_all();
  detail::check_grads(*this);
  NoGradGuard no_grad;
  TraceSpan span("optimizer", groups_.front().params.front().device());
  int64_t index = 0;
  for (const Group& group : groups_) {
    const SGDOptions& o = group.options;
    for (const Tensor& p : group.params) {
      const int64_t i = index++;
      Tensor grad = p.grad();
      if (!grad.defined()) continue;
      const Tensor target = update_target(i, p, o.master_weights, &grad);
      ParamState& state = mutable_state(i);
      if (!(o.fused && sgd_fused(target, grad, state, o))) sgd_reference(target, grad, state, o);
      finish_update(i, p, target);
    }
  }
}

}  // namespace octo::optim
