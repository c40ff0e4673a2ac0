// Conv2d, and Size2: a 2-d size given as one int or a pair, as PyTorch's kernel_size arguments.
#pragma once

#include <array>
#include <string>

#include "nn/module.h"

namespace octo::nn {

/// A (height, width) size given either as one int for both (`3`) or as a pair (`{3, 5}`). It
/// remembers which, because PyTorch prints pooling sizes the way they were given.
struct Size2 {
  Size2(int64_t v) : value{v, v}, is_scalar(true) {}  // NOLINT: an int means "both dims"
  Size2(int64_t h, int64_t w) : value{h, w}, is_scalar(false) {}
  Size2(std::array<int64_t, 2> v) : value(v), is_scalar(false) {}  // NOLINT
  int64_t operator[](size_t i) const { return value[i]; }
  operator std::array<int64_t, 2>() const { return value; }  // NOLINT
  bool operator==(const Size2& o) const { return value == o.value; }
  /// "(3, 3)" (Python's tuple repr).
  std::string tuple_str() const;
  /// "3" when given as one int, else "(3, 5)".
  std::string str() const { return is_scalar ? std::to_string(value[0]) : tuple_str(); }

  std::array<int64_t, 2> value;
  bool is_scalar;
};

struct Conv2dOptions {
  Size2 stride = 1;
  Size2 padding = 0;
  Size2 dilation = 1;
  int64_t groups = 1;
  bool bias = true;
};

/// 2-d convolution over [N, C_in, H, W] (or unbatched [C_in, H, W]) input, with PyTorch's
/// initialisation: weight [C_out, C_in / groups, kH, kW] ~ kaiming_uniform_(a = sqrt(5)) and
/// bias ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)) where fan_in = C_in / groups * kH * kW.
///
///   auto conv = std::make_shared<nn::Conv2d>(3, 64, 3, nn::Conv2dOptions{.padding = 1, .bias =
///   false});
class Conv2d : public Cloneable<Conv2d> {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, Size2 kernel_size, Conv2dOptions options = {});
  void reset() override;
  Tensor forward(const Tensor& x) override;
  /// "3, 64, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), bias=False" (as PyTorch).
  std::string extra_repr() const override;

  int64_t in_channels, out_channels;
  std::array<int64_t, 2> kernel_size, stride, padding, dilation;
  int64_t groups;
  bool has_bias;
  Tensor weight, bias;
};

}  // namespace octo::nn
