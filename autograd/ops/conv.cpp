// conv2d: argument checks, the forward through the backend, and its backward beside it.
#include <string>

#include "autograd/autocast.h"
#include "autograd/function.h"
#include "autograd/ops/nn_ops.h"
#include "autograd/ops/reduce.h"
#include "core/error.h"
#include "kernels/backend.h"

namespace octo {

using autograd::TensorList;

namespace {

/// floor(a / b) for b > 0 (C++ division truncates towards zero).
int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

std::string pair_str(std::array<int64_t, 2> v) {
  return "[" + std::to_string(v[0]) + ", " + std::to_string(v[1]) + "]";
}

Tensor conv2d_input_grad(const Tensor& grad_out, const Tensor& weight, const Shape& input_shape,
                         const kernels::Conv2dParams& p);
Tensor conv2d_weight_grad(const Tensor& grad_out, const Tensor& input, const Shape& weight_shape,
                          const kernels::Conv2dParams& p);

/// conv2d without bias, from the kernel's parameters (for the backward of the two below).
Tensor conv2d_p(const Tensor& x, const Tensor& w, const kernels::Conv2dParams& p) {
  return conv2d(x, w, Tensor(), {p.stride[0], p.stride[1]}, {p.padding[0], p.padding[1]},
                {p.dilation[0], p.dilation[1]}, p.groups);
}

// Note [Convolution double backward]: conv2d, its input gradient and its weight gradient are
// three bilinear maps, and each one's derivatives are the other two. With gi = input_grad(g, w)
// and gw = weight_grad(g, x), for a gradient h flowing into gi or gw:
//   <h, input_grad(g, w)>  = <conv2d(h, w), g>   so d/dg = conv2d(h, w),  d/dw = weight_grad(g, h)
//   <h, weight_grad(g, x)> = <conv2d(x, h), g>   so d/dg = conv2d(x, h),  d/dx = input_grad(g, h)
// Each is recorded with that backward, so gradients of any order are convolutions.

/// dL/dinput of conv2d: the transposed convolution of grad_out with weight.
Tensor conv2d_input_grad(const Tensor& grad_out, const Tensor& weight, const Shape& input_shape,
                         const kernels::Conv2dParams& p) {
  Tensor gi = detail::make_empty(input_shape, grad_out.dtype(), grad_out.device());
  kernels::backend(gi.device()).conv2d_backward_input(gi.arg(), grad_out.arg(), weight.arg(), p);
  const Shape w_shape = weight.sizes();
  return autograd::record(
      "ConvolutionBackwardInput", gi, {grad_out, weight}, {grad_out, weight},
      [p, w_shape](const TensorList& h, const TensorList& s) -> TensorList {
        return {conv2d_p(h[0], s[1], p), conv2d_weight_grad(s[0], h[0], w_shape, p)};
      });
}

/// dL/dweight of conv2d: grad_out correlated with the input, summed over the batch.
Tensor conv2d_weight_grad(const Tensor& grad_out, const Tensor& input, const Shape& weight_shape,
                          const kernels::Conv2dParams& p) {
  Tensor gw = detail::make_empty(weight_shape, grad_out.dtype(), grad_out.device());
  kernels::backend(gw.device()).conv2d_backward_weight(gw.arg(), grad_out.arg(), input.arg(), p);
  const Shape x_shape = input.sizes();
  return autograd::record(
      "ConvolutionBackwardWeight", gw, {grad_out, input}, {grad_out, input},
      [p, x_shape](const TensorList& h, const TensorList& s) -> TensorList {
        return {conv2d_p(s[1], h[0], p), conv2d_input_grad(s[0], h[0], x_shape, p)};
      });
}

}  // namespace

Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias,
              std::array<int64_t, 2> stride, std::array<int64_t, 2> padding,
              std::array<int64_t, 2> dilation, int64_t groups) {
  if (amp::Cast cast{"conv2d", input})  // Note [Autocast]
    return conv2d(cast(input), cast(weight), cast(bias), stride, padding, dilation, groups);
  OCTO_CHECK_VALUE(input.defined() && weight.defined(), "conv2d: input and weight must be defined");
  detail::check_same_device({&input, &weight, &bias});
  OCTO_CHECK_VALUE(
      input.dim() == 3 || input.dim() == 4,
      "conv2d: expected a 3-d (unbatched) or 4-d (batched) input [N, C, H, W], got input of shape ",
      input.sizes());
  if (input.dim() == 3)  // unbatched, as torch: run as a batch of one
    return conv2d(input.unsqueeze(0), weight, bias, stride, padding, dilation, groups).squeeze(0);
  OCTO_CHECK_VALUE(
      weight.dim() == 4,
      "conv2d: expected a 4-d weight [C_out, C_in / groups, kH, kW], got weight of shape ",
      weight.sizes());
  OCTO_CHECK_VALUE(groups > 0, "conv2d: groups must be positive, got ", groups);
  OCTO_CHECK_VALUE(stride[0] > 0 && stride[1] > 0, "conv2d: stride must be positive, got ",
                   pair_str(stride));
  OCTO_CHECK_VALUE(padding[0] >= 0 && padding[1] >= 0, "conv2d: padding must be non-negative, got ",
                   pair_str(padding));
  OCTO_CHECK_VALUE(dilation[0] > 0 && dilation[1] > 0, "conv2d: dilation must be positive, got ",
                   pair_str(dilation));
  const int64_t N = input.size(0), C = input.size(1), H = input.size(2), W = input.size(3);
  const int64_t K = weight.size(0), kH = weight.size(2), kW = weight.size(3);
  OCTO_CHECK_VALUE(kH > 0 && kW > 0, "conv2d: expected a non-empty kernel, got weight of shape ",
                   weight.sizes());
  int64_t want_c = 0;  // weight.size(1) * groups; a product past int64 matches no input
  const bool too_many = __builtin_mul_overflow(weight.size(1), groups, &want_c);
  OCTO_CHECK_VALUE(!too_many && C == want_c, "conv2d: given groups=", groups, ", weight of size ",
                   weight.sizes(), ", expected input ", input.sizes(), " to have ",
                   too_many ? std::string("more than 2^63") : std::to_string(want_c),
                   " channels, but got ", C, " channels instead");
  OCTO_CHECK_VALUE(K % groups == 0, "conv2d: expected weight.size(0) (C_out = ", K,
                   ") to be divisible by groups (", groups, "), got weight of shape ",
                   weight.sizes());
  if (bias.defined()) {
    OCTO_CHECK_VALUE(bias.dim() == 1 && bias.size(0) == K, "conv2d: expected bias of shape [", K,
                     "] (C_out), got bias of shape ", bias.sizes());
  }
  DType dt = promote_types(input.dtype(), weight.dtype());
  if (bias.defined()) dt = promote_types(dt, bias.dtype());
  if (bias.defined()) {
    detail::check_floating(
        "conv2d", dt,
        {{"input", input.dtype()}, {"weight", weight.dtype()}, {"bias", bias.dtype()}});
  } else {
    detail::check_floating("conv2d", dt, {{"input", input.dtype()}, {"weight", weight.dtype()}});
  }

  const int64_t OH = floor_div(H + 2 * padding[0] - dilation[0] * (kH - 1) - 1, stride[0]) + 1;
  const int64_t OW = floor_div(W + 2 * padding[1] - dilation[1] * (kW - 1) - 1, stride[1]) + 1;
  OCTO_CHECK_VALUE(OH > 0 && OW > 0, "conv2d: calculated output size (", OH, " x ", OW,
                   ") is too small for input (", H, " x ", W, "): padded input size (",
                   H + 2 * padding[0], " x ", W + 2 * padding[1], "), effective kernel size (",
                   dilation[0] * (kH - 1) + 1, " x ", dilation[1] * (kW - 1) + 1, ")");

  kernels::Conv2dParams p;
  for (int i = 0; i < 2; ++i) {
    p.stride[i] = stride[i];
    p.padding[i] = padding[i];
    p.dilation[i] = dilation[i];
  }
  p.groups = groups;

  // Promote (differentiably: .to() records its own backward when it converts).
  const Tensor x = input.to(dt), w = weight.to(dt);
  const Tensor b = bias.defined() ? bias.to(dt) : Tensor();

  // out: [N, C_out, OH, OW]
  Tensor out = detail::make_empty({N, K, OH, OW}, dt, input.device());
  kernels::backend(out.device()).conv2d_forward(out.arg(), x.arg(), w.arg(), b.arg(), p);

  // Which gradients are wanted is known now; skip the others in backward.
  const bool need_x = x.requires_grad(), need_w = w.requires_grad();
  const bool need_b = b.defined() && b.requires_grad();
  const Shape x_shape = x.sizes(), w_shape = w.sizes();
  return autograd::record(
      "ConvolutionBackward", out, {x, w, b}, {need_w ? x : Tensor(), need_x ? w : Tensor()},
      [p, need_x, need_w, need_b, x_shape, w_shape](const TensorList& g,
                                                    const TensorList& s) -> TensorList {
        // g[0]: [N, C_out, OH, OW]; s = {input if needed, weight if needed}
        Tensor gx = need_x ? conv2d_input_grad(g[0], s[1], x_shape, p) : Tensor();
        Tensor gw = need_w ? conv2d_weight_grad(g[0], s[0], w_shape, p) : Tensor();
        Tensor gb = need_b ? sum(g[0], {0, 2, 3}) : Tensor();
        return {gx, gw, gb};
      });
}

}  // namespace octo
