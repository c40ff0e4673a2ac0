// The elementwise op table: every UnaryOp / BinaryOp, its name and its math, in one place.
//
// Note [The op table]
// Each elementwise op is one entry X(Kind, "name", dtypes) in OCTO_UNARY_OPS, OCTO_BINARY_OPS or
// OCTO_BINARY_BACKWARD_OPS below, plus its functor fn::Kind<T> further down. Everything else is
// generated from the lists: the UnaryOp / BinaryOp enums, op_name(), unary_returns_bool() /
// binary_returns_bool(), and the switches of visit_unary / visit_binary that both backends use to
// map a runtime op to its functor. A list entry without a functor does not compile (the generated
// switch names fn::Kind<T>); a functor without an entry is never called. `dtypes` says which
// scalar types the op is defined for:
//   Any      : every dtype, bool included (logic, comparisons, Add = or, Mul = and, max/min);
//   Numeric  : every dtype but bool;
//   Floating : float/double (and float16/bfloat16, which the backends compute in float).
// Other dtypes get "op: unsupported dtype ..." from the backend. A functor returns T, or bool for
// comparisons, logic and LogicalNot (the result dtype follows). Ops with parameters (alpha, beta
// of Backend::unary / binary) give their functor a host-only `static Kind make(Scalar alpha,
// Scalar beta)`; the others are built as Kind<T>{}.
//
// Only CUDA-device-safe code in functors: <cmath> functions on float/double (nvcc maps std::exp &
// co. to its device math library), no std:: algorithms, no exceptions. The CPU backend instantiates
// them in kernels/cpu/elementwise.cpp, the CUDA backend in kernels/cuda/elementwise.cu, so both
// run the same math:
//
//   visit_binary<float>(op, alpha, [&](auto f) { launch(f, out, a, b); });  // false: unsupported
//
// The per-element random transforms (uniform, normal, bernoulli, randint over Philox) are at the
// end, for the same reason: CPU and CUDA draw identical streams for identical counters.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "core/half.h"
#include "core/macros.h"
#include "core/philox.h"
#include "core/scalar.h"

// --- the table ---------------------------------------------------------------------------------
// X(Kind, "name", dtypes). `alpha` / `beta` parameters are noted where used.

#define OCTO_UNARY_OPS(X)                                                                     \
  X(Neg, "neg", Numeric)                                                                      \
  X(Abs, "abs", Numeric)                                                                      \
  X(Sign, "sign", Numeric)                                                                    \
  X(Exp, "exp", Floating)                                                                     \
  X(Log, "log", Floating)                                                                     \
  X(Log1p, "log1p", Floating)                                                                 \
  X(Expm1, "expm1", Floating)                                                                 \
  X(Sqrt, "sqrt", Floating)                                                                   \
  X(Rsqrt, "rsqrt", Floating)                                                                 \
  X(Sin, "sin", Floating)                                                                     \
  X(Cos, "cos", Floating)                                                                     \
  X(Tanh, "tanh", Floating)                                                                   \
  X(Sigmoid, "sigmoid", Floating)                                                             \
  X(Relu, "relu", Numeric)                                                                    \
  X(Gelu, "gelu", Floating) /* exact: x * Phi(x), Phi the normal CDF, as torch's default */   \
  X(Silu, "silu", Floating)                                                                   \
  X(Square, "square", Numeric)                                                                \
  X(Reciprocal, "reciprocal", Floating)                                                       \
  X(Floor, "floor", Numeric)                                                                  \
  X(Ceil, "ceil", Numeric)                                                                    \
  X(Round, "round", Numeric)                                                                  \
  X(Erf, "erf", Floating)                                                                     \
  X(LogicalNot, "logical_not", Any)                                                           \
  X(LeakyRelu, "leaky_relu", Floating) /* alpha = negative slope */                           \
  X(PowScalar, "pow", Numeric)         /* x ** alpha */                                       \
  X(Clamp, "clamp", Numeric)           /* to [alpha, beta]; a missing bound is -inf / +inf */ \
  X(AddScalar, "add", Numeric)         /* x + alpha */                                        \
  X(MulScalar, "mul", Numeric)         /* x * alpha */                                        \
  X(Affine, "affine", Numeric)         /* x * alpha + beta (data::normalize, in one pass) */  \
  X(Softplus, "softplus", Floating)    /* alpha = beta, beta = threshold */

/// out = f(a, b), a and b already broadcast to out's shape (stride-0 dims).
#define OCTO_BINARY_OPS(X)          \
  X(Add, "add", Any)                \
  X(Sub, "sub", Numeric)            \
  X(Mul, "mul", Any)                \
  X(Div, "div", Floating)           \
  X(Pow, "pow", Numeric)            \
  X(Maximum, "maximum", Any)        \
  X(Minimum, "minimum", Any)        \
  X(Eq, "eq", Any)                  \
  X(Ne, "ne", Any)                  \
  X(Lt, "lt", Any)                  \
  X(Le, "le", Any)                  \
  X(Gt, "gt", Any)                  \
  X(Ge, "ge", Any)                  \
  X(LogicalAnd, "logical_and", Any) \
  X(LogicalOr, "logical_or", Any)

/// Backward helpers f(grad, saved): a = the incoming gradient, b = the saved tensor.
#define OCTO_BINARY_BACKWARD_OPS(X)                                                \
  X(ReluBackward, "relu_backward", Floating)            /* b = relu's input */     \
  X(GeluBackward, "gelu_backward", Floating)            /* b = gelu's input */     \
  X(SiluBackward, "silu_backward", Floating)            /* b = silu's input */     \
  X(SigmoidBackward, "sigmoid_backward", Floating)      /* b = sigmoid's output */ \
  X(TanhBackward, "tanh_backward", Floating)            /* b = tanh's output */    \
  X(LeakyReluBackward, "leaky_relu_backward", Floating) /* b = input, alpha = slope */

namespace octo::kernels {

#define OCTO_OP_ENUM_(Kind, name, dtypes) Kind,
/// Elementwise unary primitives, out = f(in) (Note [The op table]).
enum class UnaryOp : int8_t { OCTO_UNARY_OPS(OCTO_OP_ENUM_) };
/// Elementwise binary primitives, out = f(a, b), then the backward helpers.
enum class BinaryOp : int8_t {
  OCTO_BINARY_OPS(OCTO_OP_ENUM_) OCTO_BINARY_BACKWARD_OPS(OCTO_OP_ENUM_)
};
#undef OCTO_OP_ENUM_

namespace fn {

/// The dtypes column of the table.
enum class OpDTypes : int8_t { Any, Numeric, Floating };

template <typename T>
inline constexpr bool kFloat = std::is_floating_point_v<T>;
template <typename T>
inline constexpr bool kBool = std::is_same_v<T, bool>;
template <typename T>
inline constexpr bool kInt = std::is_integral_v<T> && !kBool<T>;

/// Whether an op of class D is defined for scalar type T.
template <OpDTypes D, typename T>
inline constexpr bool kSupports = D == OpDTypes::Any || (D == OpDTypes::Numeric && !kBool<T>) ||
                                  (D == OpDTypes::Floating && kFloat<T>);

/// The functor F built from the op's parameters: F::make(alpha, beta) when F has one, else F{}.
template <typename F>
F make_functor(Scalar alpha, Scalar beta) {
  if constexpr (requires { F::make(alpha, beta); }) {
    return F::make(alpha, beta);
  } else {
    return F{};
  }
}

template <typename T>
OCTO_HOST_DEVICE inline bool is_nan(T x) {
  if constexpr (kFloat<T>) {
    return x != x;
  } else {
    return false;
  }
}
template <typename T>
OCTO_HOST_DEVICE inline bool is_negative(T x) {
  if constexpr (std::is_unsigned_v<T>) {
    return false;
  } else {
    return x < T(0);
  }
}

// Note [Integer overflow wraps]
// Integer tensors wrap around on overflow (two's complement), as PyTorch's and NumPy's do:
// int64 max + 1 is int64 min. Signed overflow is undefined behaviour in C++ -- UBSan reports it and
// the optimiser may assume it never happens -- so the arithmetic functors compute a signed integer
// T in the unsigned type of its width (at least unsigned int, so that nothing promotes back to a
// signed int), where wrapping is defined, and convert back, which C++20 defines as modular.
// Floats and bool compute as themselves.
template <typename T, bool = kInt<T>>
struct Wrapping {
  using type = T;
};
template <typename T>
struct Wrapping<T, true> {
  using type =
      std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;
};
template <typename T>
OCTO_HOST_DEVICE inline T wrap_add(T a, T b) {
  using W = typename Wrapping<T>::type;
  return static_cast<T>(static_cast<W>(a) + static_cast<W>(b));
}
template <typename T>
OCTO_HOST_DEVICE inline T wrap_sub(T a, T b) {
  using W = typename Wrapping<T>::type;
  return static_cast<T>(static_cast<W>(a) - static_cast<W>(b));
}
template <typename T>
OCTO_HOST_DEVICE inline T wrap_mul(T a, T b) {
  using W = typename Wrapping<T>::type;
  return static_cast<T>(static_cast<W>(a) * static_cast<W>(b));
}
/// -x; for floats the sign flip itself (0 - x would turn -0 into +0).
template <typename T>
OCTO_HOST_DEVICE inline T wrap_neg(T x) {
  if constexpr (kInt<T>) {
    return wrap_sub(T(0), x);
  } else {
    return static_cast<T>(-x);
  }
}

/// x ** e for integers (e < 0 gives 1 / x^|e| truncated: 1, +-1 or 0, as integer division).
template <typename T>
OCTO_HOST_DEVICE inline T int_pow(T x, int64_t e) {
  if (e < 0) {
    if (x == T(1)) return T(1);
    if constexpr (std::is_signed_v<T>) {
      if (x == T(-1)) return (e & 1) ? T(-1) : T(1);
    }
    return T(0);
  }
  T result = T(1);
  while (e) {
    if (e & 1) result = wrap_mul(result, x);
    x = wrap_mul(x, x);
    e >>= 1;
  }
  return result;
}

/// A Scalar as T, saturating for integer T (clamp bounds may be +-inf or out of T's range).
/// Host only: the dispatch below converts parameters before a kernel is launched.
template <typename T>
inline T saturate(Scalar s) {
  if constexpr (kInt<T>) {
    const double lo = static_cast<double>(std::numeric_limits<T>::lowest());
    const double hi = static_cast<double>(std::numeric_limits<T>::max());
    if (!s.is_integral()) {
      double d = s.to_double();
      if (d != d) return T(0);
      if (d <= lo) return std::numeric_limits<T>::lowest();
      if (d >= hi) return std::numeric_limits<T>::max();
      return static_cast<T>(d);
    }
    int64_t v = s.to_int();
    if (static_cast<double>(v) <= lo) return std::numeric_limits<T>::lowest();
    if (static_cast<double>(v) >= hi) return std::numeric_limits<T>::max();
    return static_cast<T>(v);
  } else {
    return s.to<T>();
  }
}

template <typename T>
OCTO_HOST_DEVICE inline T sigmoid(T x) {
  using std::exp;
  if (x >= T(0)) return T(1) / (T(1) + exp(-x));
  T e = exp(x);
  return e / (T(1) + e);
}
/// The standard normal CDF and density.
template <typename T>
OCTO_HOST_DEVICE inline T normal_cdf(T x) {
  using std::erf;
  return T(0.5) * (T(1) + erf(x * T(0.70710678118654752440)));
}
template <typename T>
OCTO_HOST_DEVICE inline T normal_pdf(T x) {
  using std::exp;
  return T(0.39894228040143267794) * exp(T(-0.5) * x * x);
}

// --- unary -------------------------------------------------------------------------------------
#define OCTO_UNARY_FUNCTOR(Name, expr)                 \
  template <typename T>                                \
  struct Name {                                        \
    OCTO_HOST_DEVICE T operator()(T x) const { expr; } \
  };

OCTO_UNARY_FUNCTOR(Neg, return wrap_neg(x))
OCTO_UNARY_FUNCTOR(Abs, return is_negative(x) ? wrap_neg(x) : x)  // abs(int min) is int min
OCTO_UNARY_FUNCTOR(Sign, return is_nan(x) ? x : static_cast<T>(int(T(0) < x) - int(is_negative(x))))
OCTO_UNARY_FUNCTOR(Exp, using std::exp; return exp(x))
OCTO_UNARY_FUNCTOR(Log, using std::log; return log(x))
OCTO_UNARY_FUNCTOR(Log1p, using std::log1p; return log1p(x))
OCTO_UNARY_FUNCTOR(Expm1, using std::expm1; return expm1(x))
OCTO_UNARY_FUNCTOR(Sqrt, using std::sqrt; return sqrt(x))
OCTO_UNARY_FUNCTOR(Rsqrt, using std::sqrt; return T(1) / sqrt(x))
OCTO_UNARY_FUNCTOR(Sin, using std::sin; return sin(x))
OCTO_UNARY_FUNCTOR(Cos, using std::cos; return cos(x))
OCTO_UNARY_FUNCTOR(Tanh, using std::tanh; return tanh(x))
OCTO_UNARY_FUNCTOR(Sigmoid, return sigmoid(x))
OCTO_UNARY_FUNCTOR(Relu, return is_negative(x) ? T(0) : x)  // NaN stays NaN
OCTO_UNARY_FUNCTOR(Gelu, return x * normal_cdf(x))
OCTO_UNARY_FUNCTOR(Silu, return x * sigmoid(x))
OCTO_UNARY_FUNCTOR(Square, return wrap_mul(x, x))
OCTO_UNARY_FUNCTOR(Reciprocal, return T(1) / x)
OCTO_UNARY_FUNCTOR(
    Floor,
    if constexpr (kFloat<T>) {
      using std::floor;
      return floor(x);
    } else { return x; })
OCTO_UNARY_FUNCTOR(
    Ceil,
    if constexpr (kFloat<T>) {
      using std::ceil;
      return ceil(x);
    } else { return x; })
// nearbyint rounds half to even in the default rounding mode (torch.round).
OCTO_UNARY_FUNCTOR(
    Round,
    if constexpr (kFloat<T>) {
      using std::nearbyint;
      return nearbyint(x);
    } else { return x; })
OCTO_UNARY_FUNCTOR(Erf, using std::erf; return erf(x))
#undef OCTO_UNARY_FUNCTOR

template <typename T>
struct LogicalNot {
  OCTO_HOST_DEVICE bool operator()(T x) const { return !(x != T(0)); }
};
template <typename T>
struct LeakyRelu {
  T slope;
  static LeakyRelu make(Scalar alpha, Scalar) { return {alpha.to<T>()}; }
  OCTO_HOST_DEVICE T operator()(T x) const { return x < T(0) ? x * slope : x; }
};
template <typename T>
struct PowScalar {
  T e;
  int64_t ie;  // the exponent for integer T
  static PowScalar make(Scalar alpha, Scalar) { return {saturate<T>(alpha), alpha.to_int()}; }
  OCTO_HOST_DEVICE T operator()(T x) const {
    if constexpr (kFloat<T>) {
      using std::pow;
      if (e == T(2)) return x * x;
      if (e == T(0.5)) return std::sqrt(x);
      return pow(x, e);
    } else {
      return int_pow(x, ie);
    }
  }
};
template <typename T>
struct Clamp {
  T lo, hi;
  static Clamp make(Scalar alpha, Scalar beta) { return {saturate<T>(alpha), saturate<T>(beta)}; }
  OCTO_HOST_DEVICE T operator()(T x) const {  // min(max(x, lo), hi), as torch.clamp; NaN stays
    T y = x < lo ? lo : x;
    return y > hi ? hi : y;
  }
};
/// torch.nn.functional.softplus: x where beta * x > threshold, else log1p(exp(beta * x)) / beta.
template <typename T>
struct Softplus {
  T beta, threshold;
  static Softplus make(Scalar alpha, Scalar beta) { return {alpha.to<T>(), beta.to<T>()}; }
  OCTO_HOST_DEVICE T operator()(T x) const {
    using std::exp;
    using std::log1p;
    const T bx = x * beta;
    return bx > threshold ? x : log1p(exp(bx)) / beta;
  }
};
template <typename T>
struct AddScalar {
  T s;
  static AddScalar make(Scalar alpha, Scalar) { return {alpha.to<T>()}; }
  OCTO_HOST_DEVICE T operator()(T x) const { return wrap_add(x, s); }
};
template <typename T>
struct MulScalar {
  T s;
  static MulScalar make(Scalar alpha, Scalar) { return {alpha.to<T>()}; }
  OCTO_HOST_DEVICE T operator()(T x) const { return wrap_mul(x, s); }
};
template <typename T>
struct Affine {
  T scale, shift;
  static Affine make(Scalar alpha, Scalar beta) { return {alpha.to<T>(), beta.to<T>()}; }
  OCTO_HOST_DEVICE T operator()(T x) const { return wrap_add(wrap_mul(x, scale), shift); }
};

// --- binary ------------------------------------------------------------------------------------
#define OCTO_BINARY_FUNCTOR(Name, R, expr)                  \
  template <typename T>                                     \
  struct Name {                                             \
    OCTO_HOST_DEVICE R operator()(T a, T b) const { expr; } \
  };

OCTO_BINARY_FUNCTOR(Add, T, return wrap_add(a, b))  // Note [Integer overflow wraps]
OCTO_BINARY_FUNCTOR(Sub, T, return wrap_sub(a, b))
OCTO_BINARY_FUNCTOR(
    Mul, T, if constexpr (kBool<T>) { return a && b; } else { return wrap_mul(a, b); })
OCTO_BINARY_FUNCTOR(Div, T, return a / b)
OCTO_BINARY_FUNCTOR(
    Pow, T,
    if constexpr (kFloat<T>) {
      using std::pow;
      return pow(a, b);
    } else { return int_pow(a, static_cast<int64_t>(b)); })
// NaN propagates, as torch.maximum / torch.minimum.
OCTO_BINARY_FUNCTOR(Maximum, T, return is_nan(a) ? a : (is_nan(b) ? b : (a > b ? a : b)))
OCTO_BINARY_FUNCTOR(Minimum, T, return is_nan(a) ? a : (is_nan(b) ? b : (a < b ? a : b)))
OCTO_BINARY_FUNCTOR(Eq, bool, return a == b)
OCTO_BINARY_FUNCTOR(Ne, bool, return a != b)
OCTO_BINARY_FUNCTOR(Lt, bool, return a < b)
OCTO_BINARY_FUNCTOR(Le, bool, return a <= b)
OCTO_BINARY_FUNCTOR(Gt, bool, return a > b)
OCTO_BINARY_FUNCTOR(Ge, bool, return a >= b)
OCTO_BINARY_FUNCTOR(LogicalAnd, bool, return (a != T(0)) && (b != T(0)))
OCTO_BINARY_FUNCTOR(LogicalOr, bool, return (a != T(0)) || (b != T(0)))
// Backward helpers: a = incoming gradient, b = the saved tensor.
OCTO_BINARY_FUNCTOR(ReluBackward, T, return b > T(0) ? a : T(0))
OCTO_BINARY_FUNCTOR(GeluBackward, T, return a * (normal_cdf(b) + b * normal_pdf(b)))
OCTO_BINARY_FUNCTOR(SiluBackward, T, T s = sigmoid(b); return a * s * (T(1) + b * (T(1) - s)))
OCTO_BINARY_FUNCTOR(SigmoidBackward, T, return a * b * (T(1) - b))
OCTO_BINARY_FUNCTOR(TanhBackward, T, return a * (T(1) - b * b))
#undef OCTO_BINARY_FUNCTOR

template <typename T>
struct LeakyReluBackward {
  T slope;
  static LeakyReluBackward make(Scalar alpha, Scalar) { return {alpha.to<T>()}; }
  OCTO_HOST_DEVICE T operator()(T a, T b) const { return b > T(0) ? a : a * slope; }
};

/// out = cond ? a : b.
template <typename T>
struct Where {
  OCTO_HOST_DEVICE T operator()(bool c, T a, T b) const { return c ? a : b; }
};

}  // namespace fn

/// The type an elementwise kernel computes storage type T in: float for the 16-bit storage types
/// (Note [16-bit kernels]), T itself otherwise. Both backends load T, convert to compute_t<T>, call
/// the functor visit_unary<compute_t<T>> / visit_binary<compute_t<T>> gives, and round the result
/// back to T once.
template <typename T>
using compute_t =
    std::conditional_t<std::is_same_v<T, BFloat16> || std::is_same_v<T, Float16>, float, T>;

/// The output storage type of a functor returning R over storage type T: T, or bool for
/// comparisons and logic.
template <typename T, typename R>
using out_t = std::conditional_t<std::is_same_v<R, bool>, bool, T>;

// --- generated from the table (host code; both backends call it) -------------------------------

/// Calls f(functor) for `op` on scalar type T and returns true, or returns false without calling
/// f when the op is not defined for T (the caller reports the error).
template <typename T, typename F>
bool visit_unary(UnaryOp op, Scalar alpha, Scalar beta, F&& f) {
#define OCTO_CASE_(Kind, name, dtypes)                      \
  case UnaryOp::Kind:                                       \
    if constexpr (fn::kSupports<fn::OpDTypes::dtypes, T>) { \
      f(fn::make_functor<fn::Kind<T>>(alpha, beta));        \
      return true;                                          \
    } else {                                                \
      return false;                                         \
    }
  switch (op) { OCTO_UNARY_OPS(OCTO_CASE_) }
#undef OCTO_CASE_
  return false;
}

/// The same for binary ops; alpha is LeakyReluBackward's slope.
template <typename T, typename F>
bool visit_binary(BinaryOp op, Scalar alpha, F&& f) {
#define OCTO_CASE_(Kind, name, dtypes)                      \
  case BinaryOp::Kind:                                      \
    if constexpr (fn::kSupports<fn::OpDTypes::dtypes, T>) { \
      f(fn::make_functor<fn::Kind<T>>(alpha, Scalar()));    \
      return true;                                          \
    } else {                                                \
      return false;                                         \
    }
  switch (op) { OCTO_BINARY_OPS(OCTO_CASE_) OCTO_BINARY_BACKWARD_OPS(OCTO_CASE_) }
#undef OCTO_CASE_
  return false;
}

/// The op's name, as octo's function for it is called (error messages, the docs check).
constexpr const char* op_name(UnaryOp op) {
#define OCTO_CASE_(Kind, name, dtypes) \
  case UnaryOp::Kind:                  \
    return name;
  switch (op) { OCTO_UNARY_OPS(OCTO_CASE_) }
#undef OCTO_CASE_
  return "?";
}
constexpr const char* op_name(BinaryOp op) {
#define OCTO_CASE_(Kind, name, dtypes) \
  case BinaryOp::Kind:                 \
    return name;
  switch (op) { OCTO_BINARY_OPS(OCTO_CASE_) OCTO_BINARY_BACKWARD_OPS(OCTO_CASE_) }
#undef OCTO_CASE_
  return "?";
}

/// True for ops whose output is bool (comparisons, logic, LogicalNot): the functor returns bool.
constexpr bool unary_returns_bool(UnaryOp op) {
#define OCTO_CASE_(Kind, name, dtypes) \
  case UnaryOp::Kind:                  \
    return std::is_same_v<decltype(fn::Kind<float>{}(1.0f)), bool>;
  switch (op) { OCTO_UNARY_OPS(OCTO_CASE_) }
#undef OCTO_CASE_
  return false;
}
constexpr bool binary_returns_bool(BinaryOp op) {
#define OCTO_CASE_(Kind, name, dtypes) \
  case BinaryOp::Kind:                 \
    return std::is_same_v<decltype(fn::Kind<float>{}(1.0f, 1.0f)), bool>;
  switch (op) { OCTO_BINARY_OPS(OCTO_CASE_) OCTO_BINARY_BACKWARD_OPS(OCTO_CASE_) }
#undef OCTO_CASE_
  return false;
}

namespace detail {
constexpr bool same_name(const char* a, const char* b) {
  while (*a != 0 && *a == *b) ++a, ++b;
  return *a == *b;
}
template <size_t N>
constexpr bool distinct_names(const char* const (&names)[N]) {
  for (size_t i = 0; i < N; ++i)
    for (size_t j = i + 1; j < N; ++j)
      if (same_name(names[i], names[j])) return false;
  return true;
}
#define OCTO_NAME_(Kind, name, dtypes) name,
inline constexpr const char* kUnaryNames[] = {OCTO_UNARY_OPS(OCTO_NAME_)};
inline constexpr const char* kBinaryNames[] = {OCTO_BINARY_OPS(OCTO_NAME_)
                                                   OCTO_BINARY_BACKWARD_OPS(OCTO_NAME_)};
#undef OCTO_NAME_
static_assert(distinct_names(kUnaryNames), "two entries of OCTO_UNARY_OPS share a name");
static_assert(distinct_names(kBinaryNames), "two entries of OCTO_BINARY_OPS share a name");
}  // namespace detail

// --- random transforms: element i draws Philox(seed)(offset + i, 0) ----------------------------

/// Uniform in [low, high): 24 random bits for float, 53 for double.
template <typename T>
struct UniformTransform {
  Philox gen;
  uint64_t offset;
  T low, high;
  OCTO_HOST_DEVICE T operator()(uint64_t i) const {
    uint32_t w[4];
    gen(offset + i, 0, w);
    T u;
    if constexpr (std::is_same_v<T, double>) {
      u = uniform_double(w[0], w[1]);
    } else {
      u = static_cast<T>(uniform_float(w[0]));
    }
    T r = low + u * (high - low);
    if (r >= high && high > low) {  // rounding can reach high; keep the interval half open
      using std::nextafter;
      r = nextafter(high, low);
    }
    return r;
  }
};

/// Normal(mean, std) by Box-Muller, using the cosine branch of one counter's words.
template <typename T>
struct NormalTransform {
  Philox gen;
  uint64_t offset;
  T mean, std;
  OCTO_HOST_DEVICE T operator()(uint64_t i) const {
    using std::cos;
    using std::log;
    using std::sqrt;
    uint32_t w[4];
    gen(offset + i, 0, w);
    T u1, u2;
    if constexpr (std::is_same_v<T, double>) {
      u1 = 1.0 - uniform_double(w[0], w[1]);  // (0, 1]: log is finite
      u2 = uniform_double(w[2], w[3]);
    } else {
      u1 = T(1) - static_cast<T>(uniform_float(w[0]));
      u2 = static_cast<T>(uniform_float(w[1]));
    }
    T radius = sqrt(T(-2) * log(u1));
    return mean + std * radius * cos(T(6.28318530717958647692) * u2);
  }
};

/// 1 with probability p, else 0 (53-bit uniform compared with p).
template <typename T>
struct BernoulliTransform {
  Philox gen;
  uint64_t offset;
  double p;
  OCTO_HOST_DEVICE T operator()(uint64_t i) const {
    uint32_t w[4];
    gen(offset + i, 0, w);
    return uniform_double(w[0], w[1]) < p ? T(1) : T(0);
  }
};

/// Integers uniform in [low, high) from 64 random bits (modulo bias < range / 2^64).
template <typename T>
struct RandintTransform {
  Philox gen;
  uint64_t offset;
  int64_t low;
  uint64_t range;
  OCTO_HOST_DEVICE T operator()(uint64_t i) const {
    uint32_t w[4];
    gen(offset + i, 0, w);
    uint64_t bits = (uint64_t(w[0]) << 32) | w[1];
    // In uint64, which wraps: low + (bits % range) may pass through values no int64 holds when
    // the range is wider than 2^63, though the sum itself lies in [low, high).
    return static_cast<T>(static_cast<int64_t>(static_cast<uint64_t>(low) + bits % range));
  }
};

}  // namespace octo::kernels
