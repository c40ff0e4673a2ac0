// record(): how an op puts itself on the tape, with its backward written right beside it.
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/node.h"

namespace octo::autograd {

/// True when grad mode is on and any defined input requires grad: the op must be recorded.
bool needs_grad(std::initializer_list<const Tensor*> inputs);
bool needs_grad(const TensorList& inputs);

/// Records `out = op(inputs)` on the tape when needs_grad(inputs): creates a FunctionNode named
/// `name` with one edge per input, saves `saved` (checked for in-place changes at backward),
/// and makes it out's grad_fn. `backward(grads, saved)` gets grads[0] = dL/dout and the saved
/// tensors unpacked, and returns one gradient per input (undefined where an input needs none).
/// Returns out. A typical op (autograd/ops/elementwise.cpp has the real one):
///
///   Tensor my_mul(const Tensor& a, const Tensor& b) {
///     Tensor out = a.detach() * b.detach();  // the forward, not recorded
///     return record("MulBackward", out, {a, b}, /*saved=*/{a, b},
///                   [](const TensorList& g, const TensorList& s) -> TensorList {
///                     // sum_to undoes broadcasting: each gradient gets its input's shape
///                     return {sum_to(g[0] * s[1], s[0].sizes()),
///                             sum_to(g[0] * s[0], s[1].sizes())};
///                   });
///   }
///
/// The backward is written in tensor ops, so it runs on any device and, under create_graph,
/// records itself for double backward (Note [create_graph] in autograd/engine.cpp).
Tensor record(const char* name, Tensor out, const TensorList& inputs, const TensorList& saved,
              FunctionNode::BackwardFn backward);

/// The same for ops with several outputs (split, chunk, max with indices, ...): grads has one
/// entry per output, undefined for outputs that received no gradient.
TensorList record_multi(const char* name, TensorList outs, const TensorList& inputs,
                        const TensorList& saved, FunctionNode::BackwardFn backward);

// In-place ops are recorded by check_inplace/record_inplace, in autograd/inplace.h.

/// True when t has no NaN or Inf (always for integer dtypes); one reduction and a sync. Used by
/// anomaly mode (Note [Anomaly mode]).
bool all_finite(const Tensor& t);

}  // namespace octo::autograd
