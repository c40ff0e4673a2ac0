// optim::SGD: stochastic gradient descent with momentum, dampening, Nesterov and weight decay.
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include "optim/optimizer.h"

namespace octo::optim {

/// SGD's options; defaults as torch.optim.SGD.
struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
  bool maximize = false;
  /// true: one fused backend pass per parameter (Backend::sgd_update); false: the update written
  /// in tensor ops, kept as the reference. Both give the same numbers (bit for bit for float32
  /// and float64). Not an option by name: state_dict() neither saves nor restores it.
  bool fused = true;
  /// true: a bfloat16 / float16 parameter is updated through a float32 master copy kept as state
  /// (Note [Master weights] in optim/optimizer.cpp); float32 and float64 parameters are unaffected.
  /// Not an option by name, like `fused`; the master copies are state and state_dict() saves them.
  bool master_weights = false;

  std::vector<detail::OptionRef> refs() {
    return {{"lr", &lr},
            {"momentum", &momentum},
            {"dampening", &dampening},
            {"weight_decay", &weight_decay},
            {"nesterov", &nesterov},
            {"maximize", &maximize}};
  }
  void validate(const std::string& who) const;
};

/// Stochastic gradient descent, with PyTorch's update rule for each parameter p with gradient g:
///
///   g = maximize ? -g : g
///   g = g + weight_decay * p                                   (if weight_decay != 0)
///   buf = g on the first step, else momentum * buf + (1 - dampening) * g   (if momentum != 0)
///   g = nesterov ? g + momentum * buf : buf                    (if momentum != 0)
///   p = p - lr * g
///
/// State per parameter: "momentum_buffer" (when momentum != 0). By default (options.fused) each
/// parameter is updated in one pass of the backend's fused kernel; see docs/optim.md.
///
///   octo::optim::SGD opt(model->parameters(), {.lr = 0.1, .momentum = 0.9, .nesterov = true});
///   octo::optim::SGD per_group({{body->parameters(), {.lr = 0.01}},
///                               {head->parameters(), {.lr = 0.1, .momentum = 0.9}}});
class SGD : public OptimizerBase<SGDOptions> {
 public:
  explicit SGD(std::vector<Tensor> params, SGDOptions options = {});
  explicit SGD(std::vector<Group> groups);
  using Optimizer::step;
  void step() override;
};

namespace detail {
/// Checks that every gradient of opt's parameters has its parameter's device, shape and dtype
/// (what SGD, Adam and AdamW require), before step() changes anything. The error names the
/// optimizer, the parameter's index (as in state_dict) and both devices, shapes or dtypes:
///   "Adam: parameter 2 has shape [3, 4] but its gradient has shape [4, 3] ..."
void check_grads(const Optimizer& opt);
/// True when every defined tensor in `state` has param's device, dtype and shape, so that the fused
/// backend update may run on them (state loaded or created by the optimizer always does).
bool fusable(const Tensor& param, std::initializer_list<const Tensor*> state);
}  // namespace detail

}  // namespace octo::optim
