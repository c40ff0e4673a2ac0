// Backend: the primitive set every device type implements (CPU in kernels/cpu, CUDA in
// kernels/cuda).
#pragma once

#include <cstdint>

#include "core/device.h"
#include "core/random.h"
#include "core/scalar.h"
#include "kernels/op_kinds.h"
#include "kernels/tensor_arg.h"

namespace octo::kernels {

struct Conv2dParams {
  int64_t stride[2] = {1, 1};
  int64_t padding[2] = {0, 0};
  int64_t dilation[2] = {1, 1};
  int64_t groups = 1;
};

/// Hyper-parameters of one fused SGD update (PyTorch's torch.optim.SGD rule).
struct SgdParams {
  double lr = 0.0, momentum = 0.0, dampening = 0.0, weight_decay = 0.0;
  bool nesterov = false, maximize = false;
  /// The momentum buffer is new: it is set to d_p instead of decayed (PyTorch's first step).
  bool first_step = false;
};

/// Hyper-parameters of one fused Adam/AdamW update (PyTorch's torch.optim.Adam/AdamW rule).
struct AdamParams {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
  /// The step count including this update (1 on the first).
  double step = 1.0;
  bool amsgrad = false, maximize = false;
  /// AdamW: p *= 1 - lr * weight_decay instead of adding weight_decay * p to the gradient.
  bool decoupled_weight_decay = false;
};

/// Options of the fused cross-entropy (torch.nn.functional.cross_entropy with class indices).
struct CrossEntropyParams {
  int64_t ignore_index = -100;
  double label_smoothing = 0.0;
};

struct Pool2dParams {
  int64_t kernel[2] = {1, 1};
  int64_t stride[2] = {1, 1};
  int64_t padding[2] = {0, 0};
  int64_t dilation[2] = {1, 1};  // max pooling only
  bool ceil_mode = false;
  bool count_include_pad = true;  // average pooling only
};

/// The primitives. Contract for every method:
///  - all TensorArgs are on this backend's device type (the caller checked devices agree);
///  - shapes were validated by the caller (tensor/ and autograd/ ops), so kernels only
///    OCTO_INTERNAL_ASSERT their assumptions;
///  - outputs are allocated by the caller and may be non-contiguous unless noted;
///  - CPU kernels run synchronously; CUDA kernels are queued on the current stream.
/// Composite ops (cat, split, stack, eye, ...) are built from these in tensor/ and autograd/.
class Backend {
 public:
  virtual ~Backend() = default;

  // --- memory ---------------------------------------------------------------------------------
  /// out[...] = value (converted to out.dtype).
  virtual void fill(const TensorArg& out, Scalar value) = 0;
  /// dst = src elementwise, same shape, any strides, converting dtype. For CUDA it also copies
  /// between host and device or between GPUs when the devices differ.
  virtual void copy(const TensorArg& dst, const TensorArg& src) = 0;
  /// copy() that may return before it has finished when it moves data between a GPU and
  /// contiguous pinned host memory of the same dtype (Note [Non-blocking copies] in
  /// kernels/cuda/copy.cpp): the caller must not read the destination of such a download, nor
  /// overwrite the source of such an upload, before synchronising the GPU's current stream.
  /// Every other copy is complete on return. The CPU backend has no such copies: copy().
  virtual void copy_non_blocking(const TensorArg& dst, const TensorArg& src) { copy(dst, src); }

  // --- elementwise (the math is kernels/functors.h, shared by both backends) ------------------
  /// out = op(in); out and in have the same shape and dtype (Clamp etc. take alpha/beta).
  virtual void unary(UnaryOp op, const TensorArg& out, const TensorArg& in, Scalar alpha = {},
                     Scalar beta = {}) = 0;
  /// out = op(a, b); a and b have out's shape (broadcast by stride 0) and the same dtype;
  /// out's dtype is that dtype, or bool for comparisons and logical ops.
  virtual void binary(BinaryOp op, const TensorArg& out, const TensorArg& a, const TensorArg& b,
                      Scalar alpha = {}) = 0;
  /// out = cond ? a : b; cond is bool; all broadcast to out's shape; a, b, out share a dtype.
  virtual void where(const TensorArg& out, const TensorArg& cond, const TensorArg& a,
                     const TensorArg& b) = 0;

  // --- reductions -----------------------------------------------------------------------------
  /// out has in's ndim with size 1 in each reduced dim (keepdim form); every dim where
  /// out.sizes[d] == 1 != in.sizes[d] is reduced. ArgMax/ArgMin write int64. Var takes
  /// alpha = correction. Reducing an empty dim: Sum 0, Prod 1, Mean/Var NaN; Max/Min/Arg* throw.
  virtual void reduce(ReduceOp op, const TensorArg& out, const TensorArg& in,
                      Scalar alpha = {}) = 0;

  // --- linear algebra -------------------------------------------------------------------------
  /// out[b] = alpha * a[b] @ b_[b] + beta * out[b] for 3-d args [B,M,K] x [B,K,N] -> [B,M,N],
  /// any strides (transposes are just strides; batch stride 0 broadcasts). beta == 0 ignores
  /// out's previous contents (NaNs included).
  virtual void bmm(const TensorArg& out, const TensorArg& a, const TensorArg& b, double alpha = 1.0,
                   double beta = 0.0) = 0;

  // --- softmax --------------------------------------------------------------------------------
  /// out = softmax(in, dim) or log_softmax(in, dim).
  virtual void softmax(const TensorArg& out, const TensorArg& in, int dim, bool log) = 0;
  /// grad_in from grad_out and the forward's output.
  virtual void softmax_backward(const TensorArg& grad_in, const TensorArg& grad_out,
                                const TensorArg& out, int dim, bool log) = 0;

  // --- convolution (NCHW input, [C_out, C_in/groups, kH, kW] weight) --------------------------
  /// bias may be undefined (data == nullptr and ndim == 0).
  virtual void conv2d_forward(const TensorArg& out, const TensorArg& input, const TensorArg& weight,
                              const TensorArg& bias, const Conv2dParams& p) = 0;
  virtual void conv2d_backward_input(const TensorArg& grad_input, const TensorArg& grad_out,
                                     const TensorArg& weight, const Conv2dParams& p) = 0;
  virtual void conv2d_backward_weight(const TensorArg& grad_weight, const TensorArg& grad_out,
                                      const TensorArg& input, const Conv2dParams& p) = 0;

  // --- pooling (NCHW) -------------------------------------------------------------------------
  /// indices (int64) hold the argmax's flat position within each input plane (h * W + w).
  virtual void max_pool2d_forward(const TensorArg& out, const TensorArg& indices,
                                  const TensorArg& input, const Pool2dParams& p) = 0;
  /// grad_input is zeroed by the kernel, then grad_out scattered through indices.
  virtual void max_pool2d_backward(const TensorArg& grad_input, const TensorArg& grad_out,
                                   const TensorArg& indices, const Pool2dParams& p) = 0;
  virtual void avg_pool2d_forward(const TensorArg& out, const TensorArg& input,
                                  const Pool2dParams& p) = 0;
  virtual void avg_pool2d_backward(const TensorArg& grad_input, const TensorArg& grad_out,
                                   const Pool2dParams& p) = 0;

  // --- batch norm (input [N, C, *]) -----------------------------------------------------------
  /// training: normalise with batch statistics, write save_mean/save_invstd ([C]) and, when
  /// running_mean/var are defined, update them in place with momentum (unbiased variance).
  /// eval: normalise with running stats (save_* untouched). weight/bias may be undefined.
  virtual void batch_norm_forward(const TensorArg& out, const TensorArg& save_mean,
                                  const TensorArg& save_invstd, const TensorArg& input,
                                  const TensorArg& weight, const TensorArg& bias,
                                  const TensorArg& running_mean, const TensorArg& running_var,
                                  bool training, double momentum, double eps) = 0;
  /// Gradients for training mode (batch statistics). grad_weight/grad_bias may be undefined.
  virtual void batch_norm_backward(const TensorArg& grad_input, const TensorArg& grad_weight,
                                   const TensorArg& grad_bias, const TensorArg& grad_out,
                                   const TensorArg& input, const TensorArg& weight,
                                   const TensorArg& save_mean, const TensorArg& save_invstd) = 0;
  /// out = relu(batch_norm(...)) in one pass (Note [Fused batch norm + ReLU] in
  /// autograd/ops/norm.cpp): the arguments and results of batch_norm_forward, with every output
  /// element the one batch_norm_forward would write, then relu'd. Returns false, having written
  /// nothing, when this backend has no fused kernel for these arguments; the caller then runs
  /// batch_norm_forward and a Relu.
  virtual bool batch_norm_relu_forward(const TensorArg& /*out*/, const TensorArg& /*save_mean*/,
                                       const TensorArg& /*save_invstd*/, const TensorArg& /*input*/,
                                       const TensorArg& /*weight*/, const TensorArg& /*bias*/,
                                       const TensorArg& /*running_mean*/,
                                       const TensorArg& /*running_var*/, bool /*training*/,
                                       double /*momentum*/, double /*eps*/) {
    return false;
  }
  /// batch_norm_backward of grad_out masked by relu's backward (grad_out where output > 0, else
  /// 0), output being batch_norm_relu_forward's out, without the masked gradient in memory.
  /// Returns false, having written nothing, when there is no fused kernel (the caller then runs
  /// the ReluBackward mask and batch_norm_backward).
  virtual bool batch_norm_relu_backward(const TensorArg& /*grad_input*/,
                                        const TensorArg& /*grad_weight*/,
                                        const TensorArg& /*grad_bias*/,
                                        const TensorArg& /*grad_out*/, const TensorArg& /*output*/,
                                        const TensorArg& /*input*/, const TensorArg& /*weight*/,
                                        const TensorArg& /*save_mean*/,
                                        const TensorArg& /*save_invstd*/) {
    return false;
  }

  // --- indexing -------------------------------------------------------------------------------
  /// out = in.index_select(dim, index); index is int64 1-d; bounds checked (IndexError).
  virtual void index_select(const TensorArg& out, const TensorArg& in, int dim,
                            const TensorArg& index) = 0;
  /// out.index_add_(dim, index, src): out.select(dim, index[i]) += src.select(dim, i).
  virtual void index_add(const TensorArg& out, int dim, const TensorArg& index,
                         const TensorArg& src) = 0;
  /// out[i][j] = in[i][index[i][j]] along dim (torch.gather); index int64, out has index's shape.
  virtual void gather(const TensorArg& out, const TensorArg& in, int dim,
                      const TensorArg& index) = 0;
  /// out[i][index[i][j]] += src[i][j] along dim (torch.scatter_add_).
  virtual void scatter_add(const TensorArg& out, int dim, const TensorArg& index,
                           const TensorArg& src) = 0;

  // --- fused cross-entropy (logits [N, C] any strides, target [N] int64, weight [C] or undefined)
  /// loss[i] ([N], logits' dtype) is sample i's loss before reduction: with w the class weights
  /// (1 when undefined), y = target[i], e = label_smoothing, logp = log_softmax(logits[i]):
  ///   loss[i] = -(1 - e) * w[y] * logp[y] - e / C * sum_c w[c] * logp[c],  0 where y ==
  ///   ignore_index.
  /// lse[i] ([N]) receives logsumexp(logits[i]) for the backward. A target outside [0, C) that is
  /// not ignore_index is an IndexError.
  virtual void cross_entropy_forward(const TensorArg& loss, const TensorArg& lse,
                                     const TensorArg& logits, const TensorArg& target,
                                     const TensorArg& weight, const CrossEntropyParams& p) = 0;
  /// grad_logits[i, c] = grad_loss[i] * d loss[i] / d logits[i, c]
  ///                   = grad_loss[i] * (softmax[i, c] * sum_k coef[k] - coef[c]),
  /// coef[c] = (1 - e) * w[y] * [c == y] + e / C * w[c]; rows with y == ignore_index get 0.
  virtual void cross_entropy_backward(const TensorArg& grad_logits, const TensorArg& grad_loss,
                                      const TensorArg& logits, const TensorArg& lse,
                                      const TensorArg& target, const TensorArg& weight,
                                      const CrossEntropyParams& p) = 0;

  // --- fused optimizer updates (one pass per parameter; math in kernels/optim_math.h) ---------
  /// In place: param (and momentum_buf) updated from grad by the SGD rule. All share shape and
  /// dtype; momentum_buf is undefined when p.momentum == 0.
  virtual void sgd_update(const TensorArg& param, const TensorArg& grad,
                          const TensorArg& momentum_buf, const SgdParams& p) = 0;
  /// In place: param, exp_avg, exp_avg_sq (and max_exp_avg_sq, undefined unless p.amsgrad)
  /// updated from grad by the Adam/AdamW rule. All share shape and dtype.
  virtual void adam_update(const TensorArg& param, const TensorArg& grad, const TensorArg& exp_avg,
                           const TensorArg& exp_avg_sq, const TensorArg& max_exp_avg_sq,
                           const AdamParams& p) = 0;

  // --- random (counter-based: element i uses Philox(state.seed) at counter state.offset + i) ---
  virtual void uniform(const TensorArg& out, double low, double high, GeneratorState state) = 0;
  virtual void normal(const TensorArg& out, double mean, double std, GeneratorState state) = 0;
  /// out = (uniform < p) as out.dtype (1 or 0).
  virtual void bernoulli(const TensorArg& out, double p, GeneratorState state) = 0;
  /// Integers uniform in [low, high).
  virtual void randint(const TensorArg& out, int64_t low, int64_t high, GeneratorState state) = 0;
};

/// The backend for a device's type. Throws DeviceError for CUDA when built without CUDA.
Backend& backend(Device device);
Backend& cpu_backend();
/// Defined in kernels/cuda/ (or kernels/cuda_stub.cpp, which throws).
Backend& cuda_backend();

}  // namespace octo::kernels
