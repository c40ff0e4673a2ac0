// max_pool2d, avg_pool2d and adaptive_avg_pool2d: checks, forward through the backend, backward.
#include <limits>
#include <string>
#include <vector>

#include "autograd/function.h"
#include "autograd/ops/indexing.h"
#include "autograd/ops/nn_ops.h"
#include "autograd/ops/reduce.h"
#include "core/error.h"
#include "kernels/backend.h"
#include "tensor/factories.h"

namespace octo {

using autograd::TensorList;

namespace {

std::string pair_str(std::array<int64_t, 2> v) {
  return "[" + std::to_string(v[0]) + ", " + std::to_string(v[1]) + "]";
}

/// PyTorch's pooling_output_shape: with ceil_mode the last window must start inside the input
/// or the left padding.
int64_t pooled_size(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dilation,
                    bool ceil_mode) {
  // In 128 bits: a hostile kernel, dilation or padding overflows int64 in the products.
  using I = __int128;
  I num = I{in} + I{2} * pad - I{dilation} * (k - 1) - 1 + (ceil_mode ? I{stride} - 1 : I{0});
  I out = (num >= 0 ? num / stride : -((-num + stride - 1) / stride)) + 1;
  if (ceil_mode && (out - 1) * stride >= I{in} + pad) --out;
  OCTO_CHECK_VALUE(
      out <= std::numeric_limits<int64_t>::max() && out >= std::numeric_limits<int64_t>::min(),
      "pooling: kernel ", k, ", stride ", stride, ", padding ", pad, " and dilation ", dilation,
      " give an output size past 64 bits for an input of size ", in);
  return static_cast<int64_t>(out);
}

/// Checks a pooling call's input and arguments (PyTorch's pool2d_shape_check) and fills `p`
/// (stride {0, 0} means kernel_size). Returns the output shape [N, C, OH, OW].
Shape pool_setup(const char* op, const Tensor& x, std::array<int64_t, 2> kernel,
                 std::array<int64_t, 2> stride, std::array<int64_t, 2> padding,
                 std::array<int64_t, 2> dilation, bool ceil_mode, kernels::Pool2dParams& p) {
  OCTO_CHECK_VALUE(x.defined(), op, ": input must be defined");
  OCTO_CHECK_VALUE(
      x.dim() == 4 && x.size(1) > 0 && x.size(2) > 0 && x.size(3) > 0, op,
      ": expected a 3-d or 4-d (batch mode) input with non-zero channels, height and width, but got input of shape ",
      x.sizes());
  detail::check_floating(op, x.dtype(), {{"input", x.dtype()}});
  if (stride[0] == 0 && stride[1] == 0) stride = kernel;
  OCTO_CHECK_VALUE(kernel[0] > 0 && kernel[1] > 0, op,
                   ": kernel_size must be greater than zero, got ", pair_str(kernel));
  OCTO_CHECK_VALUE(stride[0] > 0 && stride[1] > 0, op, ": stride must be greater than zero, got ",
                   pair_str(stride));
  OCTO_CHECK_VALUE(dilation[0] > 0 && dilation[1] > 0, op,
                   ": dilation must be greater than zero, got ", pair_str(dilation));
  OCTO_CHECK_VALUE(padding[0] >= 0 && padding[1] >= 0 && padding[0] <= kernel[0] / 2 &&
                       padding[1] <= kernel[1] / 2,
                   op,
                   ": pad should be non-negative and at most half of kernel size, but got padding ",
                   pair_str(padding), " and kernel_size ", pair_str(kernel));
  const int64_t H = x.size(2), W = x.size(3);
  const int64_t OH = pooled_size(H, kernel[0], padding[0], stride[0], dilation[0], ceil_mode);
  const int64_t OW = pooled_size(W, kernel[1], padding[1], stride[1], dilation[1], ceil_mode);
  OCTO_CHECK_VALUE(OH > 0 && OW > 0, op, ": given input size (", x.size(1), "x", H, "x", W,
                   "), calculated output size (", x.size(1), "x", OH, "x", OW, ") is too small");
  for (int i = 0; i < 2; ++i) {
    p.kernel[i] = kernel[i];
    p.stride[i] = stride[i];
    p.padding[i] = padding[i];
    p.dilation[i] = dilation[i];
  }
  p.ceil_mode = ceil_mode;
  return {x.size(0), x.size(1), OH, OW};
}

// Note [Pooling double backward]: both pooling gradients are linear in grad_out, so their own
// gradient is the adjoint map: for max pooling, scattering into the argmax positions has
// gathering from them as adjoint; for average pooling, the backward's adjoint is the forward.

/// Average pooling from the kernel's parameters (checked by pool_setup), recorded with
/// avg_pool2d_backward.
Tensor avg_pool2d_p(const Tensor& x, const kernels::Pool2dParams& p, const Shape& out_shape);

Tensor avg_pool2d_backward(const Tensor& grad_out, const Shape& input_shape,
                           const kernels::Pool2dParams& p) {
  Tensor gi = detail::make_empty(input_shape, grad_out.dtype(), grad_out.device());
  kernels::backend(gi.device()).avg_pool2d_backward(gi.arg(), grad_out.arg(), p);
  const Shape out_shape = grad_out.sizes();
  return autograd::record("AvgPool2DBackwardBackward", gi, {grad_out}, {},
                          [p, out_shape](const TensorList& h, const TensorList&) -> TensorList {
                            return {avg_pool2d_p(h[0], p, out_shape)};
                          });
}

Tensor avg_pool2d_p(const Tensor& x, const kernels::Pool2dParams& p, const Shape& out_shape) {
  Tensor out = detail::make_empty(out_shape, x.dtype(), x.device());
  kernels::backend(x.device()).avg_pool2d_forward(out.arg(), x.arg(), p);
  const Shape in_shape = x.sizes();
  return autograd::record("AvgPool2DBackward", out, {x}, {},
                          [p, in_shape](const TensorList& g, const TensorList&) -> TensorList {
                            return {avg_pool2d_backward(g[0], in_shape, p)};
                          });
}

/// Scatters grad_out into the argmax positions `indices` (h * W + w within each plane).
Tensor max_pool2d_backward(const Tensor& grad_out, const Tensor& indices, const Shape& input_shape,
                           const kernels::Pool2dParams& p) {
  Tensor gi = detail::make_empty(input_shape, grad_out.dtype(), grad_out.device());
  kernels::backend(gi.device()).max_pool2d_backward(gi.arg(), grad_out.arg(), indices.arg(), p);
  return autograd::record("MaxPool2DWithIndicesBackwardBackward", gi, {grad_out}, {indices},
                          [](const TensorList& h, const TensorList& s) -> TensorList {
                            const Tensor& idx = s[0];               // [N, C, OH, OW]
                            const Tensor planes = h[0].flatten(2);  // [N, C, H * W]
                            return {gather(planes, 2, idx.flatten(2)).view(idx.sizes())};
                          });
}

/// Adaptive average pooling along one spatial dim (2 or 3) of a 4-d tensor, to `out` positions:
/// window i covers [floor(i * in / out), ceil((i + 1) * in / out)).
Tensor adaptive_avg_pool_dim(const Tensor& x, int64_t dim, int64_t out) {
  const int64_t in = x.size(dim);
  if (in % out == 0) {  // equal windows: a plain average pooling
    std::array<int64_t, 2> kernel{1, 1};
    kernel[dim - 2] = in / out;
    return avg_pool2d(x, kernel, kernel);
  }
  std::vector<Tensor> parts;
  parts.reserve(static_cast<size_t>(out));
  for (int64_t i = 0; i < out; ++i) {
    const int64_t start = i * in / out, end = ((i + 1) * in + out - 1) / out;
    parts.push_back(mean(x.narrow(dim, start, end - start), {dim}, /*keepdim=*/true));
  }
  return cat(parts, dim);
}

}  // namespace

Tensor max_pool2d(const Tensor& input, std::array<int64_t, 2> kernel_size,
                  std::array<int64_t, 2> stride, std::array<int64_t, 2> padding,
                  std::array<int64_t, 2> dilation, bool ceil_mode) {
  if (input.defined() && input.dim() == 3)  // unbatched, as torch
    return max_pool2d(input.unsqueeze(0), kernel_size, stride, padding, dilation, ceil_mode)
        .squeeze(0);
  kernels::Pool2dParams p;
  const Shape out_shape =
      pool_setup("max_pool2d", input, kernel_size, stride, padding, dilation, ceil_mode, p);
  Tensor out = detail::make_empty(out_shape, input.dtype(), input.device());
  Tensor indices = detail::make_empty(out_shape, kInt64, input.device());
  kernels::backend(input.device()).max_pool2d_forward(out.arg(), indices.arg(), input.arg(), p);
  const Shape in_shape = input.sizes();
  return autograd::record("MaxPool2DWithIndicesBackward", out, {input}, {indices},
                          [p, in_shape](const TensorList& g, const TensorList& s) -> TensorList {
                            return {max_pool2d_backward(g[0], s[0], in_shape, p)};
                          });
}

Tensor avg_pool2d(const Tensor& input, std::array<int64_t, 2> kernel_size,
                  std::array<int64_t, 2> stride, std::array<int64_t, 2> padding, bool ceil_mode,
                  bool count_include_pad) {
  if (input.defined() && input.dim() == 3)  // unbatched, as torch
    return avg_pool2d(input.unsqueeze(0), kernel_size, stride, padding, ceil_mode,
                      count_include_pad)
        .squeeze(0);
  kernels::Pool2dParams p;
  const Shape out_shape =
      pool_setup("avg_pool2d", input, kernel_size, stride, padding, {1, 1}, ceil_mode, p);
  p.count_include_pad = count_include_pad;
  return avg_pool2d_p(input, p, out_shape);
}

Tensor adaptive_avg_pool2d(const Tensor& input, std::array<int64_t, 2> output_size) {
  OCTO_CHECK_VALUE(input.defined(), "adaptive_avg_pool2d: input must be defined");
  if (input.dim() == 3)  // unbatched, as torch
    return adaptive_avg_pool2d(input.unsqueeze(0), output_size).squeeze(0);
  OCTO_CHECK_VALUE(
      input.dim() == 4 && input.size(1) > 0 && input.size(2) > 0 && input.size(3) > 0,
      "adaptive_avg_pool2d: expected a 3-d or 4-d input with non-zero channels, height and width, but got input of shape ",
      input.sizes());
  OCTO_CHECK_VALUE(output_size[0] > 0 && output_size[1] > 0,
                   "adaptive_avg_pool2d: output_size must be positive, got ",
                   pair_str(output_size));
  detail::check_floating("adaptive_avg_pool2d", input.dtype(), {{"input", input.dtype()}});
  const int64_t H = input.size(2), W = input.size(3);
  if (H % output_size[0] == 0 && W % output_size[1] == 0) {  // one pooling does both dims
    std::array<int64_t, 2> kernel{H / output_size[0], W / output_size[1]};
    return avg_pool2d(input, kernel, kernel);
  }
  // The window-by-window path runs one mean per output row and column, so first make sure the
  // result can be held at all: a hostile output_size is an OutOfMemoryError here, not a
  // near-endless loop. With an empty batch this allocation is the (empty) result itself.
  const int64_t N = input.size(0), C = input.size(1);
  Tensor out =
      detail::make_empty({N, C, output_size[0], output_size[1]}, input.dtype(), input.device());
  if (N == 0) {  // nothing to average; the gradient of the empty input is empty too
    return autograd::record("AdaptiveAvgPool2DBackward", out, {input}, {},
                            [shape = input.sizes()](const TensorList& g, const TensorList&) {
                              return TensorList{zeros(shape, g[0].options())};
                            });
  }
  // Windows of a rectangle average rows then columns: pool each dim on its own. These are
  // several ops, so a 16-bit input goes through them in float32 and rounds once at the end,
  // like the single-kernel primitives (Note [16-bit kernels]).
  if (is_half(input.dtype()))
    return adaptive_avg_pool2d(input.to(kFloat32), output_size).to(input.dtype());
  return adaptive_avg_pool_dim(adaptive_avg_pool_dim(input, 3, output_size[1]), 2, output_size[0]);
}

}  // namespace octo
