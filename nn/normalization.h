// Normalisation layers: BatchNorm1d, BatchNorm2d, LayerNorm.
#pragma once

#include <optional>

#include "nn/module.h"

namespace octo::nn {

struct BatchNormOptions {
  double eps = 1e-5;
  /// Weight of the newest batch in the running averages; nullopt: a cumulative average
  /// (1 / num_batches_tracked), as PyTorch's momentum=None.
  std::optional<double> momentum = 0.1;
  /// Learnable per-channel weight (init 1) and bias (init 0).
  bool affine = true;
  /// Keep running_mean / running_var (and use them in eval mode); without them the layer
  /// always normalises with batch statistics.
  bool track_running_stats = true;
};

/// Shared by BatchNorm1d and BatchNorm2d (instantiated for those two in normalization.cpp):
/// parameters "weight", "bias" and buffers "running_mean", "running_var", "num_batches_tracked"
/// (int64, 0-d), named as in PyTorch so state_dicts match. In training the layer normalises with
/// the batch's statistics (biased variance) and updates the running ones (with the unbiased
/// variance); in eval it uses the running statistics.
template <typename Derived>
class BatchNorm : public Cloneable<Derived> {
 public:
  BatchNorm(std::string type_name, int64_t num_features, BatchNormOptions options);
  void reset() override;
  Tensor forward(const Tensor& x) override;
  /// relu(forward(x)), values and gradients, in the norm's own kernels (Note [Fused batch norm +
  /// ReLU] in autograd/ops/norm.cpp). nn::Sequential calls it for a BatchNorm followed by a ReLU.
  Tensor forward_relu(const Tensor& x);
  /// "64, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True" (as PyTorch).
  std::string extra_repr() const override;
  /// running_mean = 0, running_var = 1, num_batches_tracked = 0.
  void reset_running_stats();

  int64_t num_features;
  BatchNormOptions options;
  Tensor weight, bias, running_mean, running_var, num_batches_tracked;

 private:
  Tensor run(const Tensor& x, bool relu);
};

/// Batch normalisation over [N, C] or [N, C, L] input.
class BatchNorm1d : public BatchNorm<BatchNorm1d> {
 public:
  explicit BatchNorm1d(int64_t num_features, BatchNormOptions options = {})
      : BatchNorm("BatchNorm1d", num_features, options) {}
  /// Throws unless x has a shape this layer accepts.
  static void check_input_dim(const Tensor& x);
};

/// Batch normalisation over [N, C, H, W] input.
///   auto bn = std::make_shared<nn::BatchNorm2d>(64);
class BatchNorm2d : public BatchNorm<BatchNorm2d> {
 public:
  explicit BatchNorm2d(int64_t num_features, BatchNormOptions options = {})
      : BatchNorm("BatchNorm2d", num_features, options) {}
  /// Throws unless x has a shape this layer accepts.
  static void check_input_dim(const Tensor& x);
};

extern template class BatchNorm<BatchNorm1d>;
extern template class BatchNorm<BatchNorm2d>;

struct LayerNormOptions {
  double eps = 1e-5;
  /// Learnable weight (init 1) and bias (init 0) of normalized_shape.
  bool elementwise_affine = true;
  /// With elementwise_affine: whether there is a bias.
  bool bias = true;
};

/// Normalises over the last normalized_shape.size() dims:
///   nn::LayerNorm({512})  // x: [..., 512]
class LayerNorm : public Cloneable<LayerNorm> {
 public:
  explicit LayerNorm(Shape normalized_shape, LayerNormOptions options = {});
  void reset() override;
  Tensor forward(const Tensor& x) override;
  /// "(512,), eps=1e-05, elementwise_affine=True" (as PyTorch).
  std::string extra_repr() const override;

  Shape normalized_shape;
  LayerNormOptions options;
  Tensor weight, bias;
};

}  // namespace octo::nn
