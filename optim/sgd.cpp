// optim::SGD: PyTorch's single-tensor SGD update written in tensor ops.
#include "optim/sgd.h"

#include "autograd/grad_mode.h"
#include "autograd/ops/elementwise.h"
#include "core/trace.h"

namespace octo::optim {

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
  NoGradGuard no_grad;
  TraceSpan span("optimizer", groups_.front().params.front().device());
  int64_t index = 0;
  for (const Group& group : groups_) {
    const SGDOptions& o = group.options;
    for (Tensor p : group.params) {  // a handle: in-place ops are non-const members
      ParamState& state = mutable_state(index++);
      Tensor grad = p.grad();
      if (!grad.defined()) continue;
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
  }
}

}  // namespace octo::optim
