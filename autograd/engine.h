// The engine: replays the tape backwards from some roots, accumulating into leaves or capturing.
#pragma once

#include "autograd/node.h"

namespace octo::autograd {

/// Computes the gradients of `roots` (seeded with `grad_roots`, default 1 for scalar roots) with
/// respect to every leaf that requires grad, and accumulates them into the leaves' grad().
/// Saved tensors are freed afterwards unless retain_graph.
void backward(const TensorList& roots, const TensorList& grad_roots = {},
              bool retain_graph = false);

/// Returns d(roots)/d(inputs) (one tensor per input) without touching any .grad. An input the
/// roots do not depend on is an error unless allow_unused (it then gets an undefined tensor).
TensorList grad(const TensorList& roots, const TensorList& inputs,
                const TensorList& grad_roots = {}, bool retain_graph = false,
                bool allow_unused = false);

}  // namespace octo::autograd
