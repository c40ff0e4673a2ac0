// Loss modules: CrossEntropyLoss, NLLLoss, MSELoss, L1Loss, SmoothL1Loss, HuberLoss, BCELoss,
// BCEWithLogitsLoss -- modules over nn::functional's losses.
#pragma once

#include <string>
#include <vector>

#include "nn/functional.h"
#include "nn/module.h"

namespace octo::nn {

/// The base of the loss modules: forward(input, target), callable as (*loss)(input, target), and
/// forward_values with two tensor inputs (for DataParallel-style callers).
template <typename Derived>
class Loss : public Cloneable<Derived> {
 public:
  using Cloneable<Derived>::Cloneable;
  using Module::forward;
  virtual Tensor forward(const Tensor& input, const Tensor& target) = 0;
  Tensor operator()(const Tensor& input, const Tensor& target) { return forward(input, target); }
  Value forward_values(const std::vector<Value>& inputs) override {
    OCTO_CHECK_VALUE(inputs.size() == 2 && inputs[0].is_tensor() && inputs[1].is_tensor(),
                     this->type_name(), ": expected two tensor inputs (input, target), got ",
                     inputs.size(), " inputs");
    return forward(inputs[0].tensor(), inputs[1].tensor());
  }
};

/// functional::cross_entropy as a module. A class weight is registered as buffer "weight".
///   nn::CrossEntropyLoss criterion({.label_smoothing = 0.1});
///   Tensor loss = criterion(logits, labels);
class CrossEntropyLoss : public Loss<CrossEntropyLoss> {
 public:
  explicit CrossEntropyLoss(functional::CrossEntropyOptions options = {});
  void reset() override;
  Tensor forward(const Tensor& input, const Tensor& target) override;
  functional::CrossEntropyOptions options;
  Tensor weight;
};

/// functional::nll_loss as a module (on log-probabilities, e.g. after LogSoftmax).
class NLLLoss : public Loss<NLLLoss> {
 public:
  explicit NLLLoss(functional::NLLLossOptions options = {});
  void reset() override;
  Tensor forward(const Tensor& input, const Tensor& target) override;
  functional::NLLLossOptions options;
  Tensor weight;
};

class MSELoss : public Loss<MSELoss> {
 public:
  explicit MSELoss(std::string reduction = "mean");
  void reset() override {}
  Tensor forward(const Tensor& input, const Tensor& target) override;
  std::string reduction;
};

class L1Loss : public Loss<L1Loss> {
 public:
  explicit L1Loss(std::string reduction = "mean");
  void reset() override {}
  Tensor forward(const Tensor& input, const Tensor& target) override;
  std::string reduction;
};

class SmoothL1Loss : public Loss<SmoothL1Loss> {
 public:
  explicit SmoothL1Loss(std::string reduction = "mean", double beta = 1.0);
  void reset() override {}
  Tensor forward(const Tensor& input, const Tensor& target) override;
  std::string reduction;
  double beta;
};

class HuberLoss : public Loss<HuberLoss> {
 public:
  explicit HuberLoss(std::string reduction = "mean", double delta = 1.0);
  void reset() override {}
  Tensor forward(const Tensor& input, const Tensor& target) override;
  std::string reduction;
  double delta;
};

/// functional::binary_cross_entropy (on probabilities) as a module.
class BCELoss : public Loss<BCELoss> {
 public:
  explicit BCELoss(functional::BCEOptions options = {});
  void reset() override;
  Tensor forward(const Tensor& input, const Tensor& target) override;
  functional::BCEOptions options;
  Tensor weight;
};

/// functional::binary_cross_entropy_with_logits as a module; weight and pos_weight are
/// registered as buffers "weight" and "pos_weight" when given.
class BCEWithLogitsLoss : public Loss<BCEWithLogitsLoss> {
 public:
  explicit BCEWithLogitsLoss(functional::BCEWithLogitsOptions options = {});
  void reset() override;
  Tensor forward(const Tensor& input, const Tensor& target) override;
  functional::BCEWithLogitsOptions options;
  Tensor weight, pos_weight;
};

}  // namespace octo::nn
