// Dropout: zeroes elements with probability p in training; the identity in eval.
#pragma once

#include "nn/module.h"

namespace octo::nn {

/// In training, each element is zeroed with probability p and the rest are scaled by 1/(1-p),
/// so the expected output equals the input; in eval mode the input passes through unchanged.
class Dropout : public Cloneable<Dropout> {
 public:
  explicit Dropout(double p = 0.5);
  void reset() override {}
  Tensor forward(const Tensor& x) override;
  /// "p=0.5, inplace=False" (as PyTorch; octo's dropout is never in place).
  std::string extra_repr() const override;
  double p;
};

}  // namespace octo::nn
