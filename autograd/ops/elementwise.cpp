// Elementwise ops with broadcasting and type promotion, forward and backward side by side.
//
// Forward: check devices, broadcast both inputs to the result shape as stride-0 views (raw
// make_view, not the autograd expand), convert them to the computation dtype, run the kernel.
// Backward: formulas in tensor ops; reduce_grad sums a gradient back to its input's shape
// (sum_to undoes broadcasting) and casts it to its input's dtype.
#include "autograd/ops/elementwise.h"

#include <cmath>
#include <functional>
#include <limits>

#include "autograd/autocast.h"
#include "autograd/function.h"
#include "autograd/inplace.h"
#include "autograd/ops/elementwise_impl.h"
#include "autograd/ops/sum_to.h"
#include "core/error.h"
#include "kernels/backend.h"
#include "kernels/functors.h"
#include "tensor/factories.h"

namespace octo {

using autograd::TensorList;
using kernels::BinaryOp;
using kernels::UnaryOp;
using namespace elementwise_impl;

namespace {

using UnaryBackward = std::function<Tensor(const Tensor& g, const TensorList& saved)>;

Tensor record_unary(const char* name, const Tensor& out, const Tensor& x, const TensorList& saved,
                    UnaryBackward fn) {
  return autograd::record(
      name, out, {x}, saved,
      [fn = std::move(fn)](const TensorList& g, const TensorList& s) -> TensorList {
        return {fn(g[0], s)};
      });
}

/// Functions whose gradient is zero almost everywhere (sign, floor, ...).
Tensor record_zero_grad(const char* name, const Tensor& out, const Tensor& x) {
  return record_unary(name, out, x, {},
                      [](const Tensor& g, const TensorList&) { return zeros_like(g); });
}

/// The same gradient as helper() below, in differentiable tensor ops, for a backward that is
/// itself recorded (Note [create_graph] in autograd/engine.cpp).
Tensor composite_backward(BinaryOp op, const Tensor& g, const Tensor& s, Scalar alpha) {
  auto positive = [&] {  // 1 where s > 0, else 0, in s's dtype: a constant of the graph
    NoGradGuard no_grad;
    return raw_binary(BinaryOp::Gt, s, zeros({}, s.options()), s.dtype()).to(s.dtype());
  };
  switch (op) {
    case BinaryOp::ReluBackward:
      return g * positive();
    case BinaryOp::LeakyReluBackward: {
      const double slope = alpha.to_double();
      return g * (positive() * (1.0 - slope) + slope);
    }
    case BinaryOp::GeluBackward: {  // d/dx x Phi(x) = Phi(x) + x phi(x)
      const double inv_sqrt_2pi = 0.3989422804014327;
      return g * ((erf(s * 0.7071067811865476) + 1.0) * 0.5 + s * exp(s * s * -0.5) * inv_sqrt_2pi);
    }
    case BinaryOp::SiluBackward: {  // d/dx x sigmoid(x) = sig (1 + x (1 - sig))
      const Tensor sig = sigmoid(s);
      return g * (sig * (s * (1.0 - sig) + 1.0));
    }
    case BinaryOp::SigmoidBackward:  // s = sigmoid's output
      return g * (s * (1.0 - s));
    case BinaryOp::TanhBackward:  // s = tanh's output
      return g * (1.0 - s * s);
    default:
      OCTO_INTERNAL_ASSERT(false, "composite_backward: no formula for this backward helper");
      return Tensor();
  }
}

/// A backward-helper kernel op(g, saved) (ReluBackward, ...): one fused kernel in a plain
/// backward; under create_graph the same formula in recorded tensor ops.
Tensor helper(BinaryOp op, const Tensor& g, const Tensor& saved, Scalar alpha = {}) {
  if (autograd::GradMode::is_enabled()) return composite_backward(op, g, saved, alpha);
  return raw_binary(op, g, saved, promote_types(g.dtype(), saved.dtype()), alpha);
}

/// Tensor-tensor arithmetic shared by add/sub/mul/...: validate, promote, run.
Tensor arith(const char* name, BinaryOp op, const Tensor& a, const Tensor& b) {
  check_inputs(name, {&a, &b});
  return raw_binary(op, a, b, result_type(a, b));
}

Tensor compare(const char* name, BinaryOp op, const Tensor& a, const Tensor& b) {
  check_inputs(name, {&a, &b});
  return raw_binary(op, a, b, result_type(a, b));
}

}  // namespace

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  return broadcast_impl(a, b, "broadcast_shapes");
}

// --- arithmetic ----------------------------------------------------------------------------------

Tensor add(const Tensor& a, const Tensor& b, Scalar alpha) {
  if (!is_one(alpha)) return add(a, b * alpha);
  Tensor out = arith("add", BinaryOp::Add, a, b);
  Input ia(a), ib(b);
  return autograd::record("AddBackward", out, {a, b}, {},
                          [ia, ib](const TensorList& g, const TensorList&) -> TensorList {
                            return {ia.grad([&] { return g[0]; }), ib.grad([&] { return g[0]; })};
                          });
}

Tensor sub(const Tensor& a, const Tensor& b, Scalar alpha) {
  if (!is_one(alpha)) return add(a, b, negate(alpha));
  check_inputs("sub", {&a, &b});
  OCTO_CHECK_VALUE(!(a.dtype() == kBool && b.dtype() == kBool),
                   "sub: subtraction with two bool tensors is not supported; use logical_xor");
  Tensor out = arith("sub", BinaryOp::Sub, a, b);
  Input ia(a), ib(b);
  return autograd::record("SubBackward", out, {a, b}, {},
                          [ia, ib](const TensorList& g, const TensorList&) -> TensorList {
                            return {ia.grad([&] { return g[0]; }), ib.grad([&] { return -g[0]; })};
                          });
}

Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor out = arith("mul", BinaryOp::Mul, a, b);
  Input ia(a), ib(b);
  return autograd::record(
      "MulBackward", out, {a, b}, {a, b},
      [ia, ib](const TensorList& g, const TensorList& s) -> TensorList {
        return {ia.grad([&] { return g[0] * s[1]; }), ib.grad([&] { return g[0] * s[0]; })};
      });
}

Tensor div(const Tensor& a, const Tensor& b) {
  check_inputs("div", {&a, &b});
  DType dt = result_type(a, b);
  if (!is_floating(dt)) dt = kFloat32;  // true division, as torch.div
  Tensor out = raw_binary(BinaryOp::Div, a, b, dt);
  Input ia(a), ib(b);
  return autograd::record("DivBackward", out, {a, b}, {a, b},
                          [ia, ib](const TensorList& g, const TensorList& s) -> TensorList {
                            return {ia.grad([&] { return g[0] / s[1]; }),
                                    ib.grad([&] { return -g[0] * s[0] / (s[1] * s[1]); })};
                          });
}

Tensor pow(const Tensor& a, const Tensor& exponent) {
  if (amp::Cast cast{"pow", a}) return pow(cast(a), cast(exponent));  // Note [Autocast]
  Tensor out = arith("pow", BinaryOp::Pow, a, exponent);
  Input ia(a), ib(exponent);
  return autograd::record(
      "PowBackward", out, {a, exponent}, {a, exponent, out},
      [ia, ib](const TensorList& g, const TensorList& s) -> TensorList {
        const Tensor &x = s[0], &e = s[1];
        return {ia.grad([&] { return g[0] * e * pow(x, e - 1); }),
                ib.grad([&] {  // d/de x^e = x^e log x, taken as 0 where x == 0 and e >= 0
                  Tensor zero = zeros({}, g[0].options());
                  return where(logical_and(x == zero, e >= zero), zero, g[0] * s[2] * log(x));
                })};
      });
}

Tensor pow(const Tensor& a, Scalar exponent) {
  if (amp::Cast cast{"pow", a}) return pow(cast(a), exponent);  // Note [Autocast]
  check_inputs("pow", {&a});
  DType dt = result_type(a.dtype(), exponent);
  OCTO_CHECK_VALUE(is_floating(dt) || exponent.to_int() >= 0,
                   "pow: integers to negative integer powers are not allowed, got exponent ",
                   exponent);
  Tensor out = raw_unary(UnaryOp::PowScalar, convert_raw(a, dt), exponent);
  Input ia(a);
  return autograd::record("PowBackward", out, {a}, {a},
                          [ia, exponent](const TensorList& g, const TensorList& s) -> TensorList {
                            return {ia.grad([&] {
                              if (exponent.to_double() == 0.0) return zeros_like(g[0]);
                              Scalar em1 = exponent.is_integral()
                                               ? Scalar(exponent.to_int() - 1)
                                               : Scalar(exponent.to_double() - 1);
                              return g[0] * pow(s[0], em1) * exponent;
                            })};
                          });
}

Tensor affine(const Tensor& x, Scalar scale, Scalar shift) {
  check_inputs("affine", {&x});
  DType dt = result_type(result_type(x.dtype(), scale), shift);
  Tensor out = raw_unary(UnaryOp::Affine, convert_raw(x, dt), scale, shift);
  Input ix(x);
  return autograd::record("AffineBackward", out, {x}, {},
                          [ix, scale](const TensorList& g, const TensorList&) -> TensorList {
                            return {ix.grad([&] { return g[0] * scale; })};
                          });
}

namespace {
/// maximum/minimum: the gradient goes to the chosen input, split evenly on ties.
Tensor extremum(const char* name, const char* node, BinaryOp op, const Tensor& a, const Tensor& b) {
  Tensor out = arith(name, op, a, b);
  Input ia(a), ib(b);
  bool is_max = op == BinaryOp::Maximum;
  return autograd::record(
      node, out, {a, b}, {a, b},
      [ia, ib, is_max](const TensorList& g, const TensorList& s) -> TensorList {
        DType gdt = g[0].dtype();
        Tensor wins = is_max ? gt(s[0], s[1]) : lt(s[0], s[1]);
        Tensor w = convert_raw(wins, gdt) + convert_raw(eq(s[0], s[1]), gdt) * 0.5;  // a's share
        return {ia.grad([&] { return g[0] * w; }), ib.grad([&] { return g[0] * (1.0 - w); })};
      });
}
}  // namespace

Tensor maximum(const Tensor& a, const Tensor& b) {
  return extremum("maximum", "MaximumBackward", BinaryOp::Maximum, a, b);
}
Tensor minimum(const Tensor& a, const Tensor& b) {
  return extremum("minimum", "MinimumBackward", BinaryOp::Minimum, a, b);
}

// --- math functions ------------------------------------------------------------------------------

Tensor neg(const Tensor& x) {
  check_inputs("neg", {&x});
  OCTO_CHECK_VALUE(x.dtype() != kBool,
                   "neg: negation of a bool tensor is not supported; use logical_not");
  return record_unary("NegBackward", raw_unary(UnaryOp::Neg, x), x, {},
                      [](const Tensor& g, const TensorList&) { return -g; });
}

Tensor abs(const Tensor& x) {
  check_inputs("abs", {&x});
  return record_unary("AbsBackward", raw_unary(UnaryOp::Abs, x), x, {x},
                      [](const Tensor& g, const TensorList& s) { return g * sign(s[0]); });
}

Tensor sign(const Tensor& x) {
  check_inputs("sign", {&x});
  return record_zero_grad("SignBackward", raw_unary(UnaryOp::Sign, x), x);
}

Tensor exp(const Tensor& x) {
  if (amp::Cast cast{"exp", x}) return exp(cast(x));  // Note [Autocast]
  Tensor out = float_unary("exp", UnaryOp::Exp, x);
  return record_unary("ExpBackward", out, x, {out},
                      [](const Tensor& g, const TensorList& s) { return g * s[0]; });
}

Tensor log(const Tensor& x) {
  if (amp::Cast cast{"log", x}) return log(cast(x));  // Note [Autocast]
  return record_unary("LogBackward", float_unary("log", UnaryOp::Log, x), x, {x},
                      [](const Tensor& g, const TensorList& s) { return g / s[0]; });
}

Tensor log1p(const Tensor& x) {
  if (amp::Cast cast{"log1p", x}) return log1p(cast(x));  // Note [Autocast]
  return record_unary("Log1pBackward", float_unary("log1p", UnaryOp::Log1p, x), x, {x},
                      [](const Tensor& g, const TensorList& s) { return g / (s[0] + 1); });
}

Tensor expm1(const Tensor& x) {
  if (amp::Cast cast{"expm1", x}) return expm1(cast(x));  // Note [Autocast]
  Tensor out = float_unary("expm1", UnaryOp::Expm1, x);
  return record_unary("Expm1Backward", out, x, {out},
                      [](const Tensor& g, const TensorList& s) { return g * (s[0] + 1); });
}

Tensor sqrt(const Tensor& x) {
  Tensor out = float_unary("sqrt", UnaryOp::Sqrt, x);
  return record_unary("SqrtBackward", out, x, {out},
                      [](const Tensor& g, const TensorList& s) { return g / (s[0] * 2); });
}

Tensor rsqrt(const Tensor& x) {
  if (amp::Cast cast{"rsqrt", x}) return rsqrt(cast(x));  // Note [Autocast]
  Tensor out = float_unary("rsqrt", UnaryOp::Rsqrt, x);
  return record_unary("RsqrtBackward", out, x, {out}, [](const Tensor& g, const TensorList& s) {
    return g * (s[0] * s[0] * s[0]) * -0.5;
  });
}

Tensor sin(const Tensor& x) {
  return record_unary("SinBackward", float_unary("sin", UnaryOp::Sin, x), x, {x},
                      [](const Tensor& g, const TensorList& s) { return g * cos(s[0]); });
}

Tensor cos(const Tensor& x) {
  return record_unary("CosBackward", float_unary("cos", UnaryOp::Cos, x), x, {x},
                      [](const Tensor& g, const TensorList& s) { return -(g * sin(s[0])); });
}

Tensor square(const Tensor& x) {
  check_inputs("square", {&x});
  OCTO_CHECK_VALUE(x.dtype() != kBool, "square: not supported for bool tensors");
  return record_unary("SquareBackward", raw_unary(UnaryOp::Square, x), x, {x},
                      [](const Tensor& g, const TensorList& s) { return g * s[0] * 2; });
}

Tensor reciprocal(const Tensor& x) {
  if (amp::Cast cast{"reciprocal", x}) return reciprocal(cast(x));  // Note [Autocast]
  Tensor out = float_unary("reciprocal", UnaryOp::Reciprocal, x);
  return record_unary("ReciprocalBackward", out, x, {out},
                      [](const Tensor& g, const TensorList& s) { return -(g * s[0] * s[0]); });
}

Tensor erf(const Tensor& x) {
  return record_unary("ErfBackward", float_unary("erf", UnaryOp::Erf, x), x, {x},
                      [](const Tensor& g, const TensorList& s) {
                        return g * exp(-(s[0] * s[0])) * 1.1283791670955126;  // 2 / sqrt(pi)
                      });
}

Tensor floor(const Tensor& x) {
  check_inputs("floor", {&x});
  return record_zero_grad("FloorBackward", raw_unary(UnaryOp::Floor, x), x);
}
Tensor ceil(const Tensor& x) {
  check_inputs("ceil", {&x});
  return record_zero_grad("CeilBackward", raw_unary(UnaryOp::Ceil, x), x);
}
Tensor round(const Tensor& x) {
  check_inputs("round", {&x});
  return record_zero_grad("RoundBackward", raw_unary(UnaryOp::Round, x), x);
}

// --- activations ---------------------------------------------------------------------------------

Tensor relu(const Tensor& x) {
  check_inputs("relu", {&x});
  OCTO_CHECK_VALUE(x.dtype() != kBool, "relu: not supported for bool tensors");
  return record_unary(
      "ReluBackward", raw_unary(UnaryOp::Relu, x), x, {x},
      [](const Tensor& g, const TensorList& s) { return helper(BinaryOp::ReluBackward, g, s[0]); });
}

Tensor detail::relu_backward(const Tensor& g, const Tensor& positive_where) {
  return helper(BinaryOp::ReluBackward, g, positive_where);
}

Tensor leaky_relu(const Tensor& x, double negative_slope) {
  return record_unary("LeakyReluBackward",
                      float_unary("leaky_relu", UnaryOp::LeakyRelu, x, negative_slope), x, {x},
                      [negative_slope](const Tensor& g, const TensorList& s) {
                        return helper(BinaryOp::LeakyReluBackward, g, s[0], negative_slope);
                      });
}

Tensor gelu(const Tensor& x) {
  return record_unary(
      "GeluBackward", float_unary("gelu", UnaryOp::Gelu, x), x, {x},
      [](const Tensor& g, const TensorList& s) { return helper(BinaryOp::GeluBackward, g, s[0]); });
}

Tensor silu(const Tensor& x) {
  return record_unary(
      "SiluBackward", float_unary("silu", UnaryOp::Silu, x), x, {x},
      [](const Tensor& g, const TensorList& s) { return helper(BinaryOp::SiluBackward, g, s[0]); });
}

Tensor sigmoid(const Tensor& x) {
  Tensor out = float_unary("sigmoid", UnaryOp::Sigmoid, x);
  return record_unary("SigmoidBackward", out, x, {out}, [](const Tensor& g, const TensorList& s) {
    return helper(BinaryOp::SigmoidBackward, g, s[0]);
  });
}

Tensor tanh(const Tensor& x) {
  Tensor out = float_unary("tanh", UnaryOp::Tanh, x);
  return record_unary("TanhBackward", out, x, {out}, [](const Tensor& g, const TensorList& s) {
    return helper(BinaryOp::TanhBackward, g, s[0]);
  });
}

Tensor softplus(const Tensor& x, double beta, double threshold) {
  if (amp::Cast cast{"softplus", x}) return softplus(cast(x), beta, threshold);  // Note [Autocast]
  Tensor out = float_unary("softplus", UnaryOp::Softplus, x, beta, threshold);
  // d/dx = sigmoid(beta * x), or 1 where the forward returned x itself (torch's rule)
  return record_unary("SoftplusBackward", out, x, {x},
                      [beta, threshold](const Tensor& g, const TensorList& s) {
                        Tensor bx = s[0] * beta;
                        Tensor linear = bx > wrap(threshold, bx.dtype(), bx.device());
                        return where(linear, g, g * sigmoid(bx));
                      });
}

Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max) {
  check_inputs("clamp", {&x});
  OCTO_CHECK_VALUE(min || max, "clamp: at least one of 'min' or 'max' must be given");
  OCTO_CHECK_VALUE(x.dtype() != kBool, "clamp: not supported for bool tensors");
  DType dt = x.dtype();
  if (min) dt = result_type(dt, *min);
  if (max) dt = result_type(dt, *max);
  const double inf = std::numeric_limits<double>::infinity();
  Tensor out = raw_unary(UnaryOp::Clamp, convert_raw(x, dt), min.value_or(Scalar(-inf)),
                         max.value_or(Scalar(inf)));
  Input ix(x);
  return autograd::record(
      "ClampBackward", out, {x}, {x},
      [ix, min, max](const TensorList& g, const TensorList& s) -> TensorList {
        return {ix.grad([&] {  // passes where min <= x <= max
          Tensor pass = ones(s[0].sizes(), {.dtype = kBool, .device = s[0].device()});
          if (min) pass = logical_and(pass, s[0] >= wrap(*min, s[0].dtype(), s[0].device()));
          if (max) pass = logical_and(pass, s[0] <= wrap(*max, s[0].dtype(), s[0].device()));
          return where(pass, g[0], zeros({}, g[0].options()));
        })};
      });
}
Tensor clamp_min(const Tensor& x, Scalar min) { return clamp(x, min, std::nullopt); }
Tensor clamp_max(const Tensor& x, Scalar max) { return clamp(x, std::nullopt, max); }

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  check_inputs("where", {&cond, &a, &b});
  OCTO_CHECK_VALUE(cond.dtype() == kBool, "where: expected condition to be a bool tensor, got ",
                   cond.dtype());
  DType dt = result_type(a, b);
  Shape shape =
      broadcast_impl(cond.sizes(), broadcast_impl(a.sizes(), b.sizes(), "where"), "where");
  Tensor out = detail::make_empty(shape, dt, a.device());
  if (out.numel() > 0) {
    kernels::backend(a.device())
        .where(out.arg(), broadcast_view(cond, shape).arg(),
               broadcast_view(convert_raw(a, dt), shape).arg(),
               broadcast_view(convert_raw(b, dt), shape).arg());
  }
  Input ia(a), ib(b);
  return autograd::record("WhereBackward", out, {a, b}, {cond},
                          [ia, ib](const TensorList& g, const TensorList& s) -> TensorList {
                            Tensor zero = zeros({}, g[0].options());
                            return {ia.grad([&] { return where(s[0], g[0], zero); }),
                                    ib.grad([&] { return where(s[0], zero, g[0]); })};
                          });
}

// --- comparisons and logic -----------------------------------------------------------------------

Tensor eq(const Tensor& a, const Tensor& b) { return compare("eq", BinaryOp::Eq, a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return compare("ne", BinaryOp::Ne, a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return compare("lt", BinaryOp::Lt, a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return compare("le", BinaryOp::Le, a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return compare("gt", BinaryOp::Gt, a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return compare("ge", BinaryOp::Ge, a, b); }
Tensor logical_and(const Tensor& a, const Tensor& b) {
  return compare("logical_and", BinaryOp::LogicalAnd, a, b);
}
Tensor logical_or(const Tensor& a, const Tensor& b) {
  return compare("logical_or", BinaryOp::LogicalOr, a, b);
}
Tensor logical_not(const Tensor& x) {
  check_inputs("logical_not", {&x});
  return raw_unary(UnaryOp::LogicalNot, x);
}
Tensor operator==(const Tensor& a, const Tensor& b) { return eq(a, b); }
Tensor operator!=(const Tensor& a, const Tensor& b) { return ne(a, b); }
Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }
Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol) {
  check_inputs("allclose", {&a, &b});
  if (a.sizes() != b.sizes()) return false;
  std::vector<double> va = a.to_vector<double>(), vb = b.to_vector<double>();
  for (size_t i = 0; i < va.size(); ++i) {
    if (va[i] == vb[i]) continue;  // infinities of the same sign
    if (!(std::fabs(va[i] - vb[i]) <= atol + rtol * std::fabs(vb[i]))) return false;
  }
  return true;
}

}  // namespace octo
