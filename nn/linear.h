// Linear, Identity and Flatten: the simplest layers.
#pragma once

#include "nn/module.h"

namespace octo::nn {

/// y = x W^T + b with W [out_features, in_features], initialised like torch.nn.Linear:
/// kaiming_uniform_(W, a = sqrt(5)) and b ~ U(-1/sqrt(in), 1/sqrt(in)).
class Linear : public Cloneable<Linear> {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  void reset() override;
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  int64_t in_features, out_features;
  bool has_bias;
  Tensor weight, bias;
};

class Identity : public Cloneable<Identity> {
 public:
  Identity() : Cloneable("Identity") {}
  void reset() override {}
  Tensor forward(const Tensor& x) override { return x; }
};

/// Flattens dims start_dim..end_dim (default: all but the batch dim).
class Flatten : public Cloneable<Flatten> {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1)
      : Cloneable("Flatten"), start_dim(start_dim), end_dim(end_dim) {}
  void reset() override {}
  Tensor forward(const Tensor& x) override { return x.flatten(start_dim, end_dim); }
  std::string extra_repr() const override;
  int64_t start_dim, end_dim;
};

}  // namespace octo::nn
