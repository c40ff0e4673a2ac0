// Strided N-d loops for CPU kernels: visit every element of N same-shaped TensorArgs in parallel.
#pragma once

#include <array>
#include <cstdint>

#include "core/threads.h"
#include "kernels/tensor_arg.h"

namespace octo::kernels::cpu {

inline constexpr int64_t kGrain = 32768;  // elements per parallel chunk, at least

/// Calls inner(ptrs, inner_strides_in_bytes, n) over runs of the innermost dim for N tensors of
/// the same shape: ptrs[k] points at tensor k's first element of the run. Dims are merged where
/// the layout allows, and the outer range is split across get_num_threads() threads.
template <size_t N, typename Inner>
void strided_runs(const std::array<TensorArg, N>& args, Inner inner, int64_t grain = kGrain) {
  const TensorArg& ref = args[0];
  // Coalesce: drop size-1 dims and merge dims that are contiguous in every tensor.
  int ndim = 0;
  int64_t sizes[kMaxDims];
  int64_t strides[N][kMaxDims];
  for (int d = 0; d < ref.ndim; ++d) {
    if (ref.sizes[d] == 1) continue;
    bool merge = ndim > 0;
    for (size_t k = 0; k < N && merge; ++k)
      merge = strides[k][ndim - 1] == args[k].strides[d] * ref.sizes[d];
    if (merge) {
      sizes[ndim - 1] *= ref.sizes[d];
      for (size_t k = 0; k < N; ++k) strides[k][ndim - 1] = args[k].strides[d];
    } else {
      sizes[ndim] = ref.sizes[d];
      for (size_t k = 0; k < N; ++k) strides[k][ndim] = args[k].strides[d];
      ++ndim;
    }
  }
  int64_t numel = ref.numel();
  if (numel == 0) return;
  if (ndim == 0) {  // a single element
    sizes[0] = 1;
    for (size_t k = 0; k < N; ++k) strides[k][0] = 0;
    ndim = 1;
  }
  const int64_t inner_n = sizes[ndim - 1];
  const int64_t outer_n = numel / inner_n;
  std::array<int64_t, N> inner_stride;
  std::array<int64_t, N> elem;
  for (size_t k = 0; k < N; ++k) {
    elem[k] = static_cast<int64_t>(itemsize(args[k].dtype));
    inner_stride[k] = strides[k][ndim - 1] * elem[k];
  }
  int64_t outer_grain = std::max<int64_t>(1, grain / std::max<int64_t>(inner_n, 1));
  parallel_for(0, outer_n, outer_grain, [&](int64_t begin, int64_t end) {
    // Multi-index of row `begin` over the outer dims.
    int64_t idx[kMaxDims] = {};
    int64_t rem = begin;
    for (int d = ndim - 2; d >= 0; --d) {
      idx[d] = rem % sizes[d];
      rem /= sizes[d];
    }
    for (int64_t row = begin; row < end; ++row) {
      std::array<char*, N> ptrs;
      for (size_t k = 0; k < N; ++k) {
        int64_t off = 0;
        for (int d = 0; d < ndim - 1; ++d) off += idx[d] * strides[k][d];
        ptrs[k] = static_cast<char*>(args[k].data) + off * elem[k];
      }
      inner(ptrs, inner_stride, inner_n);
      for (int d = ndim - 2; d >= 0; --d) {  // increment the multi-index
        if (++idx[d] < sizes[d]) break;
        idx[d] = 0;
      }
    }
  });
}

}  // namespace octo::kernels::cpu
