// Per-element SGD and Adam/AdamW updates, written once for the CPU and CUDA fused optimizers.
//
// Note [Fused optimizer arithmetic]
// The update of one element is an OCTO_HOST_DEVICE function over an "opmath" type C: double for
// float64, float for float32, and float for bfloat16/float16 too (each value is loaded into
// float once and stored back once, so the 16-bit types keep full precision inside one update).
// Hyper-parameters arrive as doubles in SgdParams/AdamParams. The host turns them into C factors
// once per call (sgd_factors, adam_factors), computing in double what PyTorch computes in Python
// (1 - dampening, lr / bias_correction1, sqrt(bias_correction2), 1 - lr * weight_decay), so both
// backends apply the same operations to the same values.
//
// The operations, and their rounding to C, follow the tensor-op implementation in optim/sgd.cpp
// and optim/adam.cpp one for one (a scaled add `x.add_(y, alpha)` is `x + y * alpha`). For
// float32 and float64 the fused update therefore equals that implementation bit for bit, and CPU
// equals CUDA, provided no multiply-add is contracted into an FMA: CUDA code is built with
// -fmad=false and host code with -ffp-contract=off (Note [No FMA contraction], meson.build).
#pragma once

#include <cmath>
#include <type_traits>

#include "core/error.h"
#include "core/half.h"
#include "core/macros.h"
#include "kernels/backend.h"
#include "kernels/functors.h"

namespace octo::kernels::optim_math {

/// The type an update computes in for storage type T (see Note [Fused optimizer arithmetic]).
template <typename T>
using opmath_t =
    std::conditional_t<std::is_same_v<T, BFloat16> || std::is_same_v<T, Float16>, float, T>;

/// Host: asserts that `t` (the grad or a state tensor) has param's shape, dtype and device, as the
/// callers in optim/ guarantee.
inline void check_operand(const TensorArg& param, const TensorArg& t) {
  OCTO_INTERNAL_ASSERT(t.defined() && t.dtype == param.dtype && t.device == param.device &&
                       t.ndim == param.ndim);
  for (int d = 0; d < param.ndim; ++d) OCTO_INTERNAL_ASSERT(t.sizes[d] == param.sizes[d]);
}

/// Host: check_operand for each of adam_update's tensors that the update reads.
inline void check_adam_args(const TensorArg& param, const TensorArg& grad, const TensorArg& exp_avg,
                            const TensorArg& exp_avg_sq, const TensorArg& max_exp_avg_sq,
                            const AdamParams& p) {
  check_operand(param, grad);
  check_operand(param, exp_avg);
  check_operand(param, exp_avg_sq);
  if (p.amsgrad) check_operand(param, max_exp_avg_sq);
}

// --- SGD ----------------------------------------------------------------------------------------

/// SGD's hyper-parameters as C, plus which terms apply.
template <typename C>
struct SgdFactors {
  C weight_decay, momentum, one_minus_dampening, neg_lr;
  bool use_weight_decay, use_momentum, nesterov, maximize, first_step;
};

/// Host: the factors of one SGD call.
template <typename C>
SgdFactors<C> sgd_factors(const SgdParams& p) {
  return {static_cast<C>(p.weight_decay),
          static_cast<C>(p.momentum),
          static_cast<C>(1.0 - p.dampening),
          static_cast<C>(-p.lr),
          p.weight_decay != 0.0,
          p.momentum != 0.0,
          p.nesterov,
          p.maximize,
          p.first_step};
}

/// One element of torch.optim.SGD: param (and buf, read and written only when momentum != 0)
/// updated in place from grad.
///   d = maximize ? -g : g;  d += weight_decay * p
///   buf = first_step ? d : momentum * buf + (1 - dampening) * d      (momentum != 0)
///   d = nesterov ? d + momentum * buf : buf                           (momentum != 0)
///   p -= lr * d
template <typename C>
OCTO_HOST_DEVICE inline void sgd_element(C& param, C grad, C& buf, const SgdFactors<C>& f) {
  C d = f.maximize ? static_cast<C>(-grad) : grad;
  if (f.use_weight_decay) d = d + param * f.weight_decay;
  if (f.use_momentum) {
    buf = f.first_step ? d : buf * f.momentum + d * f.one_minus_dampening;
    d = f.nesterov ? d + buf * f.momentum : buf;
  }
  param = param + d * f.neg_lr;
}

// --- Adam / AdamW -------------------------------------------------------------------------------

/// Adam's hyper-parameters as C, plus which terms apply.
template <typename C>
struct AdamFactors {
  C weight_decay;  // Adam: g += weight_decay * p
  C decay;         // AdamW: p *= 1 - lr * weight_decay
  C beta1, one_minus_beta1, beta2, one_minus_beta2;
  C bias_correction2_sqrt, eps, neg_step_size;
  bool use_weight_decay, decoupled_weight_decay, amsgrad, maximize;
};

/// Host: the factors of one Adam call at step p.step (bias corrections computed in double).
template <typename C>
AdamFactors<C> adam_factors(const AdamParams& p) {
  const double bias_correction1 = 1.0 - std::pow(p.beta1, p.step);
  const double bias_correction2 = 1.0 - std::pow(p.beta2, p.step);
  const double step_size = p.lr / bias_correction1;
  const double bias_correction2_sqrt = std::sqrt(bias_correction2);
  return {static_cast<C>(p.weight_decay),
          static_cast<C>(1.0 - p.lr * p.weight_decay),
          static_cast<C>(p.beta1),
          static_cast<C>(1.0 - p.beta1),
          static_cast<C>(p.beta2),
          static_cast<C>(1.0 - p.beta2),
          static_cast<C>(bias_correction2_sqrt),
          static_cast<C>(p.eps),
          static_cast<C>(-step_size),
          p.weight_decay != 0.0,
          p.decoupled_weight_decay,
          p.amsgrad,
          p.maximize};
}

/// One element of torch.optim.Adam / AdamW: param, exp_avg, exp_avg_sq (and max_exp_avg_sq,
/// read and written only with amsgrad) updated in place from grad.
///   g = maximize ? -g : g;  AdamW: p *= 1 - lr * wd;  Adam: g += wd * p
///   m = beta1 * m + (1 - beta1) * g;  v = beta2 * v + (1 - beta2) * g * g
///   v_max = max(v_max, v) (amsgrad, which then uses v_max for v)
///   p -= step_size * m / (sqrt(v) / sqrt(bias_correction2) + eps)
template <typename C>
OCTO_HOST_DEVICE inline void adam_element(C& param, C grad, C& exp_avg, C& exp_avg_sq,
                                          C& max_exp_avg_sq, const AdamFactors<C>& f) {
  using std::sqrt;
  C g = f.maximize ? static_cast<C>(-grad) : grad;
  if (f.use_weight_decay) {
    if (f.decoupled_weight_decay) {
      param = param * f.decay;
    } else {
      g = g + param * f.weight_decay;
    }
  }
  exp_avg = exp_avg * f.beta1 + g * f.one_minus_beta1;
  exp_avg_sq = exp_avg_sq * f.beta2 + (g * g) * f.one_minus_beta2;
  C second = exp_avg_sq;
  if (f.amsgrad) {
    max_exp_avg_sq = fn::Maximum<C>{}(max_exp_avg_sq, exp_avg_sq);  // NaN propagates
    second = max_exp_avg_sq;
  }
  const C denom = sqrt(second) / f.bias_correction2_sqrt + f.eps;
  param = param + (exp_avg / denom) * f.neg_step_size;
}

}  // namespace octo::kernels::optim_math
