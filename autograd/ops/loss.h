// The fused cross-entropy as a differentiable op over Backend::cross_entropy_forward/backward.
#pragma once

#include <cstdint>

#include "tensor/tensor.h"

namespace octo {

/// Per-sample cross-entropy of logits [N, C] (float32 or float64, any strides) against class
/// indices target [N] (int64), before any reduction: with logp = log_softmax(logits, 1), class
/// weights w (1 when `weight` is undefined) and e = label_smoothing in [0, 1],
///   loss[i] = -(1 - e) * w[y_i] * logp[i, y_i] - e / C * sum_c w[c] * logp[i, c],
/// and 0 where y_i == ignore_index. weight is [C] of the logits' dtype. Differentiable with respect
/// to logits and weight. A target outside [0, C) that is not ignore_index is an IndexError.
/// nn::functional::cross_entropy builds its reductions and [N, C, d...] inputs on this.
///
///   Tensor per = octo::cross_entropy_per_sample(logits, labels, {}, -100, 0.1);  // [N]
Tensor cross_entropy_per_sample(const Tensor& logits, const Tensor& target,
                                const Tensor& weight = {}, int64_t ignore_index = -100,
                                double label_smoothing = 0.0);

}  // namespace octo
