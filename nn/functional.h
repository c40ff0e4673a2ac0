// nn::functional: losses (cross_entropy, nll_loss, mse_loss, ...) and activations, as functions.
#pragma once

#include <string>

#include "autograd/ops/elementwise.h"
#include "autograd/ops/indexing.h"
#include "autograd/ops/linalg.h"
#include "autograd/ops/nn_ops.h"
#include "tensor/tensor.h"

/// The functional forms of octo's layers and losses, as torch.nn.functional:
///
///   namespace F = octo::nn::functional;
///   Tensor loss = F::cross_entropy(logits, labels, {.label_smoothing = 0.1});
///
/// Every loss is a composite of differentiable ops (log_softmax, gather, ...), so its gradient
/// comes from autograd. `reduction` is "mean" (the default), "sum" or "none", as in PyTorch;
/// anything else is a ValueError.
namespace octo::nn::functional {

// --- activations and layers (the ops themselves live in autograd/ops) --------------------------
using octo::adaptive_avg_pool2d;
using octo::avg_pool2d;
using octo::batch_norm;
using octo::batch_norm_relu;
using octo::conv2d;
using octo::dropout;
using octo::embedding;
using octo::layer_norm;
using octo::leaky_relu;
using octo::linear;
using octo::log_softmax;
using octo::max_pool2d;
using octo::one_hot;
using octo::relu;
using octo::sigmoid;
using octo::silu;
using octo::softmax;
using octo::tanh;

/// GELU: approximate "none" is the exact x * Phi(x); "tanh" is
/// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), as torch.nn.functional.gelu.
Tensor gelu(const Tensor& x, const std::string& approximate = "none");

// --- losses ------------------------------------------------------------------------------------

struct CrossEntropyOptions {
  /// Optional per-class rescaling weight [C].
  Tensor weight = {};
  /// Targets equal to this contribute nothing (and do not count towards the mean).
  int64_t ignore_index = -100;
  std::string reduction = "mean";
  /// In [0, 1]: the target becomes (1 - e) * one_hot + e / C.
  double label_smoothing = 0.0;
};

/// torch.nn.functional.cross_entropy: log_softmax over dim 1 followed by nll_loss. With class
/// indices it is computed in one fused pass per row (octo::cross_entropy_per_sample).
/// input: [N, C], [N, C, d1, ...] or unbatched [C]. target: int64 class indices [N] / [N, d1, ...]
/// / [], or class probabilities with input's shape (floating point; ignore_index must then be
/// negative). With reduction "mean" and class indices the result is
/// sum_i w[y_i] * loss_i / sum_i w[y_i] over the non-ignored targets (NaN when all are ignored).
///
///   auto loss = F::cross_entropy(logits, labels, {.weight = class_weights, .ignore_index = 0});
Tensor cross_entropy(const Tensor& input, const Tensor& target,
                     const CrossEntropyOptions& options = {});

struct NLLLossOptions {
  Tensor weight = {};
  int64_t ignore_index = -100;
  std::string reduction = "mean";
};

/// torch.nn.functional.nll_loss: loss_i = -w[y_i] * input[i, y_i] for log-probability input.
/// Shapes as cross_entropy's class-index form. An out-of-range target is an IndexError.
Tensor nll_loss(const Tensor& input, const Tensor& target, const NLLLossOptions& options = {});

/// Mean (or sum, or elementwise) squared error; input and target must have the same shape.
Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean");
/// Mean (or sum, or elementwise) absolute error; input and target must have the same shape.
Tensor l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean");
/// 0.5 d^2 / beta where |d| < beta, |d| - 0.5 beta elsewhere (d = input - target); beta = 0 is L1.
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target,
                      const std::string& reduction = "mean", double beta = 1.0);
/// 0.5 d^2 where |d| < delta, delta (|d| - 0.5 delta) elsewhere.
Tensor huber_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean",
                  double delta = 1.0);

struct BCEOptions {
  /// Optional weight, broadcast to the input's shape.
  Tensor weight = {};
  std::string reduction = "mean";
};

/// Binary cross entropy of probabilities in [0, 1]: -w (t log x + (1 - t) log(1 - x)), with the
/// logarithms clamped at -100 as PyTorch does. Prefer binary_cross_entropy_with_logits.
Tensor binary_cross_entropy(const Tensor& input, const Tensor& target,
                            const BCEOptions& options = {});

struct BCEWithLogitsOptions {
  /// Optional weight, broadcast to the input's shape.
  Tensor weight = {};
  std::string reduction = "mean";
  /// Optional weight of the positive examples, broadcast to the input (usually [C]).
  Tensor pos_weight = {};
};

/// Sigmoid + binary cross entropy in one numerically stable expression:
/// (1 - t) x + (1 + (pw - 1) t) (log1p(exp(-|x|)) + max(-x, 0)), times weight.
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const BCEWithLogitsOptions& options = {});

}  // namespace octo::nn::functional

namespace octo::nn::detail {
/// Throws ValueError unless reduction is "none", "mean" or "sum".
void check_reduction(const std::string& reduction, const char* op);
/// Python's repr of a float: 0.1, 1e-05, 1.0, 1e+16.
std::string py_float(double v);
/// "True" / "False".
inline const char* py_bool(bool b) { return b ? "True" : "False"; }
}  // namespace octo::nn::detail
