// CUDA max and average pooling (NCHW, any strides), forward and backward, float32 and float64.
//
// The window math is kernels/pool_math.h, shared with the CPU backend (Note [Pooling kernels]),
// so results equal the CPU's bit for bit. Forward: one thread per output element (grid-stride).
// Backward: one thread per input element gathers from the outputs whose windows can contain it
// (PyTorch's formulation), in the order the CPU adds them; no atomics, so results do not depend on
// scheduling, and every grad_input element is written (max backward needs no separate zeroing).
// bfloat16 and float16 run the float32 kernels on staged copies (Note [16-bit kernels]); other
// dtypes throw NotImplementedError (Note [One dtype dispatch]).
#include <cuda_runtime_api.h>

#include "core/error.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/loops.h"
#include "kernels/cuda/stream.h"
#include "kernels/float32_staging.h"
#include "kernels/pool_math.h"

namespace octo::kernels {

namespace {

using cuda_loops::blocks_for;
using cuda_loops::kThreads;
using pool::plane;

/// The (n, c, h, w) of the linear-th element of a row-major [N, C, H, W] index space.
struct Nchw {
  int64_t n, c, h, w;
};

__device__ inline Nchw unravel(int64_t linear, int64_t C, int64_t H, int64_t W) {
  Nchw e;
  e.w = linear % W;
  linear /= W;
  e.h = linear % H;
  linear /= H;
  e.c = linear % C;
  e.n = linear / C;
  return e;
}

template <typename T>
__global__ void max_forward_kernel(TensorArg out, TensorArg indices, TensorArg input,
                                   Pool2dParams p, int64_t n) {
  const int64_t C = out.sizes[1], OH = out.sizes[2], OW = out.sizes[3];
  const int64_t H = input.sizes[2], W = input.sizes[3];
  OCTO_CUDA_KERNEL_LOOP(i, n) {
    const Nchw e = unravel(i, C, OH, OW);
    const pool::MaxResult<T> m = pool::max_at(plane<const T>(input, e.n, e.c), e.h, e.w, H, W, p);
    plane<T>(out, e.n, e.c).at(e.h, e.w) = m.value;
    plane<int64_t>(indices, e.n, e.c).at(e.h, e.w) = m.index;
  }
}

template <typename T>
__global__ void max_backward_kernel(TensorArg grad_input, TensorArg grad_out, TensorArg indices,
                                    Pool2dParams p, int64_t n) {
  const int64_t C = grad_input.sizes[1], H = grad_input.sizes[2], W = grad_input.sizes[3];
  const int64_t OH = grad_out.sizes[2], OW = grad_out.sizes[3];
  OCTO_CUDA_KERNEL_LOOP(i, n) {
    const Nchw e = unravel(i, C, H, W);
    plane<T>(grad_input, e.n, e.c).at(e.h, e.w) =
        pool::max_grad_at(plane<const T>(grad_out, e.n, e.c),
                          plane<const int64_t>(indices, e.n, e.c), e.h, e.w, W, OH, OW, p);
  }
}

template <typename T>
__global__ void avg_forward_kernel(TensorArg out, TensorArg input, Pool2dParams p, int64_t n) {
  const int64_t C = out.sizes[1], OH = out.sizes[2], OW = out.sizes[3];
  const int64_t H = input.sizes[2], W = input.sizes[3];
  OCTO_CUDA_KERNEL_LOOP(i, n) {
    const Nchw e = unravel(i, C, OH, OW);
    plane<T>(out, e.n, e.c).at(e.h, e.w) =
        pool::avg_at(plane<const T>(input, e.n, e.c), e.h, e.w, H, W, p);
  }
}

template <typename T>
__global__ void avg_backward_kernel(TensorArg grad_input, TensorArg grad_out, Pool2dParams p,
                                    int64_t n) {
  const int64_t C = grad_input.sizes[1], H = grad_input.sizes[2], W = grad_input.sizes[3];
  const int64_t OH = grad_out.sizes[2], OW = grad_out.sizes[3];
  OCTO_CUDA_KERNEL_LOOP(i, n) {
    const Nchw e = unravel(i, C, H, W);
    plane<T>(grad_input, e.n, e.c).at(e.h, e.w) =
        pool::avg_grad_at(plane<const T>(grad_out, e.n, e.c), e.h, e.w, H, W, OH, OW, p);
  }
}

/// Both are 4-d with the same batch and channels (the caller validated the shapes).
void check_4d(const TensorArg& a, const TensorArg& b, const char* op) {
  OCTO_INTERNAL_ASSERT(a.ndim == 4 && b.ndim == 4, op);
  OCTO_INTERNAL_ASSERT(a.sizes[0] == b.sizes[0] && a.sizes[1] == b.sizes[1], op);
}

}  // namespace

void CudaBackend::max_pool2d_forward(const TensorArg& out, const TensorArg& indices,
                                     const TensorArg& input, const Pool2dParams& p) {
  if (staged_max_pool2d_forward(*this, out, indices, input, p)) return;  // Note [16-bit kernels]
  check_4d(out, input, "max_pool2d_forward");
  check_4d(indices, out, "max_pool2d_forward");
  OCTO_INTERNAL_ASSERT(indices.dtype == kInt64 && out.dtype == input.dtype);
  dispatch_dtypes<Float32And64>(
      input.dtype, "max_pool2d_forward",
      [&](auto tag) {
        using T = decltype(tag);
        const int64_t n = out.numel();
        if (n == 0) return;
        cuda::detail::CudaDeviceScope scope(out.device.index());
        auto stream = cuda::current_stream(out.device.index()).handle();
        max_forward_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(out, indices, input, p, n);
        OCTO_CUDA_CHECK_LAUNCH("max_pool2d_forward");
      },
      DTypeError::NotImplemented);
}

void CudaBackend::max_pool2d_backward(const TensorArg& grad_input, const TensorArg& grad_out,
                                      const TensorArg& indices, const Pool2dParams& p) {
  if (staged_max_pool2d_backward(*this, grad_input, grad_out, indices, p))
    return;  // Note [16-bit kernels]
  check_4d(grad_input, grad_out, "max_pool2d_backward");
  check_4d(indices, grad_out, "max_pool2d_backward");
  OCTO_INTERNAL_ASSERT(indices.dtype == kInt64 && grad_out.dtype == grad_input.dtype);
  dispatch_dtypes<Float32And64>(
      grad_input.dtype, "max_pool2d_backward",
      [&](auto tag) {
        using T = decltype(tag);
        const int64_t n = grad_input.numel();
        if (n == 0) return;
        cuda::detail::CudaDeviceScope scope(grad_input.device.index());
        auto stream = cuda::current_stream(grad_input.device.index()).handle();
        max_backward_kernel<T>
            <<<blocks_for(n), kThreads, 0, stream>>>(grad_input, grad_out, indices, p, n);
        OCTO_CUDA_CHECK_LAUNCH("max_pool2d_backward");
      },
      DTypeError::NotImplemented);
}

void CudaBackend::avg_pool2d_forward(const TensorArg& out, const TensorArg& input,
                                     const Pool2dParams& p) {
  if (staged_avg_pool2d_forward(*this, out, input, p)) return;  // Note [16-bit kernels]
  check_4d(out, input, "avg_pool2d_forward");
  OCTO_INTERNAL_ASSERT(out.dtype == input.dtype);
  dispatch_dtypes<Float32And64>(
      input.dtype, "avg_pool2d_forward",
      [&](auto tag) {
        using T = decltype(tag);
        const int64_t n = out.numel();
        if (n == 0) return;
        cuda::detail::CudaDeviceScope scope(out.device.index());
        auto stream = cuda::current_stream(out.device.index()).handle();
        avg_forward_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(out, input, p, n);
        OCTO_CUDA_CHECK_LAUNCH("avg_pool2d_forward");
      },
      DTypeError::NotImplemented);
}

void CudaBackend::avg_pool2d_backward(const TensorArg& grad_input, const TensorArg& grad_out,
                                      const Pool2dParams& p) {
  if (staged_avg_pool2d_backward(*this, grad_input, grad_out, p)) return;  // Note [16-bit kernels]
  check_4d(grad_input, grad_out, "avg_pool2d_backward");
  OCTO_INTERNAL_ASSERT(grad_out.dtype == grad_input.dtype);
  dispatch_dtypes<Float32And64>(
      grad_input.dtype, "avg_pool2d_backward",
      [&](auto tag) {
        using T = decltype(tag);
        const int64_t n = grad_input.numel();
        if (n == 0) return;
        cuda::detail::CudaDeviceScope scope(grad_input.device.index());
        auto stream = cuda::current_stream(grad_input.device.index()).handle();
        avg_backward_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(grad_input, grad_out, p, n);
        OCTO_CUDA_CHECK_LAUNCH("avg_pool2d_backward");
      },
      DTypeError::NotImplemented);
}

}  // namespace octo::kernels
