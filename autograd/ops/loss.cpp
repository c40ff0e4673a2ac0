// cross_entropy_per_sample: checks, forward through the fused backend primitive, and backward.
#include "autograd/ops/loss.h"

#include "autograd/autocast.h"
#include "autograd/function.h"
#include "autograd/ops/elementwise.h"
#include "autograd/ops/indexing.h"
#include "autograd/ops/nn_ops.h"
#include "autograd/ops/reduce.h"
#include "core/error.h"
#include "kernels/backend.h"
#include "tensor/factories.h"

namespace octo {

using autograd::TensorList;

namespace {

void check_arguments(const Tensor& logits, const Tensor& target, const Tensor& weight,
                     double label_smoothing) {
  const char* op = "cross_entropy";
  OCTO_CHECK_VALUE(logits.defined(), op, ": logits are undefined");
  OCTO_CHECK_VALUE(logits.dim() == 2, op, ": expected logits of shape [N, C], got ",
                   logits.sizes());
  octo::detail::check_floating(op, logits.dtype(), {{"logits", logits.dtype()}});
  OCTO_CHECK_VALUE(target.defined(), op, ": target is undefined");
  OCTO_CHECK_VALUE(target.dtype() == kInt64, op,
                   ": expected target of class indices with dtype int64, got ", target.dtype());
  OCTO_CHECK_VALUE(target.dim() == 1 && target.size(0) == logits.size(0), op,
                   ": expected target of shape [", logits.size(0), "] for logits of shape ",
                   logits.sizes(), ", got ", target.sizes());
  if (weight.defined()) {
    OCTO_CHECK_VALUE(weight.dim() == 1 && weight.size(0) == logits.size(1), op,
                     ": expected a weight with one value per class, of shape [", logits.size(1),
                     "], got ", weight.sizes());
    OCTO_CHECK_VALUE(weight.dtype() == logits.dtype(), op, ": expected a weight of dtype ",
                     logits.dtype(), " (the logits' dtype), got ", weight.dtype());
  }
  OCTO_CHECK_VALUE(label_smoothing >= 0.0 && label_smoothing <= 1.0, op,
                   ": label_smoothing must be in [0, 1], got ", label_smoothing);
  octo::detail::check_same_device({&logits, &target, &weight});
}

/// {rows whose target is not ignore_index, the targets with ignored ones set to 0} -- the second
/// is in range for gather and index_select.
std::pair<Tensor, Tensor> valid_targets(const Tensor& target, int64_t ignore_index) {
  Tensor valid =
      ne(target, scalar_tensor(ignore_index, {.dtype = kInt64, .device = target.device()}));
  Tensor safe = masked_fill(target, logical_not(valid), 0);
  return {valid, safe};
}

/// d(sum_i g[i] * loss[i]) / d weight, in tensor ops: with logp = logits - lse,
///   grad_w[k] = -sum_i g[i] * ((1 - e) * [y_i == k] * logp[i, y_i] + e / C * logp[i, k])
/// over the non-ignored rows i.
Tensor weight_grad(const Tensor& g, const Tensor& logits, const Tensor& lse, const Tensor& target,
                   int64_t ignore_index, double e) {
  const int64_t classes = logits.size(1);
  Tensor grad = zeros({classes}, logits.options());
  if (logits.size(0) == 0) return grad;
  // Under create_graph lse is recomputed, so that its dependence on the logits is recorded too.
  const Tensor logp = autograd::GradMode::is_enabled() ? log_softmax(logits, 1)
                                                       : logits - lse.unsqueeze(1);  // [N, C]
  const Tensor zero = zeros({}, logits.options());
  const auto [valid, safe] = valid_targets(target, ignore_index);
  const Tensor picked = gather(logp, 1, safe.unsqueeze(1)).squeeze(1);  // [N]
  // where() rather than a product with a 0/1 mask: an ignored row's logp may be -inf.
  grad = scatter_add(grad, 0, safe, where(valid, g * picked, zero) * -(1.0 - e));
  if (e > 0) {
    const Tensor rows = where(valid.unsqueeze(1), g.unsqueeze(1) * logp, zero);  // [N, C]
    grad = grad - sum(rows, {0}) * (e / static_cast<double>(classes));
  }
  return grad;
}

/// dloss/dlogits times g in differentiable tensor ops (Note [Fused cross-entropy] gives the
/// formula the fused kernel uses), for a backward under create_graph:
///   gx = g * (softmax(x) * S - coef) on non-ignored rows, 0 on ignored ones.
Tensor logits_grad_composite(const Tensor& g, const Tensor& x, const Tensor& target,
                             const Tensor& weight, int64_t ignore_index, double e) {
  const int64_t classes = x.size(1);
  const auto [valid, safe] = valid_targets(target, ignore_index);
  const Tensor hot = one_hot(safe, classes).to(x.dtype());  // [N, C]
  const Tensor w = weight.defined() ? weight : ones({classes}, x.options());
  const Tensor w_y = index_select(w, 0, safe).unsqueeze(1);  // [N, 1]
  Tensor coef = hot * w_y * (1.0 - e);
  Tensor total = w_y * (1.0 - e);
  if (e > 0) {
    const double share = e / static_cast<double>(classes);
    coef = coef + w * share;
    total = total + sum(w) * share;
  }
  const Tensor rows = g.unsqueeze(1) * (softmax(x, 1) * total - coef);
  return where(valid.unsqueeze(1), rows, zeros({}, x.options()));
}

}  // namespace

Tensor cross_entropy_per_sample(const Tensor& logits, const Tensor& target, const Tensor& weight,
                                int64_t ignore_index, double label_smoothing) {
  if (amp::Cast cast{"cross_entropy", logits}) {  // Note [Autocast]
    return cross_entropy_per_sample(cast(logits), target, cast(weight), ignore_index,
                                    label_smoothing);
  }
  check_arguments(logits, target, weight, label_smoothing);
  const kernels::CrossEntropyParams p{.ignore_index = ignore_index,
                                      .label_smoothing = label_smoothing};
  const int64_t n = logits.size(0);
  Tensor loss = detail::make_empty({n}, logits.dtype(), logits.device());
  // The logsumexp per row, which backward reuses: float32 for 16-bit logits, so that the
  // softmax backward recomputes from it is not rounded twice (Note [16-bit kernels]).
  Tensor lse =
      detail::make_empty({n}, is_half(logits.dtype()) ? kFloat32 : logits.dtype(), logits.device());
  if (n > 0) {
    kernels::backend(logits.device())
        .cross_entropy_forward(loss.arg(), lse.arg(), logits.arg(), target.arg(), weight.arg(), p);
  }
  const bool need_logits = logits.requires_grad();
  const bool need_weight = weight.defined() && weight.requires_grad();
  return autograd::record(
      "CrossEntropyBackward", loss, {logits, weight}, {logits, target, weight, lse},
      [p, need_logits, need_weight](const TensorList& g, const TensorList& s) -> TensorList {
        const Tensor& x = s[0];
        const Tensor& y = s[1];
        const Tensor& w = s[2];
        const Tensor& l = s[3];
        const Tensor go = g[0].dtype() == x.dtype() ? g[0] : g[0].to(x.dtype());  // [N]
        Tensor gx, gw;
        if (need_logits && autograd::GradMode::is_enabled()) {  // Note [create_graph]
          gx = logits_grad_composite(go, x, y, w, p.ignore_index, p.label_smoothing);
        } else if (need_logits) {
          gx = detail::make_empty(x.sizes(), x.dtype(), x.device());
          if (gx.numel() > 0) {
            kernels::backend(x.device())
                .cross_entropy_backward(gx.arg(), go.arg(), x.arg(), l.arg(), y.arg(), w.arg(), p);
          }
        }
        if (need_weight) gw = weight_grad(go, x, l, y, p.ignore_index, p.label_smoothing);
        return {gx, gw};
      });
}

}  // namespace octo
