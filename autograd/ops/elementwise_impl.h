// The pieces of elementwise ops that elementwise.cpp and operators.cpp share: broadcasting,
// type promotion, raw (unrecorded) kernel calls and the Input record backwards use. Internal:
// not installed, included by those two files only.
#pragma once

#include <algorithm>
#include <initializer_list>

#include "autograd/ops/sum_to.h"
#include "core/error.h"
#include "kernels/backend.h"
#include "kernels/functors.h"
#include "tensor/factories.h"
#include "tensor/tensor.h"

namespace octo::elementwise_impl {

using kernels::BinaryOp;
using kernels::UnaryOp;

inline Shape broadcast_impl(const Shape& a, const Shape& b, const char* op) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i + a.size() < n ? 1 : a[i + a.size() - n];
    int64_t db = i + b.size() < n ? 1 : b[i + b.size() - n];
    OCTO_CHECK_VALUE(da == db || da == 1 || db == 1, op, ": the size of tensor a (", da,
                     ") must match the size of tensor b (", db, ") at non-singleton dimension ", i,
                     "; got shapes ", a, " and ", b);
    out[i] = da == 1 ? db : da;
  }
  return out;
}

/// PyTorch's rule for combining a dimensioned operand's dtype with a 0-d or wrapped-number one:
/// the lower-priority operand only matters when it is of a higher category (bool < int < float).
inline DType combine_categories(DType higher, DType lower) {
  if (is_floating(higher)) return higher;
  if (higher == kBool || is_floating(lower)) return promote_types(higher, lower);
  return higher;
}
/// The dtype of a op(a, b): promote_types, except that a 0-d tensor does not raise the dtype of
/// a dimensioned one within its category (float32 tensor * float64 0-d tensor is float32).
inline DType result_type(const Tensor& a, const Tensor& b) {
  bool za = a.dim() == 0, zb = b.dim() == 0;
  if (za == zb) return promote_types(a.dtype(), b.dtype());
  return za ? combine_categories(b.dtype(), a.dtype()) : combine_categories(a.dtype(), b.dtype());
}
/// A Scalar takes the tensor's dtype, except float scalars with integral tensors -> float32.
inline DType result_type(DType t, Scalar s) {
  return combine_categories(t, s.is_integral() ? kInt64 : kFloat32);
}

inline bool can_cast(DType from, DType to) {
  if (is_floating(from) && !is_floating(to)) return false;
  return !(from != kBool && to == kBool);
}

/// t as dtype d without autograd (a new tensor when d differs).
inline Tensor convert_raw(const Tensor& t, DType d) {
  if (t.dtype() == d) return t;
  Tensor out = detail::make_empty(t.sizes(), d, t.device());
  if (out.numel() > 0) kernels::backend(t.device()).copy(out.arg(), t.arg());
  return out;
}

/// t viewed with `shape` (NumPy broadcasting): stride 0 in new and size-1 dims.
inline Tensor broadcast_view(const Tensor& t, const Shape& shape) {
  if (t.sizes() == shape) return t;
  const size_t lead = shape.size() - static_cast<size_t>(t.dim());
  Shape strides(shape.size(), 0);
  for (size_t i = lead; i < shape.size(); ++i)
    if (t.sizes()[i - lead] == shape[i]) strides[i] = t.strides()[i - lead];
  return detail::make_view(t, shape, strides, t.storage_offset());
}

inline void check_inputs(const char* op, std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts) OCTO_CHECK_VALUE(t->defined(), op, ": expected a defined tensor");
  detail::check_same_device(ts);
}

/// out = op(a, b) computed in dtype `compute` (out is bool for comparisons), no autograd.
inline Tensor raw_binary(BinaryOp op, const Tensor& a, const Tensor& b, DType compute,
                         Scalar alpha = {}) {
  Shape shape = broadcast_impl(a.sizes(), b.sizes(), kernels::op_name(op));
  Tensor out =
      detail::make_empty(shape, kernels::binary_returns_bool(op) ? kBool : compute, a.device());
  if (out.numel() == 0) return out;
  Tensor av = broadcast_view(convert_raw(a, compute), shape);
  Tensor bv = broadcast_view(convert_raw(b, compute), shape);
  kernels::backend(a.device()).binary(op, out.arg(), av.arg(), bv.arg(), alpha);
  return out;
}

/// out = op(x) (out is bool for LogicalNot), no autograd.
inline Tensor raw_unary(UnaryOp op, const Tensor& x, Scalar alpha = {}, Scalar beta = {}) {
  Tensor out = detail::make_empty(x.sizes(), kernels::unary_returns_bool(op) ? kBool : x.dtype(),
                                  x.device());
  if (out.numel() > 0) kernels::backend(x.device()).unary(op, out.arg(), x.arg(), alpha, beta);
  return out;
}

inline Tensor float_unary(const char* name, UnaryOp op, const Tensor& x, Scalar alpha = {},
                          Scalar beta = {}) {
  check_inputs(name, {&x});
  OCTO_CHECK_VALUE(x.is_floating_point(), name, ": expected a floating point tensor, got ",
                   x.dtype());
  return raw_unary(op, x, alpha, beta);
}

/// A copy of t's values (same shape and dtype), no autograd.
inline Tensor copy_raw(const Tensor& t) {
  Tensor out = detail::make_empty(t.sizes(), t.dtype(), t.device());
  if (out.numel() > 0) kernels::backend(t.device()).copy(out.arg(), t.arg());
  return out;
}

/// A 0-d tensor holding s, for ops with a Scalar operand.
inline Tensor wrap(Scalar s, DType dtype, Device device) {
  return full({}, s, {.dtype = dtype, .device = device});
}

/// What a backward needs to know about an input: its shape, dtype, and whether it wants a grad.
struct Input {
  Shape shape;
  DType dtype;
  bool needs;
  explicit Input(const Tensor& t) : shape(t.sizes()), dtype(t.dtype()), needs(t.requires_grad()) {}
  /// g summed to the input's shape and cast to its dtype; undefined when no gradient is needed.
  template <typename F>
  Tensor grad(F&& compute) const {
    if (!needs) return {};
    Tensor g = compute();
    if (g.sizes() != shape) g = sum_to(g, shape);
    return g.dtype() == dtype ? g : g.to(dtype);
  }
};

inline Scalar negate(Scalar s) {
  return s.is_integral() ? Scalar(-s.to_int()) : Scalar(-s.to_double());
}
inline bool is_one(Scalar s) { return s.is_integral() ? s.to_int() == 1 : s.to_double() == 1.0; }

}  // namespace octo::elementwise_impl
