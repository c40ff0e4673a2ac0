// Pooling layers: MaxPool2d, AvgPool2d, AdaptiveAvgPool2d.
#pragma once

#include <optional>

#include "nn/conv.h"

namespace octo::nn {

struct MaxPool2dOptions {
  /// Defaults to kernel_size.
  std::optional<Size2> stride = std::nullopt;
  Size2 padding = 0;
  Size2 dilation = 1;
  bool ceil_mode = false;
};

/// Max over kernel_size windows of [N, C, H, W] (or [C, H, W]) input:
///   nn::MaxPool2d(2)  // 2x2 windows, stride 2
class MaxPool2d : public Cloneable<MaxPool2d> {
 public:
  explicit MaxPool2d(Size2 kernel_size, MaxPool2dOptions options = {});
  void reset() override {}
  Tensor forward(const Tensor& x) override;
  /// "kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False" (as PyTorch).
  std::string extra_repr() const override;

  Size2 kernel_size, stride, padding, dilation;
  bool ceil_mode;
};

struct AvgPool2dOptions {
  /// Defaults to kernel_size.
  std::optional<Size2> stride = std::nullopt;
  Size2 padding = 0;
  bool ceil_mode = false;
  /// Count the zero padding in the divisor.
  bool count_include_pad = true;
};

/// Mean over kernel_size windows of [N, C, H, W] (or [C, H, W]) input.
class AvgPool2d : public Cloneable<AvgPool2d> {
 public:
  explicit AvgPool2d(Size2 kernel_size, AvgPool2dOptions options = {});
  void reset() override {}
  Tensor forward(const Tensor& x) override;
  /// "kernel_size=2, stride=2, padding=0" (as PyTorch).
  std::string extra_repr() const override;

  Size2 kernel_size, stride, padding;
  bool ceil_mode, count_include_pad;
};

/// Averages [N, C, H, W] input down to [N, C, output_size] with torch's window rule
/// (AdaptiveAvgPool2d(1) is global average pooling).
class AdaptiveAvgPool2d : public Cloneable<AdaptiveAvgPool2d> {
 public:
  explicit AdaptiveAvgPool2d(Size2 output_size);
  void reset() override {}
  Tensor forward(const Tensor& x) override;
  /// "output_size=(1, 1)" or "output_size=1", as given.
  std::string extra_repr() const override;

  Size2 output_size;
};

}  // namespace octo::nn
