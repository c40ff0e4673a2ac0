// Elementwise ops with NumPy broadcasting: arithmetic, math functions, activations, comparisons.
#pragma once

#include "tensor/tensor.h"

namespace octo {

// Arithmetic. Inputs broadcast (NumPy rules) and promote (promote_types); results are new tensors.
Tensor add(const Tensor& a, const Tensor& b, Scalar alpha = 1);  // a + alpha * b
Tensor sub(const Tensor& a, const Tensor& b, Scalar alpha = 1);  // a - alpha * b
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& exponent);
Tensor pow(const Tensor& a, Scalar exponent);
/// x * scale + shift in one pass over x (one kernel, no temporary); x * scale's dtype rules.
/// data::normalize runs it per channel. Gradient: g * scale.
Tensor affine(const Tensor& x, Scalar scale, Scalar shift);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);

// Math functions.
Tensor neg(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor sign(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor log1p(const Tensor& x);
Tensor expm1(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor square(const Tensor& x);
Tensor reciprocal(const Tensor& x);
Tensor erf(const Tensor& x);
Tensor floor(const Tensor& x);  // gradient 0
Tensor ceil(const Tensor& x);   // gradient 0
Tensor round(const Tensor& x);  // half to even; gradient 0

// Activations.
Tensor relu(const Tensor& x);
Tensor leaky_relu(const Tensor& x, double negative_slope = 0.01);
Tensor gelu(const Tensor& x);  // exact (erf) form, torch's default
Tensor silu(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor tanh(const Tensor& x);
/// torch.nn.functional.softplus: log1p(exp(beta * x)) / beta, and x itself where
/// beta * x > threshold (for stability).
Tensor softplus(const Tensor& x, double beta = 1, double threshold = 20);

/// Clamps into [min, max]; either bound may be omitted. Gradient passes where min <= x <= max.
Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max);
Tensor clamp_min(const Tensor& x, Scalar min);
Tensor clamp_max(const Tensor& x, Scalar max);
/// cond ? a : b with broadcasting; cond must be bool.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);

// Comparisons and logic: bool results, never differentiable.
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor logical_not(const Tensor& x);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor operator==(const Tensor& a, const Tensor& b);
Tensor operator!=(const Tensor& a, const Tensor& b);
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, const Tensor& b);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, const Tensor& b);

/// True when a and b have the same shape and all elements are within atol + rtol * |b|.
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8);
/// The broadcast shape of two shapes; ValueError naming both when they are incompatible.
Shape broadcast_shapes(const Shape& a, const Shape& b);

namespace detail {
/// relu's backward on its own: g where `positive_where` > 0, else 0, where positive_where is
/// relu's input or (the same sign) its output. One kernel in a plain backward, recorded ops under
/// create_graph. For ops that fuse a relu (batch_norm_relu).
Tensor relu_backward(const Tensor& g, const Tensor& positive_where);
}  // namespace detail

}  // namespace octo
