// AutogradMeta: what a tensor carries for autograd (grad, grad_fn, hooks). See autograd/.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "tensor/tensor.h"

namespace octo {

namespace autograd {
class Node;
}

struct AutogradMeta {
  bool requires_grad = false;
  bool retains_grad = false;
  Tensor grad;
  /// The node that produced this tensor (null for leaves).
  std::shared_ptr<autograd::Node> grad_fn;
  /// Which output of grad_fn this tensor is.
  int output_nr = 0;
  /// Leaves only: the AccumulateGrad node every edge to this leaf shares (created lazily).
  std::weak_ptr<autograd::Node> grad_accumulator;
  /// Leaves only: hooks on the incoming gradient (Tensor::register_hook), run before accumulating.
  std::vector<std::function<Tensor(const Tensor&)>> hooks;
  /// Leaves only: hooks run after the gradient has been accumulated into .grad.
  std::vector<std::function<void(Tensor&)>> post_accumulate_hooks;
  /// Views made by a view op under grad mode (Note [In-place ops on views] in
  /// autograd/inplace.cpp): the tensor that owns the storage this view looks into (never itself
  /// a view), and the storage version at which grad_fn was last derived from it.
  Tensor view_base;
  uint32_t view_version = 0;
};

}  // namespace octo
