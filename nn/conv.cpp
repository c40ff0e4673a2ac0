// Conv2d: a thin module over octo::conv2d with PyTorch's initialisation and repr.
#include "nn/conv.h"

#include <cmath>

#include "autograd/ops/nn_ops.h"
#include "nn/init.h"
#include "tensor/factories.h"

namespace octo::nn {

std::string Size2::tuple_str() const {
  return "(" + std::to_string(value[0]) + ", " + std::to_string(value[1]) + ")";
}

Conv2d::Conv2d(int64_t in, int64_t out, Size2 k, Conv2dOptions o)
    : Cloneable("Conv2d"),
      in_channels(in),
      out_channels(out),
      kernel_size(k.value),
      stride(o.stride.value),
      padding(o.padding.value),
      dilation(o.dilation.value),
      groups(o.groups),
      has_bias(o.bias) {
  OCTO_CHECK_VALUE(in > 0 && out > 0, "Conv2d: in_channels and out_channels must be positive, got ",
                   in, " and ", out);
  OCTO_CHECK_VALUE(groups > 0, "Conv2d: groups must be positive, got ", groups);
  OCTO_CHECK_VALUE(in % groups == 0, "Conv2d: in_channels must be divisible by groups, got ", in,
                   " and groups=", groups);
  OCTO_CHECK_VALUE(out % groups == 0, "Conv2d: out_channels must be divisible by groups, got ", out,
                   " and groups=", groups);
  OCTO_CHECK_VALUE(k[0] > 0 && k[1] > 0, "Conv2d: kernel_size must be positive, got ",
                   k.tuple_str());
  OCTO_CHECK_VALUE(stride[0] > 0 && stride[1] > 0, "Conv2d: stride must be positive, got ",
                   o.stride.tuple_str());
  OCTO_CHECK_VALUE(padding[0] >= 0 && padding[1] >= 0, "Conv2d: padding must be non-negative, got ",
                   o.padding.tuple_str());
  OCTO_CHECK_VALUE(dilation[0] > 0 && dilation[1] > 0, "Conv2d: dilation must be positive, got ",
                   o.dilation.tuple_str());
  reset();
}

void Conv2d::reset() {
  weight = register_parameter(
      "weight", empty({out_channels, in_channels / groups, kernel_size[0], kernel_size[1]}));
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (has_bias) {
    bias = register_parameter("bias", empty({out_channels}));
    const auto fan_in = in_channels / groups * kernel_size[0] * kernel_size[1];
    const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
    init::uniform_(bias, -bound, bound);
  } else {
    bias = Tensor();
  }
}

Tensor Conv2d::forward(const Tensor& x) {
  return conv2d(x, weight, bias, stride, padding, dilation, groups);
}

std::string Conv2d::extra_repr() const {
  auto tuple = [](const std::array<int64_t, 2>& v) { return Size2(v).tuple_str(); };
  std::string s = std::to_string(in_channels) + ", " + std::to_string(out_channels) +
                  ", kernel_size=" + tuple(kernel_size) + ", stride=" + tuple(stride);
  if (padding != std::array<int64_t, 2>{0, 0}) s += ", padding=" + tuple(padding);
  if (dilation != std::array<int64_t, 2>{1, 1}) s += ", dilation=" + tuple(dilation);
  if (groups != 1) s += ", groups=" + std::to_string(groups);
  if (!has_bias) s += ", bias=False";
  return s;
}

}  // namespace octo::nn
