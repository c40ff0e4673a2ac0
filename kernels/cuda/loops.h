// Helpers for elementwise CUDA kernels over TensorArgs: dimension coalescing, launch geometry and
// strided offsets. Host parts compile anywhere; device parts only under nvcc.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>

#include "core/macros.h"
#include "kernels/tensor_arg.h"

namespace octo::kernels::cuda_loops {

inline constexpr int kThreads = 256;          // threads per block of elementwise kernels
inline constexpr int64_t kMaxBlocks = 65536;  // grid-stride loops cover the rest

/// Blocks for an n-element grid-stride kernel.
inline unsigned blocks_for(int64_t n) {
  return static_cast<unsigned>(std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, kMaxBlocks));
}

/// Rewrites N same-shaped args to the fewest dims that address the same elements in the same
/// order: size-1 dims are dropped and dim d merges into d+1 when every arg has
/// stride[d] == stride[d+1] * size[d+1]. Contiguous tensors become 1-d; a scalar 0-d.
template <size_t N>
void coalesce(std::array<TensorArg, N>& args) {
  const int nd = args[0].ndim;
  int64_t sizes[kMaxDims];
  int64_t strides[N][kMaxDims];
  int out = 0;  // dims collected innermost first
  for (int d = nd - 1; d >= 0; --d) {
    const int64_t s = args[0].sizes[d];
    if (s == 1) continue;
    bool merge = out > 0;
    for (size_t k = 0; k < N && merge; ++k)
      merge = args[k].strides[d] == strides[k][out - 1] * sizes[out - 1];
    if (merge) {
      sizes[out - 1] *= s;
    } else {
      sizes[out] = s;
      for (size_t k = 0; k < N; ++k) strides[k][out] = args[k].strides[d];
      ++out;
    }
  }
  for (size_t k = 0; k < N; ++k) {
    args[k].ndim = out;
    for (int i = 0; i < out; ++i) {
      args[k].sizes[i] = sizes[out - 1 - i];
      args[k].strides[i] = strides[k][out - 1 - i];
    }
  }
}

#if defined(__CUDACC__)
/// Element offset of the linear-th element; 1-d (the common coalesced case) avoids the divisions.
__device__ inline int64_t offset(const TensorArg& t, int64_t linear) {
  if (t.ndim == 1) return linear * t.strides[0];
  return t.offset_of(linear);
}

/// for (i = global thread; i < n; i += grid size)
#define OCTO_CUDA_KERNEL_LOOP(i, n)                                         \
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += int64_t(blockDim.x) * gridDim.x)
#endif

}  // namespace octo::kernels::cuda_loops
