// Fused cross-entropy on the CPU over logits [N, C], one row at a time (kernels/loss_math.h).
//
// Rows are independent and split across threads; within a row the max, the logsumexp sum and the
// smoothing sum are three sweeps over the row (in cache), each accumulated in double. The targets
// are range-checked up front, so the first bad one is named and nothing is written.
#include <algorithm>
#include <limits>

#include "core/error.h"
#include "core/threads.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/loops.h"
#include "kernels/float32_staging.h"
#include "kernels/loss_math.h"

namespace octo::kernels {

namespace {

/// Throws IndexError naming the first target outside [0, C) that is not ignore_index.
void check_targets(const TensorArg& target, int64_t classes, int64_t ignore_index) {
  const int64_t* t = target.data_as<const int64_t>();
  const int64_t n = target.sizes[0], ts = target.strides[0];
  for (int64_t i = 0; i < n; ++i) {
    const int64_t y = t[i * ts];
    OCTO_CHECK_INDEX(y == ignore_index || ce::target_in_range(y, classes), "cross_entropy: target ",
                     y, " is out of bounds for ", classes, " classes (expected a value in [0, ",
                     classes - 1, "] or ignore_index = ", ignore_index, ")");
  }
}

/// Rows per parallel chunk: about cpu::kGrain elements.
int64_t row_grain(int64_t classes) {
  return std::max<int64_t>(1, cpu::kGrain / std::max<int64_t>(1, classes));
}

}  // namespace

void CpuBackend::cross_entropy_forward(const TensorArg& loss, const TensorArg& lse,
                                       const TensorArg& logits, const TensorArg& target,
                                       const TensorArg& weight, const CrossEntropyParams& p) {
  if (staged_cross_entropy_forward(*this, loss, lse, logits, target, weight, p))
    return;  // Note [16-bit kernels]
  ce::check_forward_args(loss, lse, logits, target, weight);
  const int64_t n = logits.sizes[0], classes = logits.sizes[1];
  check_targets(target, classes, p.ignore_index);
  if (n == 0) return;
  const double e = p.label_smoothing;
  OCTO_DISPATCH_FLOATING(logits.dtype, "cross_entropy_forward", [&] {
    using T = scalar_t;
    const T* x0 = logits.data_as<const T>();
    const T* w = weight.data_as<const T>();
    const int64_t* t = target.data_as<const int64_t>();
    T* out = loss.data_as<T>();
    T* out_lse = lse.data_as<T>();
    const int64_t rs = logits.strides[0], cs = logits.strides[1];
    const int64_t ws = weight.data == nullptr ? 0 : weight.strides[0];
    parallel_for(0, n, row_grain(classes), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const T* x = x0 + r * rs;
        T m = -std::numeric_limits<T>::infinity();
        for (int64_t c = 0; c < classes; ++c) m = ce::max_step(m, x[c * cs]);
        const T shift = ce::exp_shift(m);
        double s = 0;
        for (int64_t c = 0; c < classes; ++c) s += ce::exp_term(x[c * cs], shift);
        const double l = ce::logsumexp(static_cast<double>(shift), s);
        out_lse[r * lse.strides[0]] = static_cast<T>(l);
        const int64_t y = t[r * target.strides[0]];
        double value = 0;
        if (y != p.ignore_index) {
          double smooth = 0;
          if (e > 0) {
            for (int64_t c = 0; c < classes; ++c)
              smooth += ce::smooth_term(x[c * cs], l, ce::weight_at(w, ws, c));
          }
          value = ce::row_loss(static_cast<double>(x[y * cs]) - l, ce::weight_at(w, ws, y), smooth,
                               e, classes);
        }
        out[r * loss.strides[0]] = static_cast<T>(value);
      }
    });
  });
}

void CpuBackend::cross_entropy_backward(const TensorArg& grad_logits, const TensorArg& grad_loss,
                                        const TensorArg& logits, const TensorArg& lse,
                                        const TensorArg& target, const TensorArg& weight,
                                        const CrossEntropyParams& p) {
  if (staged_cross_entropy_backward(*this, grad_logits, grad_loss, logits, lse, target, weight, p))
    return;  // Note [16-bit kernels]
  ce::check_backward_args(grad_logits, grad_loss, logits, lse, target, weight);
  const int64_t n = logits.sizes[0], classes = logits.sizes[1];
  check_targets(target, classes, p.ignore_index);
  if (n == 0 || classes == 0) return;
  const double e = p.label_smoothing;
  OCTO_DISPATCH_FLOATING(logits.dtype, "cross_entropy_backward", [&] {
    using T = scalar_t;
    const T* x0 = logits.data_as<const T>();
    const T* w = weight.data_as<const T>();
    const int64_t* t = target.data_as<const int64_t>();
    const T* g = grad_loss.data_as<const T>();
    const T* l = lse.data_as<const T>();
    T* gi0 = grad_logits.data_as<T>();
    const int64_t rs = logits.strides[0], cs = logits.strides[1];
    const int64_t grs = grad_logits.strides[0], gcs = grad_logits.strides[1];
    const int64_t ws = weight.data == nullptr ? 0 : weight.strides[0];
    // sum_c w[c] is the same for every row.
    double w_sum = static_cast<double>(classes);
    if (w != nullptr && e > 0) {
      w_sum = 0;
      for (int64_t c = 0; c < classes; ++c) w_sum += ce::weight_at(w, ws, c);
    }
    parallel_for(0, n, row_grain(classes), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        T* gi = gi0 + r * grs;
        const int64_t y = t[r * target.strides[0]];
        if (y == p.ignore_index) {
          for (int64_t c = 0; c < classes; ++c) gi[c * gcs] = T(0);
          continue;
        }
        const T* x = x0 + r * rs;
        const T row_lse = l[r * lse.strides[0]];
        const double gr = static_cast<double>(g[r * grad_loss.strides[0]]);
        const double w_y = ce::weight_at(w, ws, y);
        const double s = ce::coef_sum(w_y, w_sum, e, classes);
        for (int64_t c = 0; c < classes; ++c) {
          gi[c * gcs] = ce::grad_element(x[c * cs], row_lse, c == y, ce::weight_at(w, ws, c), w_y,
                                         s, gr, e, classes);
        }
      }
    });
  });
}

}  // namespace octo::kernels
