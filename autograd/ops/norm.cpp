// batch_norm, batch_norm_relu and layer_norm, forward and backward.
//
// batch_norm runs the Backend's fused kernel (batch_norm_relu its relu'd twin: Note [Fused batch
// norm + ReLU]). In training its backward is the fused
// batch_norm_backward kernel (the batch statistics depend on every input, so the gradient is not
// elementwise); in eval the running statistics are constants and the backward is the elementwise
// g * w * invstd, written in tensor ops. layer_norm is a composite of differentiable ops
// (mean, var, rsqrt, mul, add) and needs no backward of its own.
#include "autograd/autocast.h"
#include "autograd/function.h"
#include "autograd/ops/elementwise.h"
#include "autograd/ops/nn_ops.h"
#include "autograd/ops/reduce.h"
#include "core/error.h"
#include "kernels/backend.h"

namespace octo {

using autograd::TensorList;

namespace {

/// Checks an optional per-channel tensor (weight, bias, running stats) of op `op`: [C], with the
/// input's dtype or float32 beside a 16-bit input (as under autocast, where BatchNorm2d keeps
/// float32 parameters and statistics).
void check_channel_param(const char* op, const Tensor& t, const char* name, int64_t channels,
                         DType dtype) {
  if (!t.defined()) return;
  OCTO_CHECK_VALUE(t.dim() == 1 && t.size(0) == channels, op, ": expected ", name, " of shape [",
                   channels, "] (one value per channel of the input), got ", t.sizes());
  const bool half = is_half(dtype);
  OCTO_CHECK_VALUE(t.dtype() == dtype || (half && t.dtype() == kFloat32), op, ": expected ", name,
                   " to have the input's dtype ", dtype, half ? " or float32" : "", ", got ",
                   t.dtype());
}

/// [1, C, 1, ...] with ndim dims: a [C] tensor viewed this way broadcasts over [N, C, *].
Shape channel_shape(int64_t ndim, int64_t channels) {
  Shape s(static_cast<size_t>(ndim), 1);
  s[1] = channels;
  return s;
}

/// Every dim except the channel dim 1.
Shape non_channel_dims(int64_t ndim) {
  Shape dims{0};
  for (int64_t d = 2; d < ndim; ++d) dims.push_back(d);
  return dims;
}

/// Training-mode batch_norm's gradients {input, weight, bias} in differentiable tensor ops, with
/// the batch statistics recomputed from x so that they too are differentiated (double backward):
///   xhat = (x - mean) * invstd,  gxhat = g * w,
///   gi = invstd * (gxhat - mean(gxhat) - xhat * mean(gxhat * xhat)),
///   gw = sum(g * xhat),  gb = sum(g)   (means and sums over every dim but the channel dim).
TensorList batch_norm_backward_composite(const Tensor& g, const Tensor& x, const Tensor& w,
                                         double eps) {
  const Shape dims = non_channel_dims(x.dim());
  const Shape bshape = channel_shape(x.dim(), x.size(1));
  const Tensor mu = mean(x, dims, /*keepdim=*/true);
  const Tensor invstd = rsqrt(var(x, dims, /*correction=*/0, /*keepdim=*/true) + eps);
  const Tensor xhat = (x - mu) * invstd;
  const Tensor gxhat = w.defined() ? g * w.view(bshape) : g;
  Tensor gi = invstd * (gxhat - mean(gxhat, dims, true) - xhat * mean(gxhat * xhat, dims, true));
  return {gi, sum(g * xhat, dims), sum(g, dims)};
}

/// batch_norm, and batch_norm_relu when `relu` (Note [Fused batch norm + ReLU]). `name` is the
/// public op's, for messages.
Tensor batch_norm_impl(const char* name, const Tensor& input, const Tensor& running_mean,
                       const Tensor& running_var, const Tensor& weight, const Tensor& bias,
                       bool training, double momentum, double eps, bool relu) {
  OCTO_CHECK_VALUE(input.defined(), name, ": input is undefined");
  OCTO_CHECK_VALUE(input.dim() >= 2, name,
                   ": expected input of shape [N, C, *] with at least 2 dims, got ", input.sizes());
  detail::check_same_device({&input, &running_mean, &running_var, &weight, &bias});
  detail::check_floating(name, input.dtype(), {{"input", input.dtype()}});
  const int64_t channels = input.size(1);
  check_channel_param(name, weight, "weight", channels, input.dtype());
  check_channel_param(name, bias, "bias", channels, input.dtype());
  check_channel_param(name, running_mean, "running_mean", channels, input.dtype());
  check_channel_param(name, running_var, "running_var", channels, input.dtype());
  OCTO_CHECK_VALUE(running_mean.defined() == running_var.defined(), name,
                   ": running_mean and running_var must both be given or both be undefined");
  OCTO_CHECK_VALUE(
      training || running_mean.defined(), name,
      ": running_mean and running_var must be defined in evaluation mode (training = false)");
  if (training) {
    // Same check (and message) as torch.nn.functional.batch_norm.
    const int64_t per_channel = input.numel() / std::max<int64_t>(channels, 1);
    OCTO_CHECK_VALUE(channels == 0 || per_channel != 1,
                     "Expected more than 1 value per channel when training, got input size ",
                     input.sizes());
  }

  const Device device = input.device();
  const DType dtype = input.dtype();
  // The batch statistics stay in float32 for a 16-bit input (Note [16-bit kernels]).
  const DType stat_dtype = is_half(dtype) ? kFloat32 : dtype;
  Tensor out = detail::make_empty(input.sizes(), dtype, device);
  Tensor save_mean = detail::make_empty({channels}, stat_dtype, device);
  Tensor save_invstd = detail::make_empty({channels}, stat_dtype, device);
  {
    // The running statistics are buffers: updated in place outside the graph.
    NoGradGuard no_grad;
    kernels::Backend& be = kernels::backend(device);
    const bool fused =
        relu && be.batch_norm_relu_forward(
                    out.arg(), save_mean.arg(), save_invstd.arg(), input.arg(), weight.arg(),
                    bias.arg(), running_mean.arg(), running_var.arg(), training, momentum, eps);
    if (!fused) {
      be.batch_norm_forward(out.arg(), save_mean.arg(), save_invstd.arg(), input.arg(),
                            weight.arg(), bias.arg(), running_mean.arg(), running_var.arg(),
                            training, momentum, eps);
      if (relu && out.numel() > 0) be.unary(kernels::UnaryOp::Relu, out.arg(), out.arg());
    }
  }
  if (training && running_mean.defined()) {
    running_mean.bump_version();
    running_var.bump_version();
  }

  const bool need_input = input.requires_grad();
  const bool need_weight = weight.defined() && weight.requires_grad();
  const bool need_bias = bias.defined() && bias.requires_grad();
  // Each parameter's gradient has the parameter's dtype (float32 beside a 16-bit input).
  const DType weight_dtype = weight.defined() ? weight.dtype() : dtype;
  const DType bias_dtype = bias.defined() ? bias.dtype() : dtype;
  const char* node = relu ? "BatchNormReluBackward" : "NativeBatchNormBackward";
  // With relu the output is saved last: its sign is relu's mask.
  TensorList saved = training ? TensorList{input, weight, save_mean, save_invstd}
                              : TensorList{input, weight, running_mean, running_var};
  if (relu) saved.push_back(out);
  if (training) {
    // Saved: input [N, C, *], weight [C] (may be undefined), save_mean [C], save_invstd [C].
    return autograd::record(node, out, {input, weight, bias}, saved,
                            [need_input, need_weight, need_bias, eps, weight_dtype, bias_dtype,
                             relu](const TensorList& g, const TensorList& s) -> TensorList {
                              const Tensor& x = s[0];
                              const Tensor go =
                                  g[0].dtype() == x.dtype() ? g[0] : g[0].to(x.dtype());
                              if (autograd::GradMode::is_enabled())  // Note [create_graph]
                                return batch_norm_backward_composite(
                                    relu ? detail::relu_backward(go, s[4]) : go, x, s[1], eps);
                              const int64_t c = x.size(1);
                              Tensor gi, gw, gb;
                              if (need_input)
                                gi = detail::make_empty(x.sizes(), x.dtype(), x.device());
                              if (need_weight)
                                gw = detail::make_empty({c}, weight_dtype, x.device());
                              if (need_bias) gb = detail::make_empty({c}, bias_dtype, x.device());
                              kernels::Backend& be = kernels::backend(x.device());
                              if (relu && be.batch_norm_relu_backward(
                                              gi.arg(), gw.arg(), gb.arg(), go.arg(), s[4].arg(),
                                              x.arg(), s[1].arg(), s[2].arg(), s[3].arg()))
                                return {gi, gw, gb};
                              const Tensor gbn = relu ? detail::relu_backward(go, s[4]) : go;
                              be.batch_norm_backward(gi.arg(), gw.arg(), gb.arg(), gbn.arg(),
                                                     x.arg(), s[1].arg(), s[2].arg(), s[3].arg());
                              return {gi, gw, gb};
                            });
  }
  // Eval: y = (x - running_mean) * invstd * w + b with constant running statistics.
  return autograd::record(node, out, {input, weight, bias}, saved,
                          [need_input, need_weight, need_bias, eps, relu](
                              const TensorList& g, const TensorList& s) -> TensorList {
                            const Tensor &x = s[0], &w = s[1], &rm = s[2], &rv = s[3];
                            const Tensor go = relu ? detail::relu_backward(g[0], s[4]) : g[0];
                            const Shape bshape = channel_shape(x.dim(), x.size(1));
                            const Shape dims = non_channel_dims(x.dim());
                            const Tensor invstd = rsqrt(rv + eps);  // [C]
                            Tensor gi, gw, gb;
                            if (need_input) {
                              gi = go * (w.defined() ? w * invstd : invstd).view(bshape);
                              if (gi.dtype() != x.dtype()) gi = gi.to(x.dtype());
                            }
                            if (need_weight)
                              gw = sum(go * ((x - rm.view(bshape)) * invstd.view(bshape)), dims);
                            if (need_bias) gb = sum(go, dims);
                            return {gi, gw, gb};
                          });
}

}  // namespace

Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum,
                  double eps) {
  return batch_norm_impl("batch_norm", input, running_mean, running_var, weight, bias, training,
                         momentum, eps, /*relu=*/false);
}

// Note [Fused batch norm + ReLU]: conv - BatchNorm - ReLU is the block of most CNNs, and on the
// CPU the ReLU's own passes (read the norm's output, write a second tensor; in backward read the
// gradient and the output, write a masked gradient) cost about as much memory traffic as the
// norm itself. batch_norm_relu does it in the norm's kernels: the forward relu's each value as it
// is written, and the backward masks the incoming gradient as it reads it (a zero wherever the
// output is not positive, which is where relu's input was not), so neither the norm's output
// nor the masked gradient is ever in memory. The result is relu(batch_norm(...)) bit for bit,
// values and gradients (tests/autograd/test_batch_norm_relu.cpp checks it), because the fused
// kernels apply the same relu to the same rounded values and the same mask to the same gradient. A
// backend without the fused kernels (CUDA, a 16-bit mix that stages) runs the two ops instead;
// create_graph multiplies by the mask in recorded ops. nn::Sequential calls it for a BatchNorm
// followed by a ReLU (Note [Sequential fusion] in nn/container.cpp).
Tensor batch_norm_relu(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                       const Tensor& weight, const Tensor& bias, bool training, double momentum,
                       double eps) {
  return batch_norm_impl("batch_norm_relu", input, running_mean, running_var, weight, bias,
                         training, momentum, eps, /*relu=*/true);
}

Tensor layer_norm(const Tensor& input, const Shape& normalized_shape, const Tensor& weight,
                  const Tensor& bias, double eps) {
  if (amp::Cast cast{"layer_norm", input})  // Note [Autocast]
    return layer_norm(cast(input), normalized_shape, cast(weight), cast(bias), eps);
  OCTO_CHECK_VALUE(input.defined(), "layer_norm: input is undefined");
  const int64_t k = static_cast<int64_t>(normalized_shape.size());
  OCTO_CHECK_VALUE(
      k >= 1,
      "layer_norm: expected normalized_shape to be at least 1-dimensional, i.e., containing at least one element, got ",
      normalized_shape);
  const int64_t ndim = input.dim();
  bool match = ndim >= k;
  for (int64_t i = 0; match && i < k; ++i) match = input.size(ndim - k + i) == normalized_shape[i];
  OCTO_CHECK_VALUE(match, "layer_norm: given normalized_shape=", normalized_shape,
                   ", expected input with shape [*, ", shape_str(normalized_shape).substr(1),
                   ", but got input of size ", input.sizes());
  OCTO_CHECK_VALUE(input.is_floating_point(), "layer_norm: expected a floating-point input, got ",
                   input.dtype());
  detail::check_same_device({&input, &weight, &bias});
  OCTO_CHECK_VALUE(!weight.defined() || weight.sizes() == normalized_shape,
                   "layer_norm: expected weight of the same shape as normalized_shape ",
                   normalized_shape, ", got ", weight.defined() ? weight.sizes() : Shape{});
  OCTO_CHECK_VALUE(!bias.defined() || bias.sizes() == normalized_shape,
                   "layer_norm: expected bias of the same shape as normalized_shape ",
                   normalized_shape, ", got ", bias.defined() ? bias.sizes() : Shape{});

  Shape dims;
  for (int64_t i = 0; i < k; ++i) dims.push_back(ndim - k + i);
  // Each row's statistics over the normalised dims: mean and biased variance, kept as size 1.
  const Tensor mu = mean(input, dims, /*keepdim=*/true);
  const Tensor sigma2 = var(input, dims, /*correction=*/0, /*keepdim=*/true);
  Tensor out = (input - mu) * rsqrt(sigma2 + eps);
  if (weight.defined()) out = out * weight;
  if (bias.defined()) out = out + bias;
  return out;
}

}  // namespace octo
