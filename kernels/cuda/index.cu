// CUDA indexing: index_select, index_add, gather, scatter_add, over the layout helpers of
// kernels/index_math.h that kernels/cpu/index.cpp uses too. Indices are bounds-checked on the
// device before the main kernel: a small kernel flags an out-of-range index, the flag is copied
// back (one stream synchronisation) and the op throws the CPU backend's IndexError (naming *an*
// offending index, not necessarily the first). gather/index_select move raw words (any dtype);
// the adds use atomicAdd (float32, float64, int64; bfloat16 and float16 by compare-and-swap of the
// 32-bit word, each add rounded once), so float sums are not bit-reproducible across runs.
#include <cuda_runtime_api.h>

#include <array>

#include "core/allocator.h"
#include "core/error.h"
#include "kernels/cuda/caching_allocator.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/loops.h"
#include "kernels/cuda/stream.h"
#include "kernels/index_math.h"

namespace octo::kernels {

namespace {

using cuda_loops::blocks_for;
using cuda_loops::kThreads;
using index::along;
using index::broadcast_index;

__global__ void check_kernel(TensorArg index, int64_t n, int64_t size, unsigned long long* flag) {
  const int64_t* p = index.data_as<const int64_t>();
  OCTO_CUDA_KERNEL_LOOP(i, n) {
    const int64_t v = p[index.offset_of(i)];
    if (v < 0 || v >= size) {
      flag[0] = 1;
      flag[1] = static_cast<unsigned long long>(v);
    }
  }
}

/// Throws IndexError if some index is outside [0, size); synchronises the stream.
void check_indices(const TensorArg& index, int64_t size, int dim, const char* op,
                   cudaStream_t stream) {
  OCTO_INTERNAL_ASSERT(index.dtype == kInt64);
  const int64_t n = index.numel();
  if (n == 0) return;
  DataPtr buf = cuda::caching_allocator(index.device.index())->allocate(16);
  auto* flag = static_cast<unsigned long long*>(buf.get());
  OCTO_CUDA_CHECK(cudaMemsetAsync(flag, 0, 16, stream));
  check_kernel<<<blocks_for(n), kThreads, 0, stream>>>(index, n, size, flag);
  OCTO_CUDA_CHECK_LAUNCH("check_indices");
  unsigned long long host[2] = {0, 0};
  OCTO_CUDA_CHECK(cudaMemcpyAsync(host, flag, 16, cudaMemcpyDeviceToHost, stream));
  OCTO_CUDA_CHECK(cudaStreamSynchronize(stream));
  const int64_t v = static_cast<int64_t>(host[1]);
  index::check_index(host[0] == 0, v, size, dim, op);
}

/// out[p] = src[p] + index[p] * step (elements), p over out's shape.
template <typename W>
__global__ void gather_kernel(TensorArg out, TensorArg index, TensorArg src, int64_t step,
                              int64_t n) {
  W* o = out.data_as<W>();
  const int64_t* idx = index.data_as<const int64_t>();
  const W* s = src.data_as<const W>();
  OCTO_CUDA_KERNEL_LOOP(i, n) {
    o[out.offset_of(i)] = s[src.offset_of(i) + idx[index.offset_of(i)] * step];
  }
}

__device__ inline void atomic_add(float* p, float v) { atomicAdd(p, v); }
__device__ inline void atomic_add(double* p, double v) { atomicAdd(p, v); }
__device__ inline void atomic_add(int64_t* p, int64_t v) {
  atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
}

/// A 16-bit atomic add (T = BFloat16 or Float16): compare-and-swap on the aligned 32-bit word
/// that holds the element; the sum is computed in float and rounded once, as the CPU's add_into.
template <typename T>
__device__ inline void atomic_add_16(T* p, T v) {
  const auto addr = reinterpret_cast<uintptr_t>(p);
  auto* word = reinterpret_cast<unsigned int*>(addr & ~uintptr_t(3));
  const unsigned shift = (addr & 2) ? 16u : 0u;
  unsigned int old = *word, assumed = 0;
  do {
    assumed = old;
    T cur;
    cur.bits = static_cast<uint16_t>(assumed >> shift);
    const T sum(static_cast<float>(cur) + static_cast<float>(v));
    const unsigned int next = (assumed & ~(0xffffu << shift)) | (unsigned(sum.bits) << shift);
    old = atomicCAS(word, assumed, next);
  } while (assumed != old);
}
__device__ inline void atomic_add(BFloat16* p, BFloat16 v) { atomic_add_16(p, v); }
__device__ inline void atomic_add(Float16* p, Float16 v) { atomic_add_16(p, v); }

/// dst[p] + index[p] * step += src[p], p over index's shape.
template <typename T>
__global__ void scatter_add_kernel(TensorArg dst, TensorArg index, TensorArg src, int64_t step,
                                   int64_t n) {
  T* o = dst.data_as<T>();
  const int64_t* idx = index.data_as<const int64_t>();
  const T* s = src.data_as<const T>();
  OCTO_CUDA_KERNEL_LOOP(i, n) {
    atomic_add(o + dst.offset_of(i) + idx[index.offset_of(i)] * step, s[src.offset_of(i)]);
  }
}

void launch_gather(const TensorArg& out, const TensorArg& in, int dim, const TensorArg& index,
                   cudaStream_t stream) {
  OCTO_INTERNAL_ASSERT(out.dtype == in.dtype && index.dtype == kInt64);
  const TensorArg src = along(in, out, dim);
  const int64_t step = in.strides[dim], n = out.numel();
  const unsigned b = blocks_for(n);
  switch (itemsize(out.dtype)) {
    case 1:
      gather_kernel<uint8_t><<<b, kThreads, 0, stream>>>(out, index, src, step, n);
      break;
    case 2:
      gather_kernel<uint16_t><<<b, kThreads, 0, stream>>>(out, index, src, step, n);
      break;
    case 4:
      gather_kernel<uint32_t><<<b, kThreads, 0, stream>>>(out, index, src, step, n);
      break;
    default:
      gather_kernel<uint64_t><<<b, kThreads, 0, stream>>>(out, index, src, step, n);
      break;
  }
  OCTO_CUDA_CHECK_LAUNCH("gather");
}

/// index has the iteration shape; src is read with its own strides over that shape.
void launch_scatter_add(const TensorArg& out, int dim, const TensorArg& index, const TensorArg& src,
                        const char* op, cudaStream_t stream) {
  OCTO_INTERNAL_ASSERT(out.dtype == src.dtype && index.dtype == kInt64);
  const TensorArg dst = along(out, index, dim);
  TensorArg from = src;
  for (int d = 0; d < index.ndim; ++d) from.sizes[d] = index.sizes[d];
  const int64_t step = out.strides[dim], n = index.numel();
  const unsigned b = blocks_for(n);
  switch (out.dtype) {
    case kFloat32:
      scatter_add_kernel<float><<<b, kThreads, 0, stream>>>(dst, index, from, step, n);
      break;
    case kFloat64:
      scatter_add_kernel<double><<<b, kThreads, 0, stream>>>(dst, index, from, step, n);
      break;
    case kInt64:
      scatter_add_kernel<int64_t><<<b, kThreads, 0, stream>>>(dst, index, from, step, n);
      break;
    case kBFloat16:
      scatter_add_kernel<BFloat16><<<b, kThreads, 0, stream>>>(dst, index, from, step, n);
      break;
    case kFloat16:
      scatter_add_kernel<Float16><<<b, kThreads, 0, stream>>>(dst, index, from, step, n);
      break;
    default:
      OCTO_THROW(NotImplementedError, "cuda backend: ", op, " is not implemented for dtype ",
                 out.dtype, " yet (float32, float64, bfloat16, float16, int64 are)");
  }
  OCTO_CUDA_CHECK_LAUNCH("scatter_add");
}

}  // namespace

void CudaBackend::index_select(const TensorArg& out, const TensorArg& in, int dim,
                               const TensorArg& index) {
  OCTO_INTERNAL_ASSERT(index.ndim <= 1 && out.ndim == in.ndim && dim >= 0 && dim < in.ndim);
  OCTO_INTERNAL_ASSERT(out.sizes[dim] == index.numel());
  cuda::detail::CudaDeviceScope scope(out.device.index());
  cudaStream_t s = cuda::current_stream(out.device.index()).handle();
  check_indices(index, in.sizes[dim], dim, "index_select", s);
  if (out.numel() == 0) return;
  launch_gather(out, in, dim, broadcast_index(index, out, dim), s);
}

void CudaBackend::index_add(const TensorArg& out, int dim, const TensorArg& index,
                            const TensorArg& src) {
  OCTO_INTERNAL_ASSERT(index.ndim <= 1 && out.ndim == src.ndim && dim >= 0 && dim < out.ndim);
  OCTO_INTERNAL_ASSERT(src.sizes[dim] == index.numel());
  cuda::detail::CudaDeviceScope scope(out.device.index());
  cudaStream_t s = cuda::current_stream(out.device.index()).handle();
  check_indices(index, out.sizes[dim], dim, "index_add", s);
  if (src.numel() == 0) return;
  launch_scatter_add(out, dim, broadcast_index(index, src, dim), src, "index_add", s);
}

void CudaBackend::gather(const TensorArg& out, const TensorArg& in, int dim,
                         const TensorArg& index) {
  OCTO_INTERNAL_ASSERT(index.ndim == in.ndim && out.ndim == in.ndim && dim >= 0 && dim < in.ndim);
  cuda::detail::CudaDeviceScope scope(out.device.index());
  cudaStream_t s = cuda::current_stream(out.device.index()).handle();
  check_indices(index, in.sizes[dim], dim, "gather", s);
  if (out.numel() == 0) return;
  launch_gather(out, in, dim, index, s);
}

void CudaBackend::scatter_add(const TensorArg& out, int dim, const TensorArg& index,
                              const TensorArg& src) {
  OCTO_INTERNAL_ASSERT(index.ndim == out.ndim && src.ndim == out.ndim && dim >= 0 &&
                       dim < out.ndim);
  cuda::detail::CudaDeviceScope scope(out.device.index());
  cudaStream_t s = cuda::current_stream(out.device.index()).handle();
  check_indices(index, out.sizes[dim], dim, "scatter_add", s);
  if (index.numel() == 0) return;
  launch_scatter_add(out, dim, index, src, "scatter_add", s);
}

}  // namespace octo::kernels
