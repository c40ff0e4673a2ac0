// Matrix products: matmul (with NumPy-style batching), mm, bmm, linear.
#pragma once

#include "tensor/tensor.h"

namespace octo {

/// torch.matmul: 1-d x 1-d dot, 2-d x 2-d mm, and batched products with broadcast batch dims.
Tensor matmul(const Tensor& a, const Tensor& b);
/// [M, K] x [K, N] -> [M, N].
Tensor mm(const Tensor& a, const Tensor& b);
/// [B, M, K] x [B, K, N] -> [B, M, N].
Tensor bmm(const Tensor& a, const Tensor& b);
/// x @ weight^T + bias, with weight [out_features, in_features] (nn.Linear's layout).
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = {});

}  // namespace octo
