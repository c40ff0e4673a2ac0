// nn::functional: losses built from differentiable ops, gelu's tanh form, and repr helpers.
#include "nn/functional.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <numbers>

#include "autograd/autocast.h"
#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "autograd/ops/loss.h"
#include "autograd/ops/reduce.h"
#include "core/error.h"
#include "tensor/factories.h"

namespace octo::nn {

namespace detail {

void check_reduction(const std::string& reduction, const char* op) {
  OCTO_CHECK_VALUE(reduction == "mean" || reduction == "sum" || reduction == "none", op,
                   ": reduction must be 'none', 'mean' or 'sum', got '", reduction, "'");
}

std::string py_float(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  // The shortest digits that round-trip (what Python's repr prints), as d.ddde[+-]xx.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  std::string s(buf, res.ptr);
  const size_t e = s.find('e');
  std::string mantissa = s.substr(0, e);
  const int exponent = std::atoi(s.c_str() + e + 1);
  std::string sign;
  if (mantissa[0] == '-') {
    sign = "-";
    mantissa.erase(0, 1);
  }
  std::string digits;
  for (char c : mantissa)
    if (c != '.') digits += c;
  const int decpt = exponent + 1;  // digits[0] sits just left of the decimal point at decpt = 1
  const int n = static_cast<int>(digits.size());
  std::string out;
  if (decpt <= -4 || decpt > 16) {  // Python's repr switches to exponent form here
    out = digits.substr(0, 1);
    if (n > 1) out += "." + digits.substr(1);
    const int a = std::abs(exponent);
    out += exponent < 0 ? "e-" : "e+";
    out += (a < 10 ? "0" : "") + std::to_string(a);
  } else if (decpt <= 0) {
    out = "0." + std::string(static_cast<size_t>(-decpt), '0') + digits;
  } else if (decpt >= n) {
    out = digits + std::string(static_cast<size_t>(decpt - n), '0') + ".0";
  } else {
    out = digits.substr(0, static_cast<size_t>(decpt)) + "." +
          digits.substr(static_cast<size_t>(decpt));
  }
  return sign + out;
}

}  // namespace detail

namespace functional {

namespace {

Tensor reduce(const Tensor& per_element, const std::string& reduction) {
  if (reduction == "none") return per_element;
  if (reduction == "sum") return sum(per_element);
  return mean(per_element);
}

void check_float_input(const Tensor& input, const char* op) {
  OCTO_CHECK_VALUE(input.defined(), op, ": input is undefined");
  OCTO_CHECK_VALUE(input.is_floating_point(), op, ": expected a floating point input, got ",
                   input.dtype());
}

void check_same_shape(const Tensor& input, const Tensor& target, const char* op) {
  OCTO_CHECK_VALUE(target.defined(), op, ": target is undefined");
  OCTO_CHECK_VALUE(input.sizes() == target.sizes(), op, ": expected target of the input's shape ",
                   input.sizes(), ", got ", target.sizes());
}

/// `t` (weight, pos_weight) must broadcast to the input's shape.
void check_broadcasts_to(const Tensor& t, const Tensor& input, const char* op, const char* name) {
  if (!t.defined()) return;
  bool ok = t.dim() <= input.dim();
  for (int64_t k = 1; ok && k <= t.dim(); ++k) ok = t.size(-k) == 1 || t.size(-k) == input.size(-k);
  OCTO_CHECK_VALUE(ok, op, ": ", name, " of shape ", t.sizes(),
                   " cannot be broadcast to the input's shape ", input.sizes());
  OCTO_CHECK_VALUE(t.is_floating_point(), op, ": expected a floating point ", name, ", got ",
                   t.dtype());
}

/// The result of nll_loss's core: the reduced loss and the masks and counts it was built from.
struct NllParts {
  Tensor loss;      // reduced as asked
  Tensor valid;     // bool [N, d...], undefined when no target is ignored
  Tensor target_w;  // weight[target] with ignored entries 0; undefined without weight
  int64_t n_valid = 0;
};

/// nll over log-probabilities logp [N, C, d...] and int64 target [N, d...] (both batched).
NllParts nll_core(const char* op, const Tensor& logp, const Tensor& target, const Tensor& weight_in,
                  int64_t ignore_index, const std::string& reduction) {
  OCTO_CHECK_VALUE(target.defined(), op, ": target is undefined");
  OCTO_CHECK_VALUE(target.dtype() == kInt64, op,
                   ": expected target of class indices with dtype int64, got ", target.dtype());
  octo::detail::check_same_device({&logp, &target, &weight_in});
  const int64_t classes = logp.size(1);
  Shape expected = logp.sizes();
  expected.erase(expected.begin() + 1);
  OCTO_CHECK_VALUE(target.sizes() == expected, op, ": expected target of shape ", expected,
                   " for input of shape ", logp.sizes(), ", got ", target.sizes());
  Tensor weight = weight_in;
  if (weight.defined()) {
    OCTO_CHECK_VALUE(weight.dim() == 1 && weight.size(0) == classes, op,
                     ": expected a weight with one value per class, of shape [", classes, "], got ",
                     weight.sizes());
    OCTO_CHECK_VALUE(weight.is_floating_point(), op, ": expected a floating point weight, got ",
                     weight.dtype());
    weight = weight.to(logp.dtype());
  }

  // Validate the class indices on the host (naming the first bad one) and count the ignored.
  NllParts parts;
  int64_t n_ignored = 0;
  for (int64_t t : target.to_vector<int64_t>()) {
    if (t == ignore_index) {
      ++n_ignored;
      continue;
    }
    OCTO_CHECK_INDEX(t >= 0 && t < classes, op, ": target ", t, " is out of bounds for ", classes,
                     " classes (expected a value in [0, ", classes - 1,
                     "] or ignore_index = ", ignore_index, ")");
  }
  parts.n_valid = target.numel() - n_ignored;
  Tensor safe = target;  // ignored entries point at class 0 so gather stays in range
  if (n_ignored > 0) {
    parts.valid =
        ne(target, scalar_tensor(ignore_index, {.dtype = kInt64, .device = target.device()}));
    safe = masked_fill(target, logical_not(parts.valid), 0);
  }

  // picked[i, d...] = logp[i, target[i, d...], d...]
  Tensor picked = gather(logp, 1, safe.unsqueeze(1)).squeeze(1);
  Tensor per = neg(picked);
  Tensor zero = zeros({}, logp.options());
  if (weight.defined()) {
    parts.target_w = index_select(weight, 0, safe.reshape({-1})).view(target.sizes());
    if (parts.valid.defined()) parts.target_w = where(parts.valid, parts.target_w, zero);
    per = per * parts.target_w;
  }
  if (parts.valid.defined()) per = where(parts.valid, per, zero);

  if (reduction == "none") {
    parts.loss = per;
  } else if (reduction == "sum") {
    parts.loss = sum(per);
  } else if (weight.defined()) {
    parts.loss = sum(per) / sum(parts.target_w);  // NaN when every target is ignored, as torch
  } else {
    parts.loss = sum(per) / static_cast<double>(parts.n_valid);
  }
  return parts;
}

/// Class-probability targets (target has input's shape): -sum_c w_c t_c log_softmax(x)_c.
Tensor cross_entropy_prob(const Tensor& input, const Tensor& target, const CrossEntropyOptions& o) {
  const char* op = "cross_entropy";
  OCTO_CHECK_VALUE(
      target.is_floating_point(), op,
      ": expected a floating point target of class probabilities (the target has the input's shape ",
      input.sizes(), "), got ", target.dtype());
  OCTO_CHECK_VALUE(o.ignore_index < 0, op,
                   ": ignore_index is not supported for class-probability targets, got ",
                   o.ignore_index);
  octo::detail::check_same_device({&input, &target, &o.weight});
  const int64_t cdim = input.dim() == 1 ? 0 : 1;
  const int64_t classes = input.size(cdim);
  Tensor tgt = target;
  if (o.label_smoothing > 0) tgt = tgt * (1.0 - o.label_smoothing) + o.label_smoothing / classes;
  Tensor prod = log_softmax(input, cdim) * tgt;
  if (o.weight.defined()) {
    OCTO_CHECK_VALUE(o.weight.dim() == 1 && o.weight.size(0) == classes, op,
                     ": expected a weight with one value per class, of shape [", classes, "], got ",
                     o.weight.sizes());
    Shape bshape(static_cast<size_t>(input.dim()), 1);
    bshape[static_cast<size_t>(cdim)] = classes;
    prod = prod * o.weight.to(input.dtype()).view(bshape);
  }
  if (o.reduction == "none") return neg(sum(prod, {cdim}));
  if (o.reduction == "sum") return neg(sum(prod));
  return neg(sum(prod)) / static_cast<double>(input.numel() / std::max<int64_t>(classes, 1));
}

/// Class-index targets through the fused op (autograd/ops/loss.h): input [N, C, d...] becomes
/// rows [N * d..., C] (class dim moved last), then the reduction. The mean divides by the summed
/// weights w[y] of the non-ignored targets (their count without weights), as PyTorch does with
/// and without label smoothing; it is NaN when every target is ignored.
Tensor cross_entropy_index(const Tensor& input, const Tensor& target,
                           const CrossEntropyOptions& o) {
  const char* op = "cross_entropy";
  OCTO_CHECK_VALUE(target.dtype() == kInt64, op,
                   ": expected target of class indices with dtype int64, got ", target.dtype());
  octo::detail::check_same_device({&input, &target, &o.weight});
  const bool unbatched = input.dim() == 1;
  if (unbatched) {
    OCTO_CHECK_VALUE(target.dim() == 0, op, ": expected a 0-d target for unbatched input of shape ",
                     input.sizes(), ", got ", target.sizes());
  }
  const Tensor x = unbatched ? input.unsqueeze(0) : input;    // [N, C, d...]
  const Tensor y = unbatched ? target.unsqueeze(0) : target;  // [N, d...]
  const int64_t classes = x.size(1);
  Shape expected = x.sizes();
  expected.erase(expected.begin() + 1);
  OCTO_CHECK_VALUE(y.sizes() == expected, op, ": expected target of shape ", expected,
                   " for input of shape ", x.sizes(), ", got ", y.sizes());
  Tensor weight = o.weight;
  if (weight.defined()) {
    OCTO_CHECK_VALUE(weight.dim() == 1 && weight.size(0) == classes, op,
                     ": expected a weight with one value per class, of shape [", classes, "], got ",
                     weight.sizes());
    OCTO_CHECK_VALUE(weight.is_floating_point(), op, ": expected a floating point weight, got ",
                     weight.dtype());
    weight = weight.to(x.dtype());
  }

  Tensor rows = x;  // [M, C], M = N * d...
  if (x.dim() > 2) {
    Shape perm{0};
    for (int64_t d = 2; d < x.dim(); ++d) perm.push_back(d);
    perm.push_back(1);
    rows = x.permute(perm).reshape({y.numel(), classes});
  }
  const Tensor labels = y.reshape({y.numel()});
  const Tensor per =
      cross_entropy_per_sample(rows, labels, weight, o.ignore_index, o.label_smoothing);  // [M]

  if (o.reduction == "none") {
    const Tensor out = per.view(y.sizes());
    return unbatched ? out.squeeze(0) : out;
  }
  if (o.reduction == "sum") return sum(per);
  const Tensor valid =
      ne(labels, scalar_tensor(o.ignore_index, {.dtype = kInt64, .device = labels.device()}));
  Tensor divisor;
  if (weight.defined()) {
    const Tensor safe = masked_fill(labels, logical_not(valid), 0);  // in range for index_select
    divisor = sum(where(valid, index_select(weight, 0, safe), zeros({}, x.options())));
  } else {
    divisor = sum(valid.to(x.dtype()));
  }
  return sum(per) / divisor;
}

}  // namespace

Tensor gelu(const Tensor& x, const std::string& approximate) {
  if (approximate == "none") return octo::gelu(x);
  OCTO_CHECK_VALUE(approximate == "tanh", "gelu: approximate must be 'none' or 'tanh', got '",
                   approximate, "'");
  const double k = std::sqrt(2.0 / std::numbers::pi);
  return 0.5 * x * (1.0 + octo::tanh(k * (x + 0.044715 * x * x * x)));
}

Tensor nll_loss(const Tensor& input, const Tensor& target, const NLLLossOptions& options) {
  if (amp::Cast cast{"nll_loss", input}) {  // Note [Autocast]
    NLLLossOptions cast_o = options;
    cast_o.weight = cast(options.weight);
    return nll_loss(cast(input), target, cast_o);
  }
  const char* op = "nll_loss";
  nn::detail::check_reduction(options.reduction, op);
  check_float_input(input, op);
  OCTO_CHECK_VALUE(input.dim() >= 1, op, ": expected input of shape [N, C, d1, ...] or [C], got ",
                   input.sizes());
  if (input.dim() == 1) {  // unbatched: [C] with a 0-d target
    OCTO_CHECK_VALUE(target.defined() && target.dim() == 0, op,
                     ": expected a 0-d target for unbatched input of shape ", input.sizes(),
                     ", got ", target.defined() ? target.sizes() : Shape{});
    Tensor l = nll_core(op, input.unsqueeze(0), target.unsqueeze(0), options.weight,
                        options.ignore_index, options.reduction)
                   .loss;
    return options.reduction == "none" ? l.squeeze(0) : l;
  }
  return nll_core(op, input, target, options.weight, options.ignore_index, options.reduction).loss;
}

Tensor cross_entropy(const Tensor& input, const Tensor& target, const CrossEntropyOptions& o) {
  if (amp::Cast cast{"cross_entropy", input}) {  // Note [Autocast]
    CrossEntropyOptions cast_o = o;
    cast_o.weight = cast(o.weight);
    return cross_entropy(cast(input), cast(target), cast_o);
  }
  const char* op = "cross_entropy";
  nn::detail::check_reduction(o.reduction, op);
  check_float_input(input, op);
  OCTO_CHECK_VALUE(target.defined(), op, ": target is undefined");
  OCTO_CHECK_VALUE(input.dim() >= 1, op, ": expected input of shape [N, C, d1, ...] or [C], got ",
                   input.sizes());
  OCTO_CHECK_VALUE(o.label_smoothing >= 0.0 && o.label_smoothing <= 1.0, op,
                   ": label_smoothing must be in [0, 1], got ", o.label_smoothing);
  if (target.sizes() == input.sizes()) return cross_entropy_prob(input, target, o);
  return cross_entropy_index(input, target, o);
}

Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction) {
  if (amp::Cast cast{"mse_loss", input}) return mse_loss(cast(input), cast(target), reduction);
  nn::detail::check_reduction(reduction, "mse_loss");
  check_float_input(input, "mse_loss");
  check_same_shape(input, target, "mse_loss");
  return reduce(square(input - target), reduction);
}

Tensor l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction) {
  if (amp::Cast cast{"l1_loss", input}) return l1_loss(cast(input), cast(target), reduction);
  nn::detail::check_reduction(reduction, "l1_loss");
  check_float_input(input, "l1_loss");
  check_same_shape(input, target, "l1_loss");
  return reduce(abs(input - target), reduction);
}

Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction,
                      double beta) {
  if (amp::Cast cast{"smooth_l1_loss", input})
    return smooth_l1_loss(cast(input), cast(target), reduction, beta);
  nn::detail::check_reduction(reduction, "smooth_l1_loss");
  check_float_input(input, "smooth_l1_loss");
  check_same_shape(input, target, "smooth_l1_loss");
  OCTO_CHECK_VALUE(beta >= 0.0, "smooth_l1_loss: beta must be non-negative, got ", beta);
  Tensor d = abs(input - target);
  if (beta == 0.0) return reduce(d, reduction);
  Tensor small = lt(d, full({}, beta, d.options()));
  return reduce(where(small, (0.5 / beta) * square(d), d - 0.5 * beta), reduction);
}

Tensor huber_loss(const Tensor& input, const Tensor& target, const std::string& reduction,
                  double delta) {
  if (amp::Cast cast{"huber_loss", input})
    return huber_loss(cast(input), cast(target), reduction, delta);
  nn::detail::check_reduction(reduction, "huber_loss");
  check_float_input(input, "huber_loss");
  check_same_shape(input, target, "huber_loss");
  OCTO_CHECK_VALUE(delta > 0.0, "huber_loss: delta must be positive, got ", delta);
  Tensor d = abs(input - target);
  Tensor small = lt(d, full({}, delta, d.options()));
  return reduce(where(small, 0.5 * square(d), delta * (d - 0.5 * delta)), reduction);
}

Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const BCEOptions& options) {
  if (amp::Cast cast{"binary_cross_entropy", input}) {  // Note [Autocast]
    BCEOptions cast_o = options;
    cast_o.weight = cast(options.weight);
    return binary_cross_entropy(cast(input), cast(target), cast_o);
  }
  const char* op = "binary_cross_entropy";
  nn::detail::check_reduction(options.reduction, op);
  check_float_input(input, op);
  check_same_shape(input, target, op);
  OCTO_CHECK_VALUE(target.is_floating_point(), op, ": expected a floating point target, got ",
                   target.dtype());
  check_broadcasts_to(options.weight, input, op, "weight");
  octo::detail::check_same_device({&input, &target, &options.weight});
  Tensor x = input.detach(), t = target.detach().to(input.dtype());
  if (x.numel() > 0) {
    const double lo = min(x).item<double>(), hi = max(x).item<double>();
    OCTO_CHECK_VALUE(lo >= 0.0 && hi <= 1.0, op,
                     ": all elements of input should be between 0 and 1, found values in [", lo,
                     ", ", hi, "]");
  }
  const Tensor w = options.weight.defined() ? options.weight.detach().to(input.dtype()) : Tensor();
  Tensor per;
  {
    // -w (t log x + (1 - t) log(1 - x)), logs clamped at -100 as torch.
    NoGradGuard no_grad;
    per = neg(t * clamp_min(log(x), -100.0) + (1.0 - t) * clamp_min(log(1.0 - x), -100.0));
    if (w.defined()) per = per * w;
  }
  // Recorded by hand: the composite's gradient is 0/0 = NaN where x is exactly 0 or 1.
  per = autograd::record(
      "BinaryCrossEntropyBackward", per, {input, target}, {x, t, w},
      [](const autograd::TensorList& g, const autograd::TensorList& s) -> autograd::TensorList {
        const Tensor &xs = s[0], &ts = s[1], &ws = s[2];
        Tensor gx = g[0] * (xs - ts) / clamp_min((1.0 - xs) * xs, 1e-12);
        Tensor gt = g[0] * (clamp_min(log(1.0 - xs), -100.0) - clamp_min(log(xs), -100.0));
        if (ws.defined()) {
          gx = sum_to(gx * ws, xs.sizes());
          gt = sum_to(gt * ws, ts.sizes());
        }
        return {gx, gt};
      });
  return reduce(per, options.reduction);
}

Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const BCEWithLogitsOptions& options) {
  if (amp::Cast cast{"binary_cross_entropy_with_logits", input}) {  // Note [Autocast]
    BCEWithLogitsOptions cast_o = options;
    cast_o.weight = cast(options.weight);
    cast_o.pos_weight = cast(options.pos_weight);
    return binary_cross_entropy_with_logits(cast(input), cast(target), cast_o);
  }
  const char* op = "binary_cross_entropy_with_logits";
  nn::detail::check_reduction(options.reduction, op);
  check_float_input(input, op);
  check_same_shape(input, target, op);
  OCTO_CHECK_VALUE(target.is_floating_point(), op, ": expected a floating point target, got ",
                   target.dtype());
  check_broadcasts_to(options.weight, input, op, "weight");
  check_broadcasts_to(options.pos_weight, input, op, "pos_weight");
  octo::detail::check_same_device({&input, &target, &options.weight, &options.pos_weight});
  // softplus(-x) = -log(sigmoid(x)) = log1p(exp(-|x|)) + max(-x, 0): never overflows.
  Tensor softplus_neg = log1p(exp(neg(abs(input)))) + clamp_min(neg(input), 0.0);
  Tensor loss;
  if (options.pos_weight.defined()) {
    Tensor log_weight = 1.0 + (options.pos_weight - 1.0) * target;
    loss = (1.0 - target) * input + log_weight * softplus_neg;
  } else {
    loss = (1.0 - target) * input + softplus_neg;
  }
  if (options.weight.defined()) loss = loss * options.weight;
  return reduce(loss, options.reduction);
}

}  // namespace functional
}  // namespace octo::nn
