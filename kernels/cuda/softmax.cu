// CUDA softmax / log_softmax forward and backward along one dim: one thread block per row.
//
// Same math as kernels/cpu/softmax.cpp: the row max (NaN poisons the row; an all -inf row is
// shifted by 0 so it comes out NaN), exp(x - max) summed in double, and for the backward
// sum(g) (log) or sum(g * y) in double. Rows are every index of the other dims; a row's elements
// are strided by the tensor's stride along dim. float32 and float64; bfloat16 and float16 run the
// float32 kernel on staged copies (Note [16-bit kernels]).
#include <cuda_runtime_api.h>

#include <cmath>
#include <limits>

#include "core/error.h"
#include "kernels/cuda/block_reduce.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/stream.h"
#include "kernels/float32_staging.h"

namespace octo::kernels {

namespace {

constexpr int kRowThreads = 256;  // threads per block (a power of two, for cuda_block::reduce)
constexpr int64_t kMaxRowBlocks = 65536;

/// rows: a view of the arg with size 1 along dim, giving each row's first element.
template <typename T>
__global__ void softmax_kernel(TensorArg out, TensorArg in, int64_t rows, int64_t n, int64_t ys,
                               int64_t xs, bool log) {
  __shared__ double shd[kRowThreads];
  __shared__ T sht[kRowThreads];
  constexpr T kInf = std::numeric_limits<T>::infinity();
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    T* y = out.data_as<T>() + out.offset_of(r);
    const T* x = in.data_as<const T>() + in.offset_of(r);
    T m = -kInf;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      const T v = x[i * xs];
      m = fn::Maximum<T>{}(m, v);  // NaN-propagating
    }
    m = cuda_block::max(m, sht);
    if (m == -kInf) m = 0;
    double s = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      const T e = exp(x[i * xs] - m);
      s += e;
      if (!log) y[i * ys] = e;
    }
    s = cuda_block::sum(s, shd);
    if (log) {
      const double ls = static_cast<double>(m) + ::log(s);
      for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
        y[i * ys] = static_cast<T>(x[i * xs] - ls);
    } else {
      const double inv = 1.0 / s;
      for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
        y[i * ys] = static_cast<T>(y[i * ys] * inv);
    }
  }
}

template <typename T>
__global__ void softmax_backward_kernel(TensorArg grad_in, TensorArg grad_out, TensorArg out,
                                        int64_t rows, int64_t n, int64_t is, int64_t gs, int64_t ys,
                                        bool log) {
  __shared__ double shd[kRowThreads];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    T* gi = grad_in.data_as<T>() + grad_in.offset_of(r);
    const T* g = grad_out.data_as<const T>() + grad_out.offset_of(r);
    const T* y = out.data_as<const T>() + out.offset_of(r);
    double s = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      s += log ? static_cast<double>(g[i * gs])
               : static_cast<double>(g[i * gs]) * static_cast<double>(y[i * ys]);
    }
    s = cuda_block::sum(s, shd);
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      gi[i * is] = log ? static_cast<T>(g[i * gs] - exp(y[i * ys]) * s)
                       : static_cast<T>(y[i * ys] * (g[i * gs] - s));
    }
  }
}

/// t with size 1 along dim (its row view); returns the stride along dim.
int64_t row_view(TensorArg& t, int dim) {
  const int64_t step = t.strides[dim];
  t.sizes[dim] = 1;
  return step;
}

unsigned row_blocks(int64_t rows) {
  return static_cast<unsigned>(std::min<int64_t>(rows, kMaxRowBlocks));
}

}  // namespace

void CudaBackend::softmax(const TensorArg& out, const TensorArg& in, int dim, bool log) {
  if (staged_softmax(*this, out, in, dim, log)) return;  // Note [16-bit kernels]
  OCTO_INTERNAL_ASSERT(out.ndim == in.ndim && dim >= 0 && dim < in.ndim && out.dtype == in.dtype);
  const int64_t n = in.sizes[dim], total = in.numel();
  if (total == 0) return;
  const int64_t rows = total / n;
  TensorArg o = out, x = in;
  const int64_t ys = row_view(o, dim), xs = row_view(x, dim);
  cuda::detail::CudaDeviceScope scope(out.device.index());
  cudaStream_t s = cuda::current_stream(out.device.index()).handle();
  OCTO_DISPATCH_FLOATING(in.dtype, log ? "log_softmax" : "softmax", [&] {
    softmax_kernel<scalar_t><<<row_blocks(rows), kRowThreads, 0, s>>>(o, x, rows, n, ys, xs, log);
  });
  OCTO_CUDA_CHECK_LAUNCH("softmax");
}

void CudaBackend::softmax_backward(const TensorArg& grad_in, const TensorArg& grad_out,
                                   const TensorArg& out, int dim, bool log) {
  if (staged_softmax_backward(*this, grad_in, grad_out, out, dim, log))
    return;  // Note [16-bit kernels]
  OCTO_INTERNAL_ASSERT(grad_in.ndim == out.ndim && grad_out.ndim == out.ndim && dim >= 0 &&
                       dim < out.ndim);
  const int64_t n = out.sizes[dim], total = out.numel();
  if (total == 0) return;
  const int64_t rows = total / n;
  TensorArg gi = grad_in, g = grad_out, y = out;
  const int64_t is = row_view(gi, dim), gs = row_view(g, dim), ys = row_view(y, dim);
  cuda::detail::CudaDeviceScope scope(out.device.index());
  cudaStream_t s = cuda::current_stream(out.device.index()).handle();
  OCTO_DISPATCH_FLOATING(out.dtype, log ? "log_softmax_backward" : "softmax_backward", [&] {
    softmax_backward_kernel<scalar_t>
        <<<row_blocks(rows), kRowThreads, 0, s>>>(gi, g, y, rows, n, is, gs, ys, log);
  });
  OCTO_CUDA_CHECK_LAUNCH("softmax_backward");
}

}  // namespace octo::kernels
