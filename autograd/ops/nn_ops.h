// Neural-network ops: softmax, convolution, pooling, normalisation, dropout.
#pragma once

#include <array>

#include "tensor/tensor.h"

namespace octo {

Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);

/// 2-d convolution of NCHW input with weight [C_out, C_in / groups, kH, kW].
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias = {},
              std::array<int64_t, 2> stride = {1, 1}, std::array<int64_t, 2> padding = {0, 0},
              std::array<int64_t, 2> dilation = {1, 1}, int64_t groups = 1);

/// Max pooling over NCHW input; stride defaults to kernel_size (pass {0, 0}).
Tensor max_pool2d(const Tensor& input, std::array<int64_t, 2> kernel_size,
                  std::array<int64_t, 2> stride = {0, 0}, std::array<int64_t, 2> padding = {0, 0},
                  std::array<int64_t, 2> dilation = {1, 1}, bool ceil_mode = false);
Tensor avg_pool2d(const Tensor& input, std::array<int64_t, 2> kernel_size,
                  std::array<int64_t, 2> stride = {0, 0}, std::array<int64_t, 2> padding = {0, 0},
                  bool ceil_mode = false, bool count_include_pad = true);
/// Average pooling to a fixed output size (torch's start/end index rule).
Tensor adaptive_avg_pool2d(const Tensor& input, std::array<int64_t, 2> output_size);

/// Batch normalisation over dim 1 of [N, C, *] input. In training it uses batch statistics and
/// updates running_mean/running_var in place (when defined) with `momentum`; in eval it uses them.
Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum = 0.1,
                  double eps = 1e-5);
/// relu(batch_norm(...)) in the norm's own kernels, the same values and gradients bit for bit
/// with less memory traffic (Note [Fused batch norm + ReLU] in autograd/ops/norm.cpp).
Tensor batch_norm_relu(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                       const Tensor& weight, const Tensor& bias, bool training,
                       double momentum = 0.1, double eps = 1e-5);
/// Layer normalisation over the last normalized_shape.size() dims.
Tensor layer_norm(const Tensor& input, const Shape& normalized_shape, const Tensor& weight = {},
                  const Tensor& bias = {}, double eps = 1e-5);

/// Zeroes elements with probability p and scales the rest by 1/(1-p) when training.
Tensor dropout(const Tensor& input, double p = 0.5, bool training = true);

}  // namespace octo
