// The engine: replays the tape backwards from some roots, accumulating into leaves or capturing.
#pragma once

#include <functional>
#include <optional>

#include "autograd/node.h"

namespace octo::autograd {

/// Computes the gradients of `roots` (seeded with `grad_roots`, default 1 for scalar roots) with
/// respect to every leaf that requires grad, and accumulates them into the leaves' grad().
/// Saved tensors are freed afterwards unless retain_graph (which defaults to create_graph). With
/// create_graph the backward formulas are themselves recorded (Note [create_graph]), so the
/// gradients can be differentiated again.
void backward(const TensorList& roots, const TensorList& grad_roots = {},
              std::optional<bool> retain_graph = {}, bool create_graph = false);

/// Returns d(roots)/d(inputs) (one tensor per input) without touching any .grad. An input the
/// roots do not depend on is an error unless allow_unused (it then gets an undefined tensor).
/// With create_graph the results have a grad_fn: a Hessian-vector product is
///
///   auto g = autograd::grad({loss}, {w}, {}, {}, false, /*create_graph=*/true);
///   auto hv = autograd::grad({(g[0] * v).sum()}, {w});
TensorList grad(const TensorList& roots, const TensorList& inputs,
                const TensorList& grad_roots = {}, std::optional<bool> retain_graph = {},
                bool allow_unused = false, bool create_graph = false);

/// Runs `callback` once the backward pass now running has finished its last node, on the thread
/// that called backward() and before backward() returns (torch's queue_callback). Only valid
/// inside a backward pass, i.e. from a hook; DistributedDataParallel waits for its all-reduces
/// there. Callbacks run in the order queued; an exception from one ends backward() with it.
void queue_callback(std::function<void()> callback);

}  // namespace octo::autograd
