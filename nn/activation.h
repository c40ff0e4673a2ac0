// Activation layers: ReLU, LeakyReLU, GELU, SiLU, Tanh, Sigmoid, Softmax, LogSoftmax.
#pragma once

#include <string>

#include "nn/module.h"

namespace octo::nn {

/// max(x, 0).
class ReLU : public Cloneable<ReLU> {
 public:
  ReLU() : Cloneable("ReLU") {}
  void reset() override {}
  Tensor forward(const Tensor& x) override;
};

/// x where x >= 0, negative_slope * x elsewhere.
class LeakyReLU : public Cloneable<LeakyReLU> {
 public:
  explicit LeakyReLU(double negative_slope = 0.01)
      : Cloneable("LeakyReLU"), negative_slope(negative_slope) {}
  void reset() override {}
  Tensor forward(const Tensor& x) override;
  /// "negative_slope=0.01"
  std::string extra_repr() const override;
  double negative_slope;
};

/// x * Phi(x) (approximate = "none"), or its tanh approximation (approximate = "tanh").
class GELU : public Cloneable<GELU> {
 public:
  explicit GELU(std::string approximate = "none");
  void reset() override {}
  Tensor forward(const Tensor& x) override;
  /// "approximate='none'"
  std::string extra_repr() const override;
  std::string approximate;
};

/// x * sigmoid(x) (also called swish).
class SiLU : public Cloneable<SiLU> {
 public:
  SiLU() : Cloneable("SiLU") {}
  void reset() override {}
  Tensor forward(const Tensor& x) override;
};

class Tanh : public Cloneable<Tanh> {
 public:
  Tanh() : Cloneable("Tanh") {}
  void reset() override {}
  Tensor forward(const Tensor& x) override;
};

class Sigmoid : public Cloneable<Sigmoid> {
 public:
  Sigmoid() : Cloneable("Sigmoid") {}
  void reset() override {}
  Tensor forward(const Tensor& x) override;
};

/// softmax along `dim`.
class Softmax : public Cloneable<Softmax> {
 public:
  explicit Softmax(int64_t dim) : Cloneable("Softmax"), dim(dim) {}
  void reset() override {}
  Tensor forward(const Tensor& x) override;
  /// "dim=1"
  std::string extra_repr() const override;
  int64_t dim;
};

/// log(softmax(x)) along `dim`, computed stably.
class LogSoftmax : public Cloneable<LogSoftmax> {
 public:
  explicit LogSoftmax(int64_t dim) : Cloneable("LogSoftmax"), dim(dim) {}
  void reset() override {}
  Tensor forward(const Tensor& x) override;
  /// "dim=1"
  std::string extra_repr() const override;
  int64_t dim;
};

}  // namespace octo::nn
