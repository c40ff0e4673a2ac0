// The enumerations that name elementwise and reduction primitives in the Backend interface.
#pragma once

#include <cstdint>

namespace octo::kernels {

/// out = f(in). `alpha`/`beta` parameters are noted where used.
enum class UnaryOp : int8_t {
  Neg,
  Abs,
  Sign,
  Exp,
  Log,
  Log1p,
  Expm1,
  Sqrt,
  Rsqrt,
  Sin,
  Cos,
  Tanh,
  Sigmoid,
  Relu,
  Gelu,  // exact: x * Phi(x), Phi the normal CDF (erf form), as torch's default
  Silu,
  Square,
  Reciprocal,
  Floor,
  Ceil,
  Round,
  Erf,
  LogicalNot,
  LeakyRelu,  // alpha = negative slope
  PowScalar,  // x ** alpha
  Clamp,      // clamp to [alpha, beta]; a missing bound is passed as -inf / +inf
  AddScalar,  // x + alpha
  MulScalar,  // x * alpha
};

/// out = f(a, b), a and b already broadcast to out's shape (stride-0 dims).
enum class BinaryOp : int8_t {
  Add,
  Sub,
  Mul,
  Div,
  Pow,
  Maximum,
  Minimum,
  Eq,
  Ne,
  Lt,
  Le,
  Gt,
  Ge,
  LogicalAnd,
  LogicalOr,  // out dtype bool
  // Backward helpers, f(grad, saved): a = incoming gradient, b = the saved tensor.
  ReluBackward,       // b = relu's input: a * (b > 0)
  GeluBackward,       // b = gelu's input
  SiluBackward,       // b = silu's input
  SigmoidBackward,    // b = sigmoid's output: a * b * (1 - b)
  TanhBackward,       // b = tanh's output: a * (1 - b^2)
  LeakyReluBackward,  // b = input, alpha = slope
};

enum class ReduceOp : int8_t {
  Sum,
  Mean,
  Prod,
  Max,
  Min,
  ArgMax,
  ArgMin,  // out dtype int64; ties resolve to the first index; one reduced dim only
  Var,     // alpha = correction (1 for the unbiased estimator)
};

}  // namespace octo::kernels
