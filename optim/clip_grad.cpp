// Gradient clipping, written in tensor ops so it runs on any device.
#include "optim/clip_grad.h"

#include <cmath>

#include "autograd/grad_mode.h"
#include "autograd/ops/elementwise.h"
#include "autograd/ops/indexing.h"
#include "autograd/ops/reduce.h"
#include "core/error.h"
#include "tensor/factories.h"

namespace octo::optim {

namespace {

/// The p-norm (or max-abs norm) of one tensor, as a 0-d tensor of its dtype.
Tensor vector_norm(const Tensor& g, double norm_type) {
  if (g.numel() == 0) return zeros({}, {.dtype = g.dtype(), .device = g.device()});
  Tensor a = abs(g);
  if (std::isinf(norm_type)) return max(a);
  if (norm_type == 2.0) return sqrt(sum(mul(a, a)));
  if (norm_type == 1.0) return sum(a);
  return pow(sum(pow(a, norm_type)), 1.0 / norm_type);
}

}  // namespace

Tensor clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type,
                       bool error_if_nonfinite) {
  OCTO_CHECK_VALUE(norm_type > 0.0 && !(std::isinf(norm_type) && norm_type < 0),
                   "clip_grad_norm_: expected norm_type > 0 or inf, got ", norm_type);
  NoGradGuard no_grad;
  std::vector<Tensor> grads;
  for (const Tensor& p : params) {
    OCTO_CHECK_VALUE(p.defined(), "clip_grad_norm_: got an undefined tensor among the parameters");
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  if (grads.empty()) return scalar_tensor(0.0);
  const Device device = grads[0].device();
  const DType dtype = grads[0].dtype();
  // Combine the per-gradient norms on the first gradient's device.
  std::vector<Tensor> norms;
  for (const Tensor& g : grads) norms.push_back(vector_norm(g, norm_type).to(device, dtype));
  Tensor total = vector_norm(stack(norms), norm_type);
  if (error_if_nonfinite) {
    const double v = total.to(kCPU).to(kFloat64).item<double>();
    OCTO_CHECK_VALUE(
        std::isfinite(v), "clip_grad_norm_: the total norm of order ", norm_type,
        " for gradients from `parameters` is non-finite (", v,
        "), so it cannot be clipped. To disable this error and scale the gradients by the non-finite norm anyway, set error_if_nonfinite=false");
  }
  Tensor clip_coef = clamp_max(max_norm / (total + 1e-6), 1.0);
  for (Tensor& g : grads) g.mul_(clip_coef.to(g.device(), g.dtype()));
  return total;
}

void clip_grad_value_(const std::vector<Tensor>& params, double clip_value) {
  OCTO_CHECK_VALUE(clip_value >= 0.0, "clip_grad_value_: expected clip_value >= 0, got ",
                   clip_value);
  NoGradGuard no_grad;
  for (const Tensor& p : params) {
    OCTO_CHECK_VALUE(p.defined(), "clip_grad_value_: got an undefined tensor among the parameters");
    Tensor g = p.grad();
    if (!g.defined()) continue;
    g.copy_(clamp(g, -clip_value, clip_value));
  }
}

}  // namespace octo::optim
