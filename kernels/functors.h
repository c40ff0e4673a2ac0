// Elementwise math written once as host-device functors, shared by the CPU and CUDA backends.
//
// Each UnaryOp / BinaryOp has one functor templated on the scalar type T; its result type is T,
// or bool for comparisons, logical ops and LogicalNot. visit_unary / visit_binary map a runtime op
// to its functor and call a generic lambda with it, so both backends share the op -> functor
// mapping and instantiate one loop per (dtype, op):
//
//   visit_binary<float>(op, alpha, [&](auto f) { launch(f, out, a, b); });  // false: unsupported
//
// Only CUDA-device-safe code here: <cmath> functions on float/double (nvcc maps std::exp & co. to
// its device math library), no std:: algorithms, no exceptions. Which dtypes an op supports:
//   float/double : everything;
//   int64/int32/uint8 : Neg Abs Sign Square Relu Floor Ceil Round Clamp AddScalar MulScalar
//                       PowScalar, Add Sub Mul Pow Maximum Minimum, comparisons, logic;
//   bool : LogicalNot, Add (or) Mul (and) Maximum Minimum, comparisons, logic.
// Backends visit float16/bfloat16 tensors with T = float (load, compute in float, store).
// The per-element random transforms (uniform, normal, bernoulli, randint over Philox) are at the
// end, for the same reason: CPU and CUDA draw identical streams for identical counters.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "core/macros.h"
#include "core/philox.h"
#include "core/scalar.h"
#include "kernels/op_kinds.h"

namespace octo::kernels {

namespace fn {

template <typename T>
inline constexpr bool kFloat = std::is_floating_point_v<T>;
template <typename T>
inline constexpr bool kBool = std::is_same_v<T, bool>;
template <typename T>
inline constexpr bool kInt = std::is_integral_v<T> && !kBool<T>;

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
    if (e & 1) result = static_cast<T>(result * x);
    x = static_cast<T>(x * x);
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

OCTO_UNARY_FUNCTOR(Neg, return static_cast<T>(-x))
OCTO_UNARY_FUNCTOR(Abs, return is_negative(x) ? static_cast<T>(-x) : x)
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
OCTO_UNARY_FUNCTOR(Square, return static_cast<T>(x * x))
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
  OCTO_HOST_DEVICE T operator()(T x) const { return x < T(0) ? x * slope : x; }
};
template <typename T>
struct PowScalar {
  T e;
  int64_t ie;  // the exponent for integer T
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
  OCTO_HOST_DEVICE T operator()(T x) const {  // min(max(x, lo), hi), as torch.clamp; NaN stays
    T y = x < lo ? lo : x;
    return y > hi ? hi : y;
  }
};
template <typename T>
struct AddScalar {
  T s;
  OCTO_HOST_DEVICE T operator()(T x) const { return static_cast<T>(x + s); }
};
template <typename T>
struct MulScalar {
  T s;
  OCTO_HOST_DEVICE T operator()(T x) const { return static_cast<T>(x * s); }
};

// --- binary ------------------------------------------------------------------------------------
#define OCTO_BINARY_FUNCTOR(Name, R, expr)                  \
  template <typename T>                                     \
  struct Name {                                             \
    OCTO_HOST_DEVICE R operator()(T a, T b) const { expr; } \
  };

OCTO_BINARY_FUNCTOR(Add, T, return static_cast<T>(a + b))
OCTO_BINARY_FUNCTOR(Sub, T, return static_cast<T>(a - b))
OCTO_BINARY_FUNCTOR(
    Mul, T, if constexpr (kBool<T>) { return a && b; } else { return static_cast<T>(a * b); })
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
// Backward helpers: a = incoming gradient, b = the saved tensor (see op_kinds.h).
OCTO_BINARY_FUNCTOR(ReluBackward, T, return b > T(0) ? a : T(0))
OCTO_BINARY_FUNCTOR(GeluBackward, T, return a * (normal_cdf(b) + b * normal_pdf(b)))
OCTO_BINARY_FUNCTOR(SiluBackward, T, T s = sigmoid(b); return a * s * (T(1) + b * (T(1) - s)))
OCTO_BINARY_FUNCTOR(SigmoidBackward, T, return a * b * (T(1) - b))
OCTO_BINARY_FUNCTOR(TanhBackward, T, return a * (T(1) - b * b))
#undef OCTO_BINARY_FUNCTOR

template <typename T>
struct LeakyReluBackward {
  T slope;
  OCTO_HOST_DEVICE T operator()(T a, T b) const { return b > T(0) ? a : a * slope; }
};

/// out = cond ? a : b.
template <typename T>
struct Where {
  OCTO_HOST_DEVICE T operator()(bool c, T a, T b) const { return c ? a : b; }
};

}  // namespace fn

// --- op -> functor dispatch (host code; both backends call it) ---------------------------------

/// Calls f(functor) for `op` on scalar type T and returns true, or returns false without calling
/// f when the op is not defined for T (the caller reports the error).
template <typename T, typename F>
bool visit_unary(UnaryOp op, Scalar alpha, Scalar beta, F&& f) {
  using namespace fn;
  constexpr bool flt = kFloat<T>, num = !kBool<T>;
#define OCTO_CASE_(Op, ok, ...) \
  case UnaryOp::Op:             \
    if constexpr (ok) {         \
      f(__VA_ARGS__);           \
      return true;              \
    } else {                    \
      return false;             \
    }
  switch (op) {
    OCTO_CASE_(Neg, num, Neg<T>{})
    OCTO_CASE_(Abs, num, Abs<T>{})
    OCTO_CASE_(Sign, num, Sign<T>{})
    OCTO_CASE_(Exp, flt, Exp<T>{})
    OCTO_CASE_(Log, flt, Log<T>{})
    OCTO_CASE_(Log1p, flt, Log1p<T>{})
    OCTO_CASE_(Expm1, flt, Expm1<T>{})
    OCTO_CASE_(Sqrt, flt, Sqrt<T>{})
    OCTO_CASE_(Rsqrt, flt, Rsqrt<T>{})
    OCTO_CASE_(Sin, flt, Sin<T>{})
    OCTO_CASE_(Cos, flt, Cos<T>{})
    OCTO_CASE_(Tanh, flt, Tanh<T>{})
    OCTO_CASE_(Sigmoid, flt, Sigmoid<T>{})
    OCTO_CASE_(Relu, num, Relu<T>{})
    OCTO_CASE_(Gelu, flt, Gelu<T>{})
    OCTO_CASE_(Silu, flt, Silu<T>{})
    OCTO_CASE_(Square, num, Square<T>{})
    OCTO_CASE_(Reciprocal, flt, Reciprocal<T>{})
    OCTO_CASE_(Floor, num, Floor<T>{})
    OCTO_CASE_(Ceil, num, Ceil<T>{})
    OCTO_CASE_(Round, num, Round<T>{})
    OCTO_CASE_(Erf, flt, Erf<T>{})
    OCTO_CASE_(LogicalNot, true, LogicalNot<T>{})
    OCTO_CASE_(LeakyRelu, flt, LeakyRelu<T>{alpha.to<T>()})
    OCTO_CASE_(PowScalar, num, PowScalar<T>{saturate<T>(alpha), alpha.to_int()})
    OCTO_CASE_(Clamp, num, Clamp<T>{saturate<T>(alpha), saturate<T>(beta)})
    OCTO_CASE_(AddScalar, num, AddScalar<T>{alpha.to<T>()})
    OCTO_CASE_(MulScalar, num, MulScalar<T>{alpha.to<T>()})
  }
#undef OCTO_CASE_
  return false;
}

/// The same for binary ops; alpha is LeakyReluBackward's slope.
template <typename T, typename F>
bool visit_binary(BinaryOp op, Scalar alpha, F&& f) {
  using namespace fn;
  constexpr bool flt = kFloat<T>, num = !kBool<T>;
#define OCTO_CASE_(Op, ok, ...) \
  case BinaryOp::Op:            \
    if constexpr (ok) {         \
      f(__VA_ARGS__);           \
      return true;              \
    } else {                    \
      return false;             \
    }
  switch (op) {
    OCTO_CASE_(Add, true, Add<T>{})
    OCTO_CASE_(Sub, num, Sub<T>{})
    OCTO_CASE_(Mul, true, Mul<T>{})
    OCTO_CASE_(Div, flt, Div<T>{})
    OCTO_CASE_(Pow, num, Pow<T>{})
    OCTO_CASE_(Maximum, true, Maximum<T>{})
    OCTO_CASE_(Minimum, true, Minimum<T>{})
    OCTO_CASE_(Eq, true, Eq<T>{})
    OCTO_CASE_(Ne, true, Ne<T>{})
    OCTO_CASE_(Lt, true, Lt<T>{})
    OCTO_CASE_(Le, true, Le<T>{})
    OCTO_CASE_(Gt, true, Gt<T>{})
    OCTO_CASE_(Ge, true, Ge<T>{})
    OCTO_CASE_(LogicalAnd, true, LogicalAnd<T>{})
    OCTO_CASE_(LogicalOr, true, LogicalOr<T>{})
    OCTO_CASE_(ReluBackward, flt, ReluBackward<T>{})
    OCTO_CASE_(GeluBackward, flt, GeluBackward<T>{})
    OCTO_CASE_(SiluBackward, flt, SiluBackward<T>{})
    OCTO_CASE_(SigmoidBackward, flt, SigmoidBackward<T>{})
    OCTO_CASE_(TanhBackward, flt, TanhBackward<T>{})
    OCTO_CASE_(LeakyReluBackward, flt, LeakyReluBackward<T>{alpha.to<T>()})
  }
#undef OCTO_CASE_
  return false;
}

/// True for binary ops whose output is bool (comparisons and logic).
OCTO_HOST_DEVICE inline bool binary_returns_bool(BinaryOp op) {
  return op >= BinaryOp::Eq && op <= BinaryOp::LogicalOr;
}

/// Names for error messages.
inline const char* op_name(UnaryOp op) {
  constexpr const char* kNames[] = {
      "neg",  "abs",         "sign",       "exp",        "log",   "log1p",   "expm1",
      "sqrt", "rsqrt",       "sin",        "cos",        "tanh",  "sigmoid", "relu",
      "gelu", "silu",        "square",     "reciprocal", "floor", "ceil",    "round",
      "erf",  "logical_not", "leaky_relu", "pow",        "clamp", "add",     "mul"};
  return kNames[static_cast<int>(op)];
}
inline const char* op_name(BinaryOp op) {
  constexpr const char* kNames[] = {"add",
                                    "sub",
                                    "mul",
                                    "div",
                                    "pow",
                                    "maximum",
                                    "minimum",
                                    "eq",
                                    "ne",
                                    "lt",
                                    "le",
                                    "gt",
                                    "ge",
                                    "logical_and",
                                    "logical_or",
                                    "relu_backward",
                                    "gelu_backward",
                                    "silu_backward",
                                    "sigmoid_backward",
                                    "tanh_backward",
                                    "leaky_relu_backward"};
  return kNames[static_cast<int>(op)];
}

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
    return static_cast<T>(low + static_cast<int64_t>(bits % range));
  }
};

}  // namespace octo::kernels
