// Batch norm forward (training and eval) and backward through cuDNN's spatial batch normalization.
//
// float32 and float64 go to cuDNN as they are; a 16-bit input (with float32 or 16-bit parameters)
// runs the float32 path on staged copies (Note [16-bit kernels]), as on the CPU.
//
// An input [N, C, *] is handed to cuDNN as the packed 4-d tensor [N, C, S, 1], S the product of the
// dims after C (1 for a 2-d input), with CUDNN_BATCHNORM_SPATIAL: one mean and variance per
// channel over N x S values, exactly the CPU backend's statistics. Arguments that are not packed
// (views, expanded gradients) go through packed scratch copies; a missing weight or bias becomes a
// scratch vector of ones or zeros; gradients nobody asked for land in scratch.
//
// How cuDNN's semantics match kernels/cpu/norm.cpp:
//  - cuDNN normalises with the biased batch variance and returns resultSaveInvVariance =
//    1 / sqrt(var + eps), which is save_invstd;
//  - running = (1 - factor) * running + factor * batch statistic with factor = momentum, and the
//    running variance takes the unbiased variance (count / (count - 1)), as PyTorch's cuDNN path
//    relies on; null running pointers (both undefined) skip the update;
//  - eval mode is cudnnBatchNormalizationForwardInference with the running statistics.
// Limits of cuDNN's spatial kernels, which have no native fallback here and so throw
// NotImplementedError naming the value and the limit: eps >= CUDNN_BN_MIN_EPSILON, at most
// kMaxTrainingBatch samples in training, fewer than 2^31 elements. Eval mode has a lower batch
// limit (kMaxInferenceBatch) but its statistics are constants, so a larger batch runs in chunks.
#include <cudnn.h>

#include <algorithm>
#include <optional>

#include "core/error.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cudnn_util.h"
#include "kernels/cuda/stream.h"
#include "kernels/float32_staging.h"

namespace octo::kernels {

namespace {

using cuda::detail::cudnn_one;
using cuda::detail::cudnn_zero;
using cuda::detail::packed_input;
using cuda::detail::PackedOutput;
using cuda::detail::scratch_tensor;
using cuda::detail::TensorDescriptor;

/// The epsilon passed to cudnnBatchNormalizationBackward. cuDNN only needs it to recompute the
/// inverse standard deviation when no saved statistics are given; octo always passes
/// save_mean/save_invstd (which already include the forward's eps), so this value is unused and
/// merely has to be valid.
constexpr double kBackwardEps = 1e-5;

int64_t spatial_numel(const TensorArg& t) {
  int64_t n = 1;
  for (int d = 2; d < t.ndim; ++d) n *= t.sizes[d];
  return n;
}

void check_eps(double eps) {
  if (!(eps >= CUDNN_BN_MIN_EPSILON)) {
    OCTO_THROW(NotImplementedError,
               "cuda backend: batch_norm: cuDNN requires eps >= CUDNN_BN_MIN_EPSILON (",
               CUDNN_BN_MIN_EPSILON, "), got eps = ", eps);
  }
}

// The largest batch (N) cuDNN's spatial batch-norm kernels take in training and in inference:
// the limits PyTorch applies before choosing cuDNN (aten/src/ATen/native/Normalization.cpp).
constexpr int64_t kMaxTrainingBatch = 880801;
constexpr int64_t kMaxInferenceBatch = 65535;

void check_training_batch(int64_t n, const char* op) {
  if (n > kMaxTrainingBatch) {
    OCTO_THROW(NotImplementedError, "cuda backend: ", op, ": cuDNN's batch norm takes at most ",
               kMaxTrainingBatch, " samples (input.size(0)) in training, got ", n);
  }
}

/// The descriptors of one batch norm over `n` samples of input: x as [n, C, S, 1] and the
/// per-channel tensors as [1, C, 1, 1] (in the input's dtype, which is what cuDNN asks for
/// float32 and float64 data).
struct Descriptors {
  TensorDescriptor x, param;
  Descriptors(const TensorArg& input, int64_t n, const char* op) {
    const int64_t x_sizes[4] = {n, input.sizes[1], spatial_numel(input), 1};
    const int64_t p_sizes[4] = {1, input.sizes[1], 1, 1};
    x.set_packed(input.dtype, 4, x_sizes, op);
    param.set_packed(input.dtype, 4, p_sizes, op);
  }
};

/// A defined [C] argument as a packed one, or a scratch vector filled with `fallback`.
TensorArg channel_param(const TensorArg& t, const TensorArg& input, double fallback,
                        DataPtr& buffer) {
  if (t.defined()) return packed_input(t, buffer);
  const int64_t c = input.sizes[1];
  return scratch_tensor(input.device, input.dtype, 1, &c, buffer, fallback);
}

void check_layout(const TensorArg& input, const TensorArg& other) {
  OCTO_INTERNAL_ASSERT(input.ndim >= 2 && other.ndim == input.ndim);
  OCTO_INTERNAL_ASSERT(other.dtype == input.dtype);
  for (int d = 0; d < input.ndim; ++d) OCTO_INTERNAL_ASSERT(other.sizes[d] == input.sizes[d]);
}

}  // namespace

void CudaBackend::batch_norm_forward(const TensorArg& out, const TensorArg& save_mean,
                                     const TensorArg& save_invstd, const TensorArg& input,
                                     const TensorArg& weight, const TensorArg& bias,
                                     const TensorArg& running_mean, const TensorArg& running_var,
                                     bool training, double momentum, double eps) {
  if (staged_batch_norm_forward(*this, out, save_mean, save_invstd, input, weight, bias,
                                running_mean, running_var, training, momentum, eps))
    return;  // Note [16-bit kernels]
  const char* op = "batch_norm_forward";
  check_layout(input, out);
  OCTO_INTERNAL_ASSERT(training || (running_mean.defined() && running_var.defined()));
  OCTO_INTERNAL_ASSERT(running_mean.defined() == running_var.defined());
  OCTO_INTERNAL_ASSERT(!training || (save_mean.defined() && save_invstd.defined()));
  cuda::detail::check_cudnn_dtype(input.dtype, op);
  check_eps(eps);
  const int64_t N = input.sizes[0], C = input.sizes[1];
  if (training) check_training_batch(N, op);
  if (C == 0) return;
  const int dev = input.device.index();
  cuda::detail::CudaDeviceScope scope(dev);
  if (input.numel() == 0) {  // no values per channel: as on the CPU, running stats stay as they are
    if (training) {
      cuda_backend().fill(save_mean, Scalar(0.0));
      cuda_backend().fill(save_invstd, Scalar(0.0));
    }
    return;
  }

  DataPtr x_buf, w_buf, b_buf;
  const TensorArg x = packed_input(input, x_buf);
  const TensorArg w = channel_param(weight, input, 1.0, w_buf);
  const TensorArg b = channel_param(bias, input, 0.0, b_buf);
  PackedOutput y(out);
  const DType dt = input.dtype;
  cudnnHandle_t h = cuda::detail::cudnn_handle(dev);
  if (training) {
    const Descriptors desc(input, N, op);
    // The running statistics are read and written: their scratch (if any) starts as a copy.
    std::optional<PackedOutput> rm, rv;
    if (running_mean.defined()) {
      rm.emplace(running_mean, /*keep_contents=*/true);
      rv.emplace(running_var, /*keep_contents=*/true);
    }
    PackedOutput sm(save_mean), si(save_invstd);
    OCTO_CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(
        h, CUDNN_BATCHNORM_SPATIAL, cudnn_one(dt), cudnn_zero(dt), desc.x.get(), x.data,
        desc.x.get(), y.data(), desc.param.get(), w.data, b.data, momentum,
        rm ? rm->data() : nullptr, rv ? rv->data() : nullptr, eps, sm.data(), si.data()));
    if (rm) {
      rm->finish();
      rv->finish();
    }
    sm.finish();
    si.finish();
  } else {
    DataPtr rm_buf, rv_buf;
    const TensorArg rm = packed_input(running_mean, rm_buf);
    const TensorArg rv = packed_input(running_var, rv_buf);
    // The statistics are constants, so a batch over cuDNN's limit runs in chunks of samples.
    const int64_t sample_bytes = C * spatial_numel(input) * static_cast<int64_t>(itemsize(dt));
    for (int64_t n0 = 0; n0 < N; n0 += kMaxInferenceBatch) {
      const Descriptors desc(input, std::min(kMaxInferenceBatch, N - n0), op);
      const char* xs = static_cast<const char*>(x.data) + n0 * sample_bytes;
      char* ys = static_cast<char*>(y.data()) + n0 * sample_bytes;
      OCTO_CUDNN_CHECK(cudnnBatchNormalizationForwardInference(
          h, CUDNN_BATCHNORM_SPATIAL, cudnn_one(dt), cudnn_zero(dt), desc.x.get(), xs, desc.x.get(),
          ys, desc.param.get(), w.data, b.data, rm.data, rv.data, eps));
    }
  }
  y.finish();
}

void CudaBackend::batch_norm_backward(const TensorArg& grad_input, const TensorArg& grad_weight,
                                      const TensorArg& grad_bias, const TensorArg& grad_out,
                                      const TensorArg& input, const TensorArg& weight,
                                      const TensorArg& save_mean, const TensorArg& save_invstd) {
  if (staged_batch_norm_backward(*this, grad_input, grad_weight, grad_bias, grad_out, input, weight,
                                 save_mean, save_invstd))
    return;  // Note [16-bit kernels]
  const char* op = "batch_norm_backward";
  check_layout(input, grad_out);
  const bool want_gi = grad_input.defined() && grad_input.numel() > 0;
  if (want_gi) check_layout(input, grad_input);
  OCTO_INTERNAL_ASSERT(save_mean.defined() && save_invstd.defined());
  cuda::detail::check_cudnn_dtype(input.dtype, op);
  const int64_t N = input.sizes[0], C = input.sizes[1];
  check_training_batch(N, op);
  if (C == 0) return;
  const int dev = input.device.index();
  cuda::detail::CudaDeviceScope scope(dev);
  if (input.numel() == 0) {  // empty sums; grad_input is empty too
    if (grad_weight.defined()) cuda_backend().fill(grad_weight, Scalar(0.0));
    if (grad_bias.defined()) cuda_backend().fill(grad_bias, Scalar(0.0));
    return;
  }

  const Descriptors desc(input, N, op);
  const DType dt = input.dtype;
  DataPtr x_buf, dy_buf, w_buf, mean_buf, invstd_buf, dx_sink, dw_sink, db_sink;
  const TensorArg x = packed_input(input, x_buf);
  const TensorArg dy = packed_input(grad_out, dy_buf);
  const TensorArg w = channel_param(weight, input, 1.0, w_buf);
  const TensorArg mean = packed_input(save_mean, mean_buf);
  const TensorArg invstd = packed_input(save_invstd, invstd_buf);
  // cuDNN writes all three gradients: the ones nobody asked for go to scratch.
  std::optional<PackedOutput> dx, dw, db;
  void* dx_data = nullptr;
  void* dw_data = nullptr;
  void* db_data = nullptr;
  if (want_gi) {
    dx_data = dx.emplace(grad_input).data();
  } else {
    dx_data = scratch_tensor(input.device, dt, input.ndim, input.sizes, dx_sink).data;
  }
  if (grad_weight.defined()) {
    dw_data = dw.emplace(grad_weight).data();
  } else {
    dw_data = scratch_tensor(input.device, dt, 1, &C, dw_sink).data;
  }
  if (grad_bias.defined()) {
    db_data = db.emplace(grad_bias).data();
  } else {
    db_data = scratch_tensor(input.device, dt, 1, &C, db_sink).data;
  }
  OCTO_CUDNN_CHECK(cudnnBatchNormalizationBackward(
      cuda::detail::cudnn_handle(dev), CUDNN_BATCHNORM_SPATIAL, cudnn_one(dt), cudnn_zero(dt),
      cudnn_one(dt), cudnn_zero(dt), desc.x.get(), x.data, desc.x.get(), dy.data, desc.x.get(),
      dx_data, desc.param.get(), w.data, dw_data, db_data, kBackwardEps, mean.data, invstd.data));
  if (dx) dx->finish();
  if (dw) dw->finish();
  if (db) db->finish();
}

}  // namespace octo::kernels
