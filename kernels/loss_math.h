// Per-row math of the fused cross-entropy, shared by kernels/cpu/loss.cpp and kernels/cuda/loss.cu.
//
// Note [Fused cross-entropy]
// One row holds the logits x[0..C) of one sample, its target y, the class weights w (all 1 when
// undefined) and the label smoothing e. With lse = logsumexp(x) and logp[c] = x[c] - lse:
//   loss      = -(1 - e) * w[y] * logp[y] - e / C * sum_c w[c] * logp[c]
//   dloss/dx[c] = softmax[c] * S - coef[c],   softmax[c] = exp(x[c] - lse),
//   coef[c]   = (1 - e) * w[y] * [c == y] + e / C * w[c],
//   S         = sum_c coef[c] = (1 - e) * w[y] + e / C * sum_c w[c].
// The smoothing terms are left out entirely when e == 0, so that a -inf logit of another class
// gives no 0 * inf. lse follows log_softmax exactly: m = max_c x[c] (NaN when any x is NaN),
// shifted by 0 instead when m == -inf (an all -inf row then comes out NaN), exp(x - m) in the
// logits' type T, summed in double. Every sum is accumulated in double; the backends differ only
// in the order of the terms (the CUDA block reduces in a tree).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "core/error.h"
#include "core/macros.h"
#include "kernels/tensor_arg.h"

namespace octo::kernels::ce {

/// The running max of a row, NaN-propagating: once a NaN is seen it stays.
template <typename T>
OCTO_HOST_DEVICE inline T max_step(T m, T v) {
  if (m != m) return m;
  if (v != v) return v;
  return v > m ? v : m;
}

/// The shift the exps use: the row max, or 0 when the max is -inf (all -inf, or an empty row).
template <typename T>
OCTO_HOST_DEVICE inline T exp_shift(T m) {
  return m == -std::numeric_limits<T>::infinity() ? T(0) : m;
}

/// One term of the logsumexp sum: exp(x - shift), computed in T like log_softmax.
template <typename T>
OCTO_HOST_DEVICE inline double exp_term(T x, T shift) {
  using std::exp;
  return static_cast<double>(exp(x - shift));
}

/// logsumexp from the shift and the summed exp terms.
OCTO_HOST_DEVICE inline double logsumexp(double shift, double sum) {
  using std::log;
  return shift + log(sum);
}

/// w[c], or 1 when there are no class weights (w == nullptr); `stride` in elements.
template <typename T>
OCTO_HOST_DEVICE inline double weight_at(const T* w, int64_t stride, int64_t c) {
  return w == nullptr ? 1.0 : static_cast<double>(w[c * stride]);
}

/// One term of the smoothing sum: w[c] * logp[c].
template <typename T>
OCTO_HOST_DEVICE inline double smooth_term(T x, double lse, double w_c) {
  return w_c * (static_cast<double>(x) - lse);
}

/// Whether target y is a class index the row may read (ignore_index is handled separately).
OCTO_HOST_DEVICE inline bool target_in_range(int64_t y, int64_t classes) {
  return y >= 0 && y < classes;
}

/// The loss of a non-ignored row from logp[y], w[y] and smooth_sum = sum_c w[c] * logp[c] (unused
/// when e == 0).
OCTO_HOST_DEVICE inline double row_loss(double logp_y, double w_y, double smooth_sum, double e,
                                        int64_t classes) {
  double loss = -(1.0 - e) * w_y * logp_y;
  if (e > 0) loss -= e / static_cast<double>(classes) * smooth_sum;
  return loss;
}

/// S = sum_c coef[c] from w[y] and w_sum = sum_c w[c] (unused when e == 0).
OCTO_HOST_DEVICE inline double coef_sum(double w_y, double w_sum, double e, int64_t classes) {
  double s = (1.0 - e) * w_y;
  if (e > 0) s += e / static_cast<double>(classes) * w_sum;
  return s;
}

/// grad_loss * dloss/dx[c] for element c of a non-ignored row; lse as stored (in T), so the
/// softmax is exp(x - lse) in T like log_softmax's backward.
template <typename T>
OCTO_HOST_DEVICE inline T grad_element(T x, T lse, bool is_target, double w_c, double w_y, double s,
                                       double grad_loss, double e, int64_t classes) {
  using std::exp;
  const double p = static_cast<double>(exp(x - lse));
  double coef = is_target ? (1.0 - e) * w_y : 0.0;
  if (e > 0) coef += e / static_cast<double>(classes) * w_c;
  return static_cast<T>(grad_loss * (p * s - coef));
}

// --- the primitives' argument contract (backend.h), checked by both backends on the host ------

/// float32/float64 logits (else NotImplementedError), int64 targets, weight of the logits' dtype.
inline void check_dtypes(const TensorArg& logits, const TensorArg& target, const TensorArg& weight,
                         const char* op) {
  if (logits.dtype != kFloat32 && logits.dtype != kFloat64) {
    OCTO_THROW(NotImplementedError, op, ": not implemented for logits of dtype ", logits.dtype,
               " (float32 and float64 are)");
  }
  OCTO_INTERNAL_ASSERT(target.dtype == kInt64);
  OCTO_INTERNAL_ASSERT(weight.data == nullptr || weight.dtype == logits.dtype);
}

/// Shapes and dtypes of cross_entropy_forward's arguments.
inline void check_forward_args(const TensorArg& loss, const TensorArg& lse, const TensorArg& logits,
                               const TensorArg& target, const TensorArg& weight) {
  OCTO_INTERNAL_ASSERT(logits.ndim == 2 && target.ndim == 1 && loss.ndim == 1 && lse.ndim == 1);
  const int64_t n = logits.sizes[0], classes = logits.sizes[1];
  OCTO_INTERNAL_ASSERT(target.sizes[0] == n && loss.sizes[0] == n && lse.sizes[0] == n);
  OCTO_INTERNAL_ASSERT(weight.data == nullptr || (weight.ndim == 1 && weight.sizes[0] == classes));
  check_dtypes(logits, target, weight, "cross_entropy_forward");
  OCTO_INTERNAL_ASSERT(loss.dtype == logits.dtype && lse.dtype == logits.dtype);
}

/// Shapes and dtypes of cross_entropy_backward's arguments.
inline void check_backward_args(const TensorArg& grad_logits, const TensorArg& grad_loss,
                                const TensorArg& logits, const TensorArg& lse,
                                const TensorArg& target, const TensorArg& weight) {
  OCTO_INTERNAL_ASSERT(logits.ndim == 2 && grad_logits.ndim == 2 && target.ndim == 1 &&
                       grad_loss.ndim == 1 && lse.ndim == 1);
  const int64_t n = logits.sizes[0], classes = logits.sizes[1];
  OCTO_INTERNAL_ASSERT(grad_logits.sizes[0] == n && grad_logits.sizes[1] == classes &&
                       target.sizes[0] == n && grad_loss.sizes[0] == n && lse.sizes[0] == n);
  OCTO_INTERNAL_ASSERT(weight.data == nullptr || (weight.ndim == 1 && weight.sizes[0] == classes));
  check_dtypes(logits, target, weight, "cross_entropy_backward");
  OCTO_INTERNAL_ASSERT(grad_logits.dtype == logits.dtype && grad_loss.dtype == logits.dtype &&
                       lse.dtype == logits.dtype);
}

}  // namespace octo::kernels::ce
