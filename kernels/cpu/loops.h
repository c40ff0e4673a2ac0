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
/// the layout allows; a run is a whole row of the innermost (merged) dim or, for rows longer than
/// `grain`, a piece of at most `grain` elements of one, and the runs are split across
/// get_num_threads() threads.
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
  // Note [Splitting long rows]: the work is (row, piece) items, a piece being at most `grain`
  // elements of a row. Threads split the items, so a contiguous tensor, which coalesces into a
  // single row, runs in parallel too, and so does a tensor of a few long rows.
  const int64_t inner_n = sizes[ndim - 1];
  const int64_t outer_n = numel / inner_n;
  // A row of more than `grain` elements is cut into equal pieces of at most `grain`.
  grain = std::max<int64_t>(grain, 1);
  const int64_t pieces = (inner_n + grain - 1) / grain;   // per row
  const int64_t piece = (inner_n + pieces - 1) / pieces;  // elements, the last piece maybe fewer
  std::array<int64_t, N> inner_stride;
  std::array<int64_t, N> elem;
  for (size_t k = 0; k < N; ++k) {
    elem[k] = static_cast<int64_t>(itemsize(args[k].dtype));
    inner_stride[k] = strides[k][ndim - 1] * elem[k];
  }
  const int64_t item_grain = std::max<int64_t>(1, grain / piece);
  parallel_for(0, outer_n * pieces, item_grain, [&](int64_t begin, int64_t end) {
    // Multi-index of item `begin`'s row over the outer dims.
    int64_t idx[kMaxDims] = {};
    int64_t rem = begin / pieces;
    for (int d = ndim - 2; d >= 0; --d) {
      idx[d] = rem % sizes[d];
      rem /= sizes[d];
    }
    int64_t p = begin % pieces;
    for (int64_t item = begin; item < end; ++item) {
      const int64_t start = p * piece;
      std::array<char*, N> ptrs;
      for (size_t k = 0; k < N; ++k) {
        int64_t off = start * strides[k][ndim - 1];
        for (int d = 0; d < ndim - 1; ++d) off += idx[d] * strides[k][d];
        ptrs[k] = static_cast<char*>(args[k].data) + off * elem[k];
      }
      inner(ptrs, inner_stride, std::min(piece, inner_n - start));
      if (++p < pieces) continue;
      p = 0;
      for (int d = ndim - 2; d >= 0; --d) {  // increment the multi-index
        if (++idx[d] < sizes[d]) break;
        idx[d] = 0;
      }
    }
  });
}

}  // namespace octo::kernels::cpu
