// optim::SGD: stochastic gradient descent with momentum, dampening, Nesterov and weight decay.
#pragma once

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
/// State per parameter: "momentum_buffer" (when momentum != 0).
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

}  // namespace octo::optim
