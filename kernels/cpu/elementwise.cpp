// CPU elementwise kernels (unary, binary, where) over the shared functors of kernels/functors.h.
//
// Each kernel dispatches on dtype, maps the op to its functor (visit_unary/_binary) and runs
// it over cpu::strided_runs, which coalesces dims and splits the runs (whole rows, long rows in
// pieces: Note [Splitting long rows]) across threads. Inner runs get a contiguous fast path
// (and, for binary ops, one for a broadcast scalar operand) that the compiler can vectorise.
// float16/bfloat16 are stored as such and computed in float.
#include <type_traits>

#include "core/error.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/loops.h"
#include "kernels/elementwise_args.h"
#include "kernels/functors.h"

namespace octo::kernels {

namespace {

template <typename T>
inline T load(const char* p) {
  return *reinterpret_cast<const T*>(p);
}

/// out[i] = f(in[i]); T is the input storage type, O the output's (T, or bool for logical_not).
template <typename T, typename O, typename F>
void unary_loop(const TensorArg& out, const TensorArg& in, F f) {
  using C = compute_t<T>;
  cpu::strided_runs<2>({out, in}, [f](std::array<char*, 2> p, std::array<int64_t, 2> s, int64_t n) {
    constexpr int64_t kT = sizeof(T), kO = sizeof(O);
    if (s[0] == kO && s[1] == kT) {
      O* o = reinterpret_cast<O*>(p[0]);
      const T* x = reinterpret_cast<const T*>(p[1]);
      for (int64_t i = 0; i < n; ++i) o[i] = static_cast<O>(f(static_cast<C>(x[i])));
    } else {
      for (int64_t i = 0; i < n; ++i) {
        *reinterpret_cast<O*>(p[0] + i * s[0]) =
            static_cast<O>(f(static_cast<C>(load<T>(p[1] + i * s[1]))));
      }
    }
  });
}

/// out[i] = f(a[i], b[i]); O is the output storage type (T, or bool for comparisons).
template <typename T, typename O, typename F>
void binary_loop(const TensorArg& out, const TensorArg& a, const TensorArg& b, F f) {
  using C = compute_t<T>;
  cpu::strided_runs<3>({out, a, b}, [f](std::array<char*, 3> p, std::array<int64_t, 3> s,
                                        int64_t n) {
    constexpr int64_t kT = sizeof(T), kO = sizeof(O);
    O* o = reinterpret_cast<O*>(p[0]);
    const T* x = reinterpret_cast<const T*>(p[1]);
    const T* y = reinterpret_cast<const T*>(p[2]);
    if (s[0] == kO && s[1] == kT && s[2] == kT) {
      for (int64_t i = 0; i < n; ++i)
        o[i] = static_cast<O>(f(static_cast<C>(x[i]), static_cast<C>(y[i])));
    } else if (s[0] == kO && s[1] == kT && s[2] == 0) {  // b broadcast along the run
      const C yv = static_cast<C>(*y);
      for (int64_t i = 0; i < n; ++i) o[i] = static_cast<O>(f(static_cast<C>(x[i]), yv));
    } else if (s[0] == kO && s[1] == 0 && s[2] == kT) {  // a broadcast along the run
      const C xv = static_cast<C>(*x);
      for (int64_t i = 0; i < n; ++i) o[i] = static_cast<O>(f(xv, static_cast<C>(y[i])));
    } else {
      for (int64_t i = 0; i < n; ++i) {
        *reinterpret_cast<O*>(p[0] + i * s[0]) = static_cast<O>(
            f(static_cast<C>(load<T>(p[1] + i * s[1])), static_cast<C>(load<T>(p[2] + i * s[2]))));
      }
    }
  });
}

}  // namespace

void CpuBackend::unary(UnaryOp op, const TensorArg& out, const TensorArg& in, Scalar alpha,
                       Scalar beta) {
  elementwise::check_same_shape(out, in);
  OCTO_DISPATCH_ALL_AND_HALF(in.dtype, op_name(op), [&] {
    using T = scalar_t;
    using C = compute_t<T>;
    bool ok = visit_unary<C>(op, alpha, beta, [&](auto f) {
      using O = out_t<T, decltype(f(C{}))>;
      OCTO_INTERNAL_ASSERT(out.dtype == dtype_of<O>);
      unary_loop<T, O>(out, in, f);
    });
    OCTO_CHECK_VALUE(ok, op_name(op), ": unsupported dtype ", in.dtype);
  });
}

void CpuBackend::binary(BinaryOp op, const TensorArg& out, const TensorArg& a, const TensorArg& b,
                        Scalar alpha) {
  elementwise::check_binary_args(out, a, b);
  OCTO_DISPATCH_ALL_AND_HALF(a.dtype, op_name(op), [&] {
    using T = scalar_t;
    using C = compute_t<T>;
    bool ok = visit_binary<C>(op, alpha, [&](auto f) {
      using O = out_t<T, decltype(f(C{}, C{}))>;
      OCTO_INTERNAL_ASSERT(out.dtype == dtype_of<O>);
      binary_loop<T, O>(out, a, b, f);
    });
    OCTO_CHECK_VALUE(ok, op_name(op), ": unsupported dtype ", a.dtype);
  });
}

void CpuBackend::where(const TensorArg& out, const TensorArg& cond, const TensorArg& a,
                       const TensorArg& b) {
  elementwise::check_where_args(out, cond, a, b);
  OCTO_DISPATCH_ALL_AND_HALF(out.dtype, "where", [&] {
    using T = scalar_t;
    cpu::strided_runs<4>(
        {out, cond, a, b}, [](std::array<char*, 4> p, std::array<int64_t, 4> s, int64_t n) {
          constexpr int64_t kT = sizeof(T);
          if (s[0] == kT && s[1] == 1 && s[2] == kT && s[3] == kT) {
            T* o = reinterpret_cast<T*>(p[0]);
            const bool* c = reinterpret_cast<const bool*>(p[1]);
            const T* x = reinterpret_cast<const T*>(p[2]);
            const T* y = reinterpret_cast<const T*>(p[3]);
            for (int64_t i = 0; i < n; ++i) o[i] = c[i] ? x[i] : y[i];
          } else {
            for (int64_t i = 0; i < n; ++i) {
              *reinterpret_cast<T*>(p[0] + i * s[0]) =
                  load<bool>(p[1] + i * s[1]) ? load<T>(p[2] + i * s[2]) : load<T>(p[3] + i * s[3]);
            }
          }
        });
  });
}

}  // namespace octo::kernels
