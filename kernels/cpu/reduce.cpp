// CPU reductions over any set of dims: sum, mean, prod, max, min, argmax, argmin, var.
//
// Note [Deterministic reductions]: a result depends only on the data, the shapes and the strides
// -- never on the thread count. Each output element is either the ordered merge of partial
// results over fixed blocks of kBlock consecutive reduced elements (the row strategy), or a
// plain sequential fold (the column strategy below, picked from the layout alone). Threads split
// the outputs between them or, when there are few outputs and many reduced elements (full
// reductions), the blocks of one output; partials are merged in block order either way.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "core/threads.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/loops.h"
#include "kernels/functors.h"

namespace octo::kernels {

namespace {

constexpr int64_t kBlock = 16384;      // reduced elements per partial result
constexpr int64_t kFewOutputs = 16;    // below this, split the reduced range across threads
constexpr int64_t kColumnBlock = 256;  // outputs accumulated together by the column strategy

/// The reduction's geometry: kept dims (iterated over outputs) and reduced dims (iterated within
/// one output), both with size-1 dims dropped and mergeable neighbours coalesced.
struct Geometry {
  int nk = 0;
  int64_t k_sizes[kMaxDims], k_in[kMaxDims], k_out[kMaxDims];
  int nr = 0;
  int64_t r_sizes[kMaxDims], r_in[kMaxDims];
  int64_t out_numel = 1, red_numel = 1;

  Geometry(const TensorArg& out, const TensorArg& in, bool keep_reduced_order) {
    OCTO_INTERNAL_ASSERT(out.ndim == in.ndim, "reduce: out and in must have the same ndim");
    int64_t rs[kMaxDims], rst[kMaxDims];
    int n = 0;
    for (int d = 0; d < in.ndim; ++d) {
      if (out.sizes[d] == in.sizes[d]) {
        out_numel *= in.sizes[d];
        if (in.sizes[d] == 1) continue;
        if (nk > 0 && k_in[nk - 1] == in.strides[d] * in.sizes[d] &&
            k_out[nk - 1] == out.strides[d] * in.sizes[d]) {
          k_sizes[nk - 1] *= in.sizes[d];
          k_in[nk - 1] = in.strides[d];
          k_out[nk - 1] = out.strides[d];
        } else {
          k_sizes[nk] = in.sizes[d];
          k_in[nk] = in.strides[d];
          k_out[nk] = out.strides[d];
          ++nk;
        }
      } else {
        OCTO_INTERNAL_ASSERT(out.sizes[d] == 1, "reduce: out dim ", d, " must be 1 or in's size");
        red_numel *= in.sizes[d];
        rs[n] = in.sizes[d];
        rst[n] = in.strides[d];
        ++n;
      }
    }
    // Innermost reduced dim = smallest stride (better locality), unless the linear order of the
    // reduced elements matters (arg ops report the row-major index).
    int order[kMaxDims];
    for (int i = 0; i < n; ++i) order[i] = i;
    if (!keep_reduced_order) {
      std::stable_sort(order, order + n,
                       [&](int a, int b) { return std::abs(rst[a]) > std::abs(rst[b]); });
    }
    for (int j = 0; j < n; ++j) {
      int i = order[j];
      if (nr > 0 && r_in[nr - 1] == rst[i] * rs[i]) {
        r_sizes[nr - 1] *= rs[i];
        r_in[nr - 1] = rst[i];
      } else {
        r_sizes[nr] = rs[i];
        r_in[nr] = rst[i];
        ++nr;
      }
    }
  }

  /// Input and output element offsets of output number o (row-major over the kept dims).
  void offsets(int64_t o, int64_t& in_off, int64_t& out_off) const {
    in_off = out_off = 0;
    for (int d = nk - 1; d >= 0; --d) {
      int64_t i = o % k_sizes[d];
      o /= k_sizes[d];
      in_off += i * k_in[d];
      out_off += i * k_out[d];
    }
  }

  /// Visits reduced elements [begin, end) in linear order as runs of the innermost reduced dim:
  /// f(offset, stride, n, first_linear_index).
  template <typename F>
  void for_each_run(int64_t begin, int64_t end, F&& f) const {
    if (nr == 0) {
      if (begin < end) f(int64_t{0}, int64_t{0}, int64_t{1}, int64_t{0});
      return;
    }
    const int64_t inner = r_sizes[nr - 1], istride = r_in[nr - 1];
    int64_t pos = begin;
    while (pos < end) {
      int64_t row = pos / inner, col = pos % inner;
      int64_t off = 0;
      for (int d = nr - 2; d >= 0; --d) {
        off += (row % r_sizes[d]) * r_in[d];
        row /= r_sizes[d];
      }
      int64_t n = std::min(inner - col, end - pos);
      f(off + col * istride, istride, n, pos);
      pos += n;
    }
  }
};

template <typename T>
constexpr bool kIsHalf = std::is_same_v<T, BFloat16> || std::is_same_v<T, Float16>;

/// Accumulation type: int64 for integers and bool, double for floating types.
template <typename T>
using acc_t = std::conditional_t<std::is_integral_v<T>, int64_t, double>;

template <typename A, typename T>
inline A to_acc(T v) {
  if constexpr (kIsHalf<T>) {
    return static_cast<A>(static_cast<float>(v));
  } else {
    return static_cast<A>(v);
  }
}

template <typename A>
inline bool is_nan(A v) {
  if constexpr (std::is_floating_point_v<A>) {
    return std::isnan(v);
  } else {
    return false;
  }
}

/// Writes an accumulated value into out (whatever out's dtype).
template <typename A>
void store(const TensorArg& out, int64_t off, A v) {
  OCTO_DISPATCH_ALL_AND_HALF(out.dtype, "reduce", [&] {
    scalar_t* p = out.data_as<scalar_t>() + off;
    if constexpr (std::is_same_v<scalar_t, bool>) {
      *p = v != 0;
    } else if constexpr (kIsHalf<scalar_t>) {
      *p = scalar_t(static_cast<float>(v));
    } else {
      *p = static_cast<scalar_t>(v);
    }
  });
}

// --- accumulators: run() folds in a strided run, merge() folds in a later partial ---------------

// Integer sums and products wrap on overflow (Note [Integer overflow wraps] in functors.h).
//
// Note [Integer lanes and GCC 12]: the lanes below are kept in the unsigned type W and converted
// back to A once, at the end. The obvious form, `A a0, a1; a0 = fn::wrap_add(a0, x)` with one
// conversion to unsigned and back per add, is well defined, but g++ 12.2 at -O3 with AVX2 or
// AVX-512 vectorises it wrongly: it sums arange(18) to 105, not 153. clang, g++ -O2 and g++ -O3
// without AVX2 get it right. tools/toolchain/lane_reduction.cpp is the eight-line reproducer;
// meson.build runs it at configure time and warns when the compiler is affected. A new kernel
// that keeps several integer accumulators should keep them in the unsigned type, as here.
template <typename T, typename A>
struct SumAcc {
  using W = typename fn::Wrapping<A>::type;  // A itself, or the unsigned type for integers
  A s = 0;
  void run(const T* p, int64_t st, int64_t n, int64_t) {
    W a0 = 0, a1 = 0, a2 = 0, a3 = 0;  // four lanes break the add dependency chain
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
      a0 += static_cast<W>(to_acc<A>(p[i * st]));
      a1 += static_cast<W>(to_acc<A>(p[(i + 1) * st]));
      a2 += static_cast<W>(to_acc<A>(p[(i + 2) * st]));
      a3 += static_cast<W>(to_acc<A>(p[(i + 3) * st]));
    }
    for (; i < n; ++i) a0 += static_cast<W>(to_acc<A>(p[i * st]));
    s = static_cast<A>(static_cast<W>(s) + ((a0 + a1) + (a2 + a3)));
  }
  void push(A v, int64_t) { s = fn::wrap_add(s, v); }
  void merge(const SumAcc& o) { s = fn::wrap_add(s, o.s); }
};

template <typename T, typename A>
struct ProdAcc {
  A s = 1;
  void run(const T* p, int64_t st, int64_t n, int64_t) {
    for (int64_t i = 0; i < n; ++i) s = fn::wrap_mul(s, to_acc<A>(p[i * st]));
  }
  void push(A v, int64_t) { s = fn::wrap_mul(s, v); }
  void merge(const ProdAcc& o) { s = fn::wrap_mul(s, o.s); }
};

/// Max (kMax) or min; a NaN anywhere makes the result NaN. Branch-free so columns vectorise.
template <typename T, typename A, bool kMax>
struct ExtremeAcc {
  static constexpr A kStart =
      std::is_floating_point_v<A>
          ? (kMax ? -std::numeric_limits<A>::infinity() : std::numeric_limits<A>::infinity())
          : (kMax ? std::numeric_limits<A>::lowest() : std::numeric_limits<A>::max());
  A m = kStart;
  bool nan = false;
  void take(A v) {
    nan |= is_nan(v);
    m = (kMax ? v > m : v < m) ? v : m;
  }
  void run(const T* p, int64_t st, int64_t n, int64_t) {
    for (int64_t i = 0; i < n; ++i) take(to_acc<A>(p[i * st]));
  }
  void push(A v, int64_t) { take(v); }
  void merge(const ExtremeAcc& o) {
    nan |= o.nan;
    take(o.m);
  }
  A value() const { return nan ? std::numeric_limits<A>::quiet_NaN() : m; }
};

/// Index of the max (kMax) or min; the first one on ties; NaN counts as the extreme (as torch).
template <typename T, typename A, bool kMax>
struct ArgAcc {
  A best{};
  int64_t idx = -1;
  void take(A v, int64_t i) {
    if (idx < 0 || (!is_nan(best) && ((kMax ? v > best : v < best) || is_nan(v)))) {
      best = v;
      idx = i;
    }
  }
  void run(const T* p, int64_t st, int64_t n, int64_t first) {
    for (int64_t i = 0; i < n; ++i) take(to_acc<A>(p[i * st]), first + i);
  }
  void push(A v, int64_t i) { take(v, i); }
  void merge(const ArgAcc& o) {
    if (o.idx >= 0) take(o.best, o.idx);
  }
};

/// Count, mean and sum of squared deviations; runs are two-pass, partials merge by Chan et al.
template <typename T>
struct VarAcc {
  double n = 0, mean = 0, m2 = 0;
  void combine(double nb, double mb, double m2b) {
    if (nb == 0) return;
    double total = n + nb, delta = mb - mean;
    mean += delta * nb / total;
    m2 += m2b + delta * delta * n * nb / total;
    n = total;
  }
  void run(const T* p, int64_t st, int64_t cnt, int64_t) {
    double s = 0;
    for (int64_t i = 0; i < cnt; ++i) s += to_acc<double>(p[i * st]);
    double mb = s / static_cast<double>(cnt), m2b = 0;
    for (int64_t i = 0; i < cnt; ++i) {
      double d = to_acc<double>(p[i * st]) - mb;
      m2b += d * d;
    }
    combine(static_cast<double>(cnt), mb, m2b);
  }
  void push(double v, int64_t) {  // Welford
    n += 1;
    double delta = v - mean;
    mean += delta / n;
    m2 += delta * (v - mean);
  }
  void merge(const VarAcc& o) { combine(o.n, o.mean, o.m2); }
};

/// Reduces input element range [begin, end) of the output whose input base is `base`.
template <typename Acc, typename T>
Acc reduce_range(const Geometry& g, const T* base, int64_t begin, int64_t end) {
  Acc acc;
  g.for_each_run(begin, end, [&](int64_t off, int64_t st, int64_t n, int64_t first) {
    acc.run(base + off, st, n, first);
  });
  return acc;
}

/// Column strategy, for reductions whose innermost kept dim is contiguous in the input while
/// the reduced dims lie outside it (sum over the batch, bias gradients, max over dim 0): a block
/// of neighbouring outputs is accumulated together, one reduced element at a time, so the input
/// is read row by row instead of with a large stride per output.
template <typename Acc, typename T, typename Finish>
bool try_columns(const Geometry& g, const TensorArg& out, const TensorArg& in, Finish finish) {
  if (g.nk == 0 || g.nr == 0 || g.k_in[g.nk - 1] != 1 || g.k_sizes[g.nk - 1] < 8) return false;
  for (int d = 0; d < g.nr; ++d)
    if (std::abs(g.r_in[d]) < g.k_sizes[g.nk - 1]) return false;
  using A = acc_t<T>;
  const int64_t cols = g.k_sizes[g.nk - 1];
  const int64_t col_blocks = (cols + kColumnBlock - 1) / kColumnBlock;
  const int64_t rows = g.out_numel / cols;
  const int64_t ostride = g.k_out[g.nk - 1];
  const T* src = in.data_as<const T>();
  const int64_t grain =
      std::max<int64_t>(1, cpu::kGrain / std::max<int64_t>(1, g.red_numel * kColumnBlock));
  parallel_for(0, rows * col_blocks, grain, [&](int64_t t0, int64_t t1) {
    Acc acc[kColumnBlock];
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t row = t / col_blocks, c0 = (t % col_blocks) * kColumnBlock;
      const int64_t nc = std::min(kColumnBlock, cols - c0);
      int64_t in_off, out_off;
      g.offsets(row * cols + c0, in_off, out_off);
      std::fill(acc, acc + nc, Acc{});
      g.for_each_run(0, g.red_numel, [&](int64_t off, int64_t st, int64_t n, int64_t first) {
        for (int64_t i = 0; i < n; ++i) {
          const T* p = src + in_off + off + i * st;
          for (int64_t c = 0; c < nc; ++c) acc[c].push(to_acc<A>(p[c]), first + i);
        }
      });
      for (int64_t c = 0; c < nc; ++c) store(out, out_off + c * ostride, finish(acc[c]));
    }
  });
  return true;
}

/// Runs accumulator Acc over every output and writes finish(acc) there (Note above).
template <typename Acc, typename T, typename Finish>
void run_reduce(const Geometry& g, const TensorArg& out, const TensorArg& in, Finish finish) {
  if (g.red_numel == 0) {  // the empty fold everywhere; the input may have no storage to point into
    for (int64_t o = 0; o < g.out_numel; ++o) {
      int64_t in_off, out_off;
      g.offsets(o, in_off, out_off);
      store(out, out_off, finish(Acc{}));
    }
    return;
  }
  if (try_columns<Acc, T>(g, out, in, finish)) return;
  const T* src = in.data_as<const T>();
  const int64_t nblocks = std::max<int64_t>(1, (g.red_numel + kBlock - 1) / kBlock);
  if (g.out_numel < kFewOutputs && nblocks > 1) {
    std::vector<Acc> parts(static_cast<size_t>(nblocks));
    for (int64_t o = 0; o < g.out_numel; ++o) {
      int64_t in_off, out_off;
      g.offsets(o, in_off, out_off);
      parallel_for(0, nblocks, 1, [&](int64_t b0, int64_t b1) {
        for (int64_t b = b0; b < b1; ++b)
          parts[b] = reduce_range<Acc>(g, src + in_off, b * kBlock,
                                       std::min(g.red_numel, (b + 1) * kBlock));
      });
      Acc acc;
      for (const Acc& p : parts) acc.merge(p);
      store(out, out_off, finish(acc));
    }
    return;
  }
  const int64_t grain = std::max<int64_t>(1, cpu::kGrain / std::max<int64_t>(1, g.red_numel));
  parallel_for(0, g.out_numel, grain, [&](int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; ++o) {
      int64_t in_off, out_off;
      g.offsets(o, in_off, out_off);
      Acc acc;
      for (int64_t b = 0; b < nblocks; ++b)
        acc.merge(reduce_range<Acc>(g, src + in_off, b * kBlock,
                                    std::min(g.red_numel, (b + 1) * kBlock)));
      store(out, out_off, finish(acc));
    }
  });
}

const char* op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return "sum";
    case ReduceOp::Mean:
      return "mean";
    case ReduceOp::Prod:
      return "prod";
    case ReduceOp::Max:
      return "max";
    case ReduceOp::Min:
      return "min";
    case ReduceOp::ArgMax:
      return "argmax";
    case ReduceOp::ArgMin:
      return "argmin";
    case ReduceOp::Var:
      return "var";
  }
  return "reduce";
}

}  // namespace

void CpuBackend::reduce(ReduceOp op, const TensorArg& out, const TensorArg& in, Scalar alpha) {
  const bool is_arg = op == ReduceOp::ArgMax || op == ReduceOp::ArgMin;
  Geometry g(out, in, is_arg);
  if (g.out_numel == 0) return;
  if (g.red_numel == 0) {
    OCTO_CHECK_INDEX(op != ReduceOp::Max && op != ReduceOp::Min && !is_arg, op_name(op),
                     "(): cannot reduce over an empty dimension: the operation has no identity");
  }
  if (is_arg) OCTO_INTERNAL_ASSERT(out.dtype == kInt64, "argmax/argmin write int64");
  OCTO_DISPATCH_ALL_AND_HALF(in.dtype, op_name(op), [&] {
    using T = scalar_t;
    using A = acc_t<T>;
    const double count = static_cast<double>(g.red_numel);
    switch (op) {
      case ReduceOp::Sum:
        run_reduce<SumAcc<T, A>, T>(g, out, in, [](const SumAcc<T, A>& a) { return a.s; });
        return;
      case ReduceOp::Mean:
        run_reduce<SumAcc<T, A>, T>(g, out, in, [count](const SumAcc<T, A>& a) {
          return static_cast<double>(a.s) / count;  // 0 / 0 = NaN for an empty reduction
        });
        return;
      case ReduceOp::Prod:
        run_reduce<ProdAcc<T, A>, T>(g, out, in, [](const ProdAcc<T, A>& a) { return a.s; });
        return;
      case ReduceOp::Max:
        run_reduce<ExtremeAcc<T, A, true>, T>(
            g, out, in, [](const ExtremeAcc<T, A, true>& a) { return a.value(); });
        return;
      case ReduceOp::Min:
        run_reduce<ExtremeAcc<T, A, false>, T>(
            g, out, in, [](const ExtremeAcc<T, A, false>& a) { return a.value(); });
        return;
      case ReduceOp::ArgMax:
        run_reduce<ArgAcc<T, A, true>, T>(g, out, in,
                                          [](const ArgAcc<T, A, true>& a) { return a.idx; });
        return;
      case ReduceOp::ArgMin:
        run_reduce<ArgAcc<T, A, false>, T>(g, out, in,
                                           [](const ArgAcc<T, A, false>& a) { return a.idx; });
        return;
      case ReduceOp::Var: {
        const double correction = alpha.to_double();
        run_reduce<VarAcc<T>, T>(g, out, in, [correction](const VarAcc<T>& a) {
          double divisor = std::max(0.0, a.n - correction);
          return a.n == 0 ? std::numeric_limits<double>::quiet_NaN() : a.m2 / divisor;
        });
        return;
      }
    }
  });
}

}  // namespace octo::kernels
