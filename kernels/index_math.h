// Layout helpers of the index kernels (index_select, index_add, gather, scatter_add), shared by
// kernels/cpu/index.cpp and kernels/cuda/index.cu.
//
// Both backends reduce the four ops to a gather or a scatter-add over a "full" index that has the
// shape of the iterated tensor: index_select and index_add view their 1-d index with stride 0
// outside dim (broadcast_index), and the data tensors are walked over that shape with stride 0
// along dim (along), the kernel adding index * stride[dim] itself.
#pragma once

#include <cstdint>

#include "core/error.h"
#include "core/macros.h"
#include "kernels/tensor_arg.h"

namespace octo::kernels::index {

/// `t` iterated over `shape`'s sizes: t's own strides, but stride 0 along dim.
OCTO_HOST_DEVICE inline TensorArg along(const TensorArg& t, const TensorArg& shape, int dim) {
  TensorArg a = t;
  a.ndim = shape.ndim;
  for (int d = 0; d < shape.ndim; ++d) a.sizes[d] = shape.sizes[d];
  a.strides[dim] = 0;
  return a;
}

/// A 1-d index of length index.sizes[0] viewed with `shape`'s sizes: stride 0 outside dim.
OCTO_HOST_DEVICE inline TensorArg broadcast_index(const TensorArg& index, const TensorArg& shape,
                                                  int dim) {
  TensorArg a = index;
  a.ndim = shape.ndim;
  for (int d = 0; d < shape.ndim; ++d) {
    a.sizes[d] = shape.sizes[d];
    a.strides[d] = 0;
  }
  a.strides[dim] = index.ndim == 0 ? 0 : index.strides[0];
  return a;
}

/// Throws the IndexError both backends give for index value v outside [0, size) (host only).
inline void check_index(bool in_range, int64_t v, int64_t size, int dim, const char* op) {
  OCTO_CHECK_INDEX(in_range, op, ": index ", v, " is out of bounds for dimension ", dim,
                   " with size ", size);
}

}  // namespace octo::kernels::index
