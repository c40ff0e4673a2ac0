// Host-side preconditions of Backend::unary / binary / where, shared by both backends' kernels.
#pragma once

#include "core/error.h"
#include "kernels/tensor_arg.h"

namespace octo::kernels::elementwise {

/// `in` has out's shape (the caller broadcast it already).
inline void check_same_shape(const TensorArg& out, const TensorArg& in) {
  OCTO_INTERNAL_ASSERT(out.ndim == in.ndim);
  for (int d = 0; d < out.ndim; ++d) OCTO_INTERNAL_ASSERT(out.sizes[d] == in.sizes[d]);
}

inline void check_binary_args(const TensorArg& out, const TensorArg& a, const TensorArg& b) {
  check_same_shape(out, a);
  check_same_shape(out, b);
  OCTO_INTERNAL_ASSERT(a.dtype == b.dtype);
}

inline void check_where_args(const TensorArg& out, const TensorArg& cond, const TensorArg& a,
                             const TensorArg& b) {
  check_same_shape(out, cond);
  check_same_shape(out, a);
  check_same_shape(out, b);
  OCTO_INTERNAL_ASSERT(cond.dtype == kBool && a.dtype == out.dtype && b.dtype == out.dtype);
}

}  // namespace octo::kernels::elementwise
