// Reductions over any set of dims (sum, mean, max, min, var, ...); sum_to comes with them.
#pragma once

#include <utility>

#include "autograd/ops/sum_to.h"  // Note [sum_to stands alone]
#include "tensor/tensor.h"

namespace octo {

/// Sum of all elements (0-d result).
Tensor sum(const Tensor& x);
/// Sum over `dims` (negative dims count from the end); keepdim keeps them as size 1.
Tensor sum(const Tensor& x, const Shape& dims, bool keepdim = false);
Tensor mean(const Tensor& x);
Tensor mean(const Tensor& x, const Shape& dims, bool keepdim = false);
Tensor prod(const Tensor& x, int64_t dim, bool keepdim = false);
/// Largest / smallest element (0-d). The gradient is split evenly between tied maxima.
Tensor max(const Tensor& x);
Tensor min(const Tensor& x);
/// Along one dim: (values, indices) like torch.max(x, dim).
std::pair<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim = false);
std::pair<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim = false);
/// Index of the largest / smallest element along dim (int64; first on ties).
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim = false);
/// Variance with Bessel's correction by default (correction = 1), like torch.var.
Tensor var(const Tensor& x, const Shape& dims, int64_t correction = 1, bool keepdim = false);
Tensor std(const Tensor& x, const Shape& dims, int64_t correction = 1, bool keepdim = false);
/// log(sum(exp(x))) along dim, computed stably.
Tensor logsumexp(const Tensor& x, int64_t dim, bool keepdim = false);

}  // namespace octo
