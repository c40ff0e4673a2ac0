// In-place ops on the tape: checking and recording them, and what they do to views and bases.
#pragma once

#include "autograd/function.h"

namespace octo::autograd {

/// For in-place ops, before mutating `self`: throws PyTorch's errors for a leaf that requires
/// grad ("a leaf Variable that requires grad is being used in an in-place operation"), for a
/// view of one, and for a view whose elements overlap (an expand) while grad mode is on.
void check_inplace(const Tensor& self);

/// Records an in-place op `self = op(self, others...)` that already ran: the new node's first
/// edge is self's previous history, so backward(grads, saved) returns {d/d old self, d/d
/// others...}. Bumps self's version counter (Note [Version counter]) whether or not anything is
/// recorded. `saved` may hold self (saved after the bump: the op's output) and other inputs (saved
/// before). When self is a view, its base's history is rebased too (Note [In-place ops on views]).
void record_inplace(const char* name, const Tensor& self, const TensorList& others,
                    const TensorList& saved, FunctionNode::BackwardFn backward);

/// Called by every view op under grad mode: makes `view` remember the tensor owning the storage
/// (base's own base when base is a view), so an in-place op on it can rebase that tensor.
void mark_view(const Tensor& view, const Tensor& base);

/// A view whose base was changed in place since its grad_fn was set (through another view, or
/// directly) gets a new grad_fn from the base's current history. Run by Tensor::grad_fn() and
/// Tensor::requires_grad(); a no-op for anything but a stale view.
void refresh_view(const Tensor& t);

}  // namespace octo::autograd
