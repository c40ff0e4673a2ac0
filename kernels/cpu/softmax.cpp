// CPU softmax / log_softmax over any dim (max-shifted for stability) and their backward.
//
// Each "row" is the line of elements along `dim` for one position of the other dims; rows are
// independent and split across threads. Sums accumulate in double.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "core/error.h"
#include "core/threads.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/loops.h"
#include "kernels/float32_staging.h"

namespace octo::kernels {

namespace {

constexpr int64_t kGroup = 64;  // rows processed together when the rows are strided

/// Rows along `dim` of up to three same-shaped tensors. When `dim` is strided in tensor `key`
/// while the next row starts right after the previous one (softmax over dim 0 or over channels),
/// rows go in groups of kGroup so that each step along dim reads neighbouring memory.
struct Rows {
  int n_other = 0;
  int64_t other_sizes[kMaxDims];
  int64_t other_strides[3][kMaxDims];
  int64_t len = 1, rows = 1, group = 1;
  int64_t step[3] = {0, 0, 0};  // stride along dim, per tensor

  Rows(const TensorArg* args[], int count, int dim, int key) {
    const TensorArg& ref = *args[0];
    if (ref.ndim > 0) {
      OCTO_INTERNAL_ASSERT(dim >= 0 && dim < ref.ndim, "softmax: dim out of range");
      len = ref.sizes[dim];
      for (int k = 0; k < count; ++k) step[k] = args[k]->strides[dim];
    }
    for (int d = 0; d < ref.ndim; ++d) {
      if (d == dim) continue;
      rows *= ref.sizes[d];
      if (ref.sizes[d] == 1) continue;
      other_sizes[n_other] = ref.sizes[d];
      for (int k = 0; k < count; ++k) {
        OCTO_INTERNAL_ASSERT(args[k]->sizes[d] == ref.sizes[d], "softmax: shapes differ");
        other_strides[k][n_other] = args[k]->strides[d];
      }
      ++n_other;
    }
    if (len > 1 && n_other > 0 && step[key] != 1 && other_strides[key][n_other - 1] == 1)
      group = kGroup;
  }

  /// Element offset of row r's first element in tensor k.
  int64_t offset(int k, int64_t r) const {
    int64_t off = 0;
    for (int d = n_other - 1; d >= 0; --d) {
      off += (r % other_sizes[d]) * other_strides[k][d];
      r /= other_sizes[d];
    }
    return off;
  }

  /// Calls f(first_row, row_count) over groups of rows, in parallel.
  template <typename F>
  void parallel(F&& f) const {
    if (len == 0 || rows == 0) return;
    const int64_t groups = (rows + group - 1) / group;
    int64_t grain = std::max<int64_t>(1, cpu::kGrain / std::max<int64_t>(1, len * group * 8));
    parallel_for(0, groups, grain, [&](int64_t g0, int64_t g1) {
      for (int64_t g = g0; g < g1; ++g) f(g * group, std::min(group, rows - g * group));
    });
  }
};

}  // namespace

void CpuBackend::softmax(const TensorArg& out, const TensorArg& in, int dim, bool log) {
  if (staged_softmax(*this, out, in, dim, log)) return;  // Note [16-bit kernels]
  const TensorArg* args[] = {&out, &in};
  Rows rows(args, 2, dim, 1);
  OCTO_DISPATCH_FLOATING(in.dtype, log ? "log_softmax" : "softmax", [&] {
    using T = scalar_t;
    constexpr T kInf = std::numeric_limits<T>::infinity();
    rows.parallel([&](int64_t r0, int64_t nr) {
      T* y[kGroup];
      const T* x[kGroup];
      T m[kGroup];
      double s[kGroup];
      bool nan[kGroup];
      for (int64_t j = 0; j < nr; ++j) {
        y[j] = out.data_as<T>() + rows.offset(0, r0 + j);
        x[j] = in.data_as<const T>() + rows.offset(1, r0 + j);
        m[j] = -kInf;
        s[j] = 0;
        nan[j] = false;
      }
      const int64_t ys = rows.step[0], xs = rows.step[1], n = rows.len;
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = 0; j < nr; ++j) {
          T v = x[j][i * xs];
          nan[j] |= std::isnan(v);
          m[j] = std::max(m[j], v);
        }
      }
      // NaN poisons its row. A row of only -inf is shifted by 0 so that it comes out NaN (0/0),
      // like torch.
      for (int64_t j = 0; j < nr; ++j) {
        if (nan[j]) m[j] = std::numeric_limits<T>::quiet_NaN();
        if (m[j] == -kInf) m[j] = 0;
      }
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = 0; j < nr; ++j) {
          T e = std::exp(x[j][i * xs] - m[j]);
          s[j] += e;
          if (!log) y[j][i * ys] = e;
        }
      }
      if (log) {
        for (int64_t j = 0; j < nr; ++j) s[j] = static_cast<double>(m[j]) + std::log(s[j]);
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < nr; ++j) y[j][i * ys] = static_cast<T>(x[j][i * xs] - s[j]);
      } else {
        for (int64_t j = 0; j < nr; ++j) s[j] = 1.0 / s[j];
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < nr; ++j) y[j][i * ys] = static_cast<T>(y[j][i * ys] * s[j]);
      }
    });
  });
}

void CpuBackend::softmax_backward(const TensorArg& grad_in, const TensorArg& grad_out,
                                  const TensorArg& out, int dim, bool log) {
  if (staged_softmax_backward(*this, grad_in, grad_out, out, dim, log))
    return;  // Note [16-bit kernels]
  const TensorArg* args[] = {&grad_in, &grad_out, &out};
  Rows rows(args, 3, dim, 2);
  OCTO_DISPATCH_FLOATING(out.dtype, log ? "log_softmax_backward" : "softmax_backward", [&] {
    using T = scalar_t;
    rows.parallel([&](int64_t r0, int64_t nr) {
      T* gi[kGroup];
      const T* g[kGroup];
      const T* y[kGroup];
      double s[kGroup];
      for (int64_t j = 0; j < nr; ++j) {
        gi[j] = grad_in.data_as<T>() + rows.offset(0, r0 + j);
        g[j] = grad_out.data_as<const T>() + rows.offset(1, r0 + j);
        y[j] = out.data_as<const T>() + rows.offset(2, r0 + j);
        s[j] = 0;
      }
      const int64_t is = rows.step[0], gs = rows.step[1], ys = rows.step[2], n = rows.len;
      if (log) {
        // grad_in = g - exp(y) * sum(g)
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < nr; ++j) s[j] += static_cast<double>(g[j][i * gs]);
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < nr; ++j)
            gi[j][i * is] = static_cast<T>(g[j][i * gs] - std::exp(y[j][i * ys]) * s[j]);
      } else {
        // grad_in = y * (g - sum(g * y))
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < nr; ++j)
            s[j] += static_cast<double>(g[j][i * gs]) * static_cast<double>(y[j][i * ys]);
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < nr; ++j)
            gi[j][i * is] = static_cast<T>(y[j][i * ys] * (g[j][i * gs] - s[j]));
      }
    });
  });
}

}  // namespace octo::kernels
