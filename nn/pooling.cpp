// MaxPool2d, AvgPool2d, AdaptiveAvgPool2d: thin modules over the pooling ops.
#include "nn/pooling.h"

#include "autograd/ops/nn_ops.h"
#include "nn/functional.h"

namespace octo::nn {

namespace {
void check_pool_sizes(const char* op, const Size2& kernel, const Size2& stride,
                      const Size2& padding) {
  OCTO_CHECK_VALUE(kernel[0] > 0 && kernel[1] > 0, op, ": kernel_size must be positive, got ",
                   kernel.tuple_str());
  OCTO_CHECK_VALUE(stride[0] > 0 && stride[1] > 0, op, ": stride must be positive, got ",
                   stride.tuple_str());
  OCTO_CHECK_VALUE(padding[0] >= 0 && padding[1] >= 0 && padding[0] <= kernel[0] / 2 &&
                       padding[1] <= kernel[1] / 2,
                   op,
                   ": padding should be non-negative and at most half of kernel size, got padding=",
                   padding.tuple_str(), " and kernel_size=", kernel.tuple_str());
}
}  // namespace

MaxPool2d::MaxPool2d(Size2 k, MaxPool2dOptions o)
    : Cloneable("MaxPool2d"),
      kernel_size(k),
      stride(o.stride.value_or(k)),
      padding(o.padding),
      dilation(o.dilation),
      ceil_mode(o.ceil_mode) {
  check_pool_sizes("MaxPool2d", kernel_size, stride, padding);
  OCTO_CHECK_VALUE(dilation[0] > 0 && dilation[1] > 0, "MaxPool2d: dilation must be positive, got ",
                   dilation.tuple_str());
}

Tensor MaxPool2d::forward(const Tensor& x) {
  return max_pool2d(x, kernel_size, stride, padding, dilation, ceil_mode);
}

std::string MaxPool2d::extra_repr() const {
  return "kernel_size=" + kernel_size.str() + ", stride=" + stride.str() +
         ", padding=" + padding.str() + ", dilation=" + dilation.str() +
         ", ceil_mode=" + detail::py_bool(ceil_mode);
}

AvgPool2d::AvgPool2d(Size2 k, AvgPool2dOptions o)
    : Cloneable("AvgPool2d"),
      kernel_size(k),
      stride(o.stride.value_or(k)),
      padding(o.padding),
      ceil_mode(o.ceil_mode),
      count_include_pad(o.count_include_pad) {
  check_pool_sizes("AvgPool2d", kernel_size, stride, padding);
}

Tensor AvgPool2d::forward(const Tensor& x) {
  return avg_pool2d(x, kernel_size, stride, padding, ceil_mode, count_include_pad);
}

std::string AvgPool2d::extra_repr() const {
  return "kernel_size=" + kernel_size.str() + ", stride=" + stride.str() +
         ", padding=" + padding.str();
}

AdaptiveAvgPool2d::AdaptiveAvgPool2d(Size2 size)
    : Cloneable("AdaptiveAvgPool2d"), output_size(size) {
  OCTO_CHECK_VALUE(size[0] > 0 && size[1] > 0,
                   "AdaptiveAvgPool2d: output_size must be positive, got ", size.tuple_str());
}

Tensor AdaptiveAvgPool2d::forward(const Tensor& x) {
  if (x.defined() && x.dim() == 3)  // unbatched [C, H, W], as torch
    return adaptive_avg_pool2d(x.unsqueeze(0), output_size).squeeze(0);
  return adaptive_avg_pool2d(x, output_size);
}

std::string AdaptiveAvgPool2d::extra_repr() const { return "output_size=" + output_size.str(); }

}  // namespace octo::nn
