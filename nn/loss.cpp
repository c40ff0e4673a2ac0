// Loss modules: validate options up front, hold weights as buffers, call nn::functional.
#include "nn/loss.h"

namespace octo::nn {

namespace {
/// A copy of an optional weight for registration as a buffer (so Module::to and clone() move
/// the module's copy, never the caller's tensor).
Tensor buffer_copy(const Tensor& t) { return t.defined() ? t.detach().clone() : Tensor(); }
}  // namespace

CrossEntropyLoss::CrossEntropyLoss(functional::CrossEntropyOptions o)
    : Loss("CrossEntropyLoss"), options(std::move(o)) {
  detail::check_reduction(options.reduction, "CrossEntropyLoss");
  OCTO_CHECK_VALUE(options.label_smoothing >= 0.0 && options.label_smoothing <= 1.0,
                   "CrossEntropyLoss: label_smoothing must be in [0, 1], got ",
                   options.label_smoothing);
  reset();
}
void CrossEntropyLoss::reset() {
  weight = Tensor();
  if (options.weight.defined()) weight = register_buffer("weight", buffer_copy(options.weight));
}
Tensor CrossEntropyLoss::forward(const Tensor& input, const Tensor& target) {
  functional::CrossEntropyOptions o = options;
  o.weight = weight;
  return functional::cross_entropy(input, target, o);
}

NLLLoss::NLLLoss(functional::NLLLossOptions o) : Loss("NLLLoss"), options(std::move(o)) {
  detail::check_reduction(options.reduction, "NLLLoss");
  reset();
}
void NLLLoss::reset() {
  weight = Tensor();
  if (options.weight.defined()) weight = register_buffer("weight", buffer_copy(options.weight));
}
Tensor NLLLoss::forward(const Tensor& input, const Tensor& target) {
  functional::NLLLossOptions o = options;
  o.weight = weight;
  return functional::nll_loss(input, target, o);
}

MSELoss::MSELoss(std::string r) : Loss("MSELoss"), reduction(std::move(r)) {
  detail::check_reduction(reduction, "MSELoss");
}
Tensor MSELoss::forward(const Tensor& input, const Tensor& target) {
  return functional::mse_loss(input, target, reduction);
}

L1Loss::L1Loss(std::string r) : Loss("L1Loss"), reduction(std::move(r)) {
  detail::check_reduction(reduction, "L1Loss");
}
Tensor L1Loss::forward(const Tensor& input, const Tensor& target) {
  return functional::l1_loss(input, target, reduction);
}

SmoothL1Loss::SmoothL1Loss(std::string r, double b)
    : Loss("SmoothL1Loss"), reduction(std::move(r)), beta(b) {
  detail::check_reduction(reduction, "SmoothL1Loss");
  OCTO_CHECK_VALUE(beta >= 0.0, "SmoothL1Loss: beta must be non-negative, got ", beta);
}
Tensor SmoothL1Loss::forward(const Tensor& input, const Tensor& target) {
  return functional::smooth_l1_loss(input, target, reduction, beta);
}

HuberLoss::HuberLoss(std::string r, double d)
    : Loss("HuberLoss"), reduction(std::move(r)), delta(d) {
  detail::check_reduction(reduction, "HuberLoss");
  OCTO_CHECK_VALUE(delta > 0.0, "HuberLoss: delta must be positive, got ", delta);
}
Tensor HuberLoss::forward(const Tensor& input, const Tensor& target) {
  return functional::huber_loss(input, target, reduction, delta);
}

BCELoss::BCELoss(functional::BCEOptions o) : Loss("BCELoss"), options(std::move(o)) {
  detail::check_reduction(options.reduction, "BCELoss");
  reset();
}
void BCELoss::reset() {
  weight = Tensor();
  if (options.weight.defined()) weight = register_buffer("weight", buffer_copy(options.weight));
}
Tensor BCELoss::forward(const Tensor& input, const Tensor& target) {
  functional::BCEOptions o = options;
  o.weight = weight;
  return functional::binary_cross_entropy(input, target, o);
}

BCEWithLogitsLoss::BCEWithLogitsLoss(functional::BCEWithLogitsOptions o)
    : Loss("BCEWithLogitsLoss"), options(std::move(o)) {
  detail::check_reduction(options.reduction, "BCEWithLogitsLoss");
  reset();
}
void BCEWithLogitsLoss::reset() {
  weight = pos_weight = Tensor();
  if (options.weight.defined()) weight = register_buffer("weight", buffer_copy(options.weight));
  if (options.pos_weight.defined())
    pos_weight = register_buffer("pos_weight", buffer_copy(options.pos_weight));
}
Tensor BCEWithLogitsLoss::forward(const Tensor& input, const Tensor& target) {
  functional::BCEWithLogitsOptions o = options;
  o.weight = weight;
  o.pos_weight = pos_weight;
  return functional::binary_cross_entropy_with_logits(input, target, o);
}

}  // namespace octo::nn
