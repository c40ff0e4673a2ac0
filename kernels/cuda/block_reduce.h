// Block-wide reductions for CUDA kernels that give one thread block to one row (softmax,
// cross-entropy): every thread passes its partial value and every thread gets the block's result.
#pragma once

#include "kernels/functors.h"

namespace octo::kernels::cuda_block {

#if defined(__CUDACC__)
/// Tree reduction of v over the block with combine(a, b); blockDim.x must be a power of two and
/// `sh` hold blockDim.x values in shared memory. Every thread of the block must call it.
template <typename T, typename Combine>
__device__ T reduce(T v, T* sh, Combine combine) {
  sh[threadIdx.x] = v;
  __syncthreads();
  for (unsigned w = blockDim.x / 2; w > 0; w >>= 1) {
    if (threadIdx.x < w) sh[threadIdx.x] = combine(sh[threadIdx.x], sh[threadIdx.x + w]);
    __syncthreads();
  }
  const T r = sh[0];
  __syncthreads();  // sh may be reused right after
  return r;
}

/// The block's sum (softmax and cross-entropy accumulate in double).
__device__ inline double sum(double v, double* sh) { return reduce(v, sh, fn::Add<double>{}); }

/// The block's max; a NaN anywhere wins, as torch.max (fn::Maximum of the op table).
template <typename T>
__device__ T max(T v, T* sh) {
  return reduce(v, sh, fn::Maximum<T>{});
}
#endif

}  // namespace octo::kernels::cuda_block
