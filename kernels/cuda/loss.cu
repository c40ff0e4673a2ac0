// Fused cross-entropy on the GPU: one thread block per row of logits [N, C].
//
// Same math as kernels/cpu/loss.cpp, from kernels/loss_math.h (Note [Fused cross-entropy]): the
// block reduces the row max (NaN-propagating), the exp sum and the smoothing sum in double, and
// thread 0 writes the row's loss and logsumexp. Blocks have 32..256 threads (a power of two, the
// smallest covering C) and stride over the rows. Targets are checked on the device: a row whose
// target is outside [0, C) and not ignore_index sets a flag and reads nothing; the forward copies
// the flag back (one stream synchronisation) and throws the CPU backend's IndexError, naming *an*
// offending target (not necessarily the first). The backward trusts the targets the forward
// checked and writes NaN for a row with a bad one instead of reading out of bounds. bfloat16 and
// float16 logits run the float32 kernels on staged copies (Note [16-bit kernels]).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <limits>

#include "core/allocator.h"
#include "core/error.h"
#include "kernels/cuda/block_reduce.h"
#include "kernels/cuda/caching_allocator.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/stream.h"
#include "kernels/float32_staging.h"
#include "kernels/loss_math.h"

namespace octo::kernels {

namespace {

constexpr int kMaxThreads = 256;  // threads per block at most; block sizes are powers of two
constexpr int64_t kMaxRowBlocks = 65536;

/// Every branch below depends only on the row (its target) or on kernel arguments, so all threads
/// of a block take it together and reach the same __syncthreads.
template <typename T>
__global__ void cross_entropy_forward_kernel(TensorArg loss, TensorArg lse, TensorArg logits,
                                             TensorArg target, TensorArg weight,
                                             int64_t ignore_index, double e,
                                             unsigned long long* flag) {
  __shared__ double shd[kMaxThreads];
  __shared__ T sht[kMaxThreads];
  const int64_t n = logits.sizes[0], classes = logits.sizes[1];
  const int64_t rs = logits.strides[0], cs = logits.strides[1];
  const T* w = weight.data_as<const T>();
  const int64_t ws = w == nullptr ? 0 : weight.strides[0];
  const int64_t* t = target.data_as<const int64_t>();
  T* out = loss.data_as<T>();
  T* out_lse = lse.data_as<T>();
  for (int64_t r = blockIdx.x; r < n; r += gridDim.x) {
    const int64_t y = t[r * target.strides[0]];
    const bool ignored = y == ignore_index;
    if (!ignored && !ce::target_in_range(y, classes)) {
      if (threadIdx.x == 0) {
        flag[0] = 1;
        flag[1] = static_cast<unsigned long long>(y);
        out[r * loss.strides[0]] = std::numeric_limits<T>::quiet_NaN();
        out_lse[r * lse.strides[0]] = std::numeric_limits<T>::quiet_NaN();
      }
      continue;
    }
    const T* x = logits.data_as<const T>() + r * rs;
    T m = -std::numeric_limits<T>::infinity();
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) m = ce::max_step(m, x[c * cs]);
    const T shift = ce::exp_shift(cuda_block::max(m, sht));
    double s = 0;
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) s += ce::exp_term(x[c * cs], shift);
    const double l = ce::logsumexp(static_cast<double>(shift), cuda_block::sum(s, shd));
    double smooth = 0;
    if (!ignored && e > 0) {
      for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
        smooth += ce::smooth_term(x[c * cs], l, ce::weight_at(w, ws, c));
      smooth = cuda_block::sum(smooth, shd);
    }
    if (threadIdx.x == 0) {
      out_lse[r * lse.strides[0]] = static_cast<T>(l);
      double value = 0;
      if (!ignored) {
        value = ce::row_loss(static_cast<double>(x[y * cs]) - l, ce::weight_at(w, ws, y), smooth, e,
                             classes);
      }
      out[r * loss.strides[0]] = static_cast<T>(value);
    }
  }
}

template <typename T>
__global__ void cross_entropy_backward_kernel(TensorArg grad_logits, TensorArg grad_loss,
                                              TensorArg logits, TensorArg lse, TensorArg target,
                                              TensorArg weight, int64_t ignore_index, double e) {
  __shared__ double shd[kMaxThreads];
  const int64_t n = logits.sizes[0], classes = logits.sizes[1];
  const int64_t rs = logits.strides[0], cs = logits.strides[1];
  const int64_t grs = grad_logits.strides[0], gcs = grad_logits.strides[1];
  const T* w = weight.data_as<const T>();
  const int64_t ws = w == nullptr ? 0 : weight.strides[0];
  const int64_t* t = target.data_as<const int64_t>();
  for (int64_t r = blockIdx.x; r < n; r += gridDim.x) {
    T* gi = grad_logits.data_as<T>() + r * grs;
    const int64_t y = t[r * target.strides[0]];
    if (y == ignore_index || !ce::target_in_range(y, classes)) {
      const T fill = y == ignore_index ? T(0) : std::numeric_limits<T>::quiet_NaN();
      for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) gi[c * gcs] = fill;
      continue;
    }
    const T* x = logits.data_as<const T>() + r * rs;
    double w_sum = static_cast<double>(classes);
    if (w != nullptr && e > 0) {
      double part = 0;
      for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) part += ce::weight_at(w, ws, c);
      w_sum = cuda_block::sum(part, shd);
    }
    const T row_lse = lse.data_as<const T>()[r * lse.strides[0]];
    const double g = static_cast<double>(grad_loss.data_as<const T>()[r * grad_loss.strides[0]]);
    const double w_y = ce::weight_at(w, ws, y);
    const double s = ce::coef_sum(w_y, w_sum, e, classes);
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) {
      gi[c * gcs] = ce::grad_element(x[c * cs], row_lse, c == y, ce::weight_at(w, ws, c), w_y, s, g,
                                     e, classes);
    }
  }
}

/// The smallest power of two >= classes, within [32, kMaxThreads].
unsigned row_threads(int64_t classes) {
  unsigned threads = 32;
  while (threads < static_cast<unsigned>(kMaxThreads) && static_cast<int64_t>(threads) < classes)
    threads *= 2;
  return threads;
}

unsigned row_blocks(int64_t rows) {
  return static_cast<unsigned>(std::min<int64_t>(rows, kMaxRowBlocks));
}

}  // namespace

void CudaBackend::cross_entropy_forward(const TensorArg& loss, const TensorArg& lse,
                                        const TensorArg& logits, const TensorArg& target,
                                        const TensorArg& weight, const CrossEntropyParams& p) {
  if (staged_cross_entropy_forward(*this, loss, lse, logits, target, weight, p))
    return;  // Note [16-bit kernels]
  ce::check_forward_args(loss, lse, logits, target, weight);
  const int64_t n = logits.sizes[0], classes = logits.sizes[1];
  if (n == 0) return;
  const int dev = logits.device.index();
  cuda::detail::CudaDeviceScope scope(dev);
  cudaStream_t s = cuda::current_stream(dev).handle();
  DataPtr buf = cuda::caching_allocator(dev)->allocate(16);
  auto* flag = static_cast<unsigned long long*>(buf.get());
  OCTO_CUDA_CHECK(cudaMemsetAsync(flag, 0, 16, s));
  OCTO_DISPATCH_FLOATING(logits.dtype, "cross_entropy_forward", [&] {
    cross_entropy_forward_kernel<scalar_t><<<row_blocks(n), row_threads(classes), 0, s>>>(
        loss, lse, logits, target, weight, p.ignore_index, p.label_smoothing, flag);
  });
  OCTO_CUDA_CHECK_LAUNCH("cross_entropy_forward");
  unsigned long long host[2] = {0, 0};
  OCTO_CUDA_CHECK(cudaMemcpyAsync(host, flag, 16, cudaMemcpyDeviceToHost, s));
  OCTO_CUDA_CHECK(cudaStreamSynchronize(s));
  const int64_t bad = static_cast<int64_t>(host[1]);
  OCTO_CHECK_INDEX(host[0] == 0, "cross_entropy: target ", bad, " is out of bounds for ", classes,
                   " classes (expected a value in [0, ", classes - 1,
                   "] or ignore_index = ", p.ignore_index, ")");
}

void CudaBackend::cross_entropy_backward(const TensorArg& grad_logits, const TensorArg& grad_loss,
                                         const TensorArg& logits, const TensorArg& lse,
                                         const TensorArg& target, const TensorArg& weight,
                                         const CrossEntropyParams& p) {
  if (staged_cross_entropy_backward(*this, grad_logits, grad_loss, logits, lse, target, weight, p))
    return;  // Note [16-bit kernels]
  ce::check_backward_args(grad_logits, grad_loss, logits, lse, target, weight);
  const int64_t n = logits.sizes[0], classes = logits.sizes[1];
  if (n == 0 || classes == 0) return;
  const int dev = logits.device.index();
  cuda::detail::CudaDeviceScope scope(dev);
  cudaStream_t s = cuda::current_stream(dev).handle();
  OCTO_DISPATCH_FLOATING(logits.dtype, "cross_entropy_backward", [&] {
    cross_entropy_backward_kernel<scalar_t><<<row_blocks(n), row_threads(classes), 0, s>>>(
        grad_logits, grad_loss, logits, lse, target, weight, p.ignore_index, p.label_smoothing);
  });
  OCTO_CUDA_CHECK_LAUNCH("cross_entropy_backward");
}

}  // namespace octo::kernels
