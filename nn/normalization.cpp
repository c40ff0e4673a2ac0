// BatchNorm1d, BatchNorm2d and LayerNorm: parameters, running statistics and the norm ops.
#include "nn/normalization.h"

#include "autograd/grad_mode.h"
#include "autograd/ops/nn_ops.h"
#include "nn/functional.h"
#include "tensor/factories.h"

namespace octo::nn {

template <typename Derived>
BatchNorm<Derived>::BatchNorm(std::string type_name, int64_t features, BatchNormOptions opts)
    : Cloneable<Derived>(std::move(type_name)), num_features(features), options(opts) {
  OCTO_CHECK_VALUE(features > 0, this->type_name(), ": num_features must be positive, got ",
                   features);
  OCTO_CHECK_VALUE(opts.eps > 0, this->type_name(), ": eps must be positive, got ", opts.eps);
  OCTO_CHECK_VALUE(!opts.momentum || (*opts.momentum >= 0 && *opts.momentum <= 1),
                   this->type_name(), ": momentum must be in [0, 1], got ",
                   opts.momentum.value_or(0));
  reset();
}

template <typename Derived>
void BatchNorm<Derived>::reset() {
  if (options.affine) {
    weight = this->register_parameter("weight", ones({num_features}));
    bias = this->register_parameter("bias", zeros({num_features}));
  } else {
    weight = bias = Tensor();
  }
  if (options.track_running_stats) {
    running_mean = this->register_buffer("running_mean", zeros({num_features}));
    running_var = this->register_buffer("running_var", ones({num_features}));
    num_batches_tracked =
        this->register_buffer("num_batches_tracked", zeros({}, {.dtype = kInt64}));
  } else {
    running_mean = running_var = num_batches_tracked = Tensor();
  }
}

template <typename Derived>
void BatchNorm<Derived>::reset_running_stats() {
  if (!options.track_running_stats) return;
  NoGradGuard no_grad;
  running_mean.zero_();
  running_var.fill_(1);
  num_batches_tracked.zero_();
}

template <typename Derived>
Tensor BatchNorm<Derived>::forward(const Tensor& x) {
  return run(x, /*relu=*/false);
}

template <typename Derived>
Tensor BatchNorm<Derived>::forward_relu(const Tensor& x) {
  return run(x, /*relu=*/true);
}

template <typename Derived>
Tensor BatchNorm<Derived>::run(const Tensor& x, bool relu) {
  OCTO_CHECK_VALUE(x.defined(), this->type_name(), ": input is undefined");
  Derived::check_input_dim(x);
  OCTO_CHECK_VALUE(x.size(1) == num_features, this->type_name(), ": expected input with ",
                   num_features, " channels in dim 1, got input of shape ", x.sizes());
  const bool training = this->is_training();
  double factor = 0.0;  // the weight of this batch in the running averages
  if (training && options.track_running_stats) {
    {
      NoGradGuard no_grad;
      num_batches_tracked.add_(ones({}, {.dtype = kInt64, .device = num_batches_tracked.device()}));
    }
    factor = options.momentum ? *options.momentum
                              : 1.0 / static_cast<double>(num_batches_tracked.item<int64_t>());
  }
  // Without running statistics the layer uses batch statistics even in eval, as PyTorch.
  const bool use_batch_stats = training || !running_mean.defined();
  return (relu ? batch_norm_relu : batch_norm)(x, running_mean, running_var, weight, bias,
                                               use_batch_stats, factor, options.eps);
}

template <typename Derived>
std::string BatchNorm<Derived>::extra_repr() const {
  return std::to_string(num_features) + ", eps=" + detail::py_float(options.eps) +
         ", momentum=" + (options.momentum ? detail::py_float(*options.momentum) : "None") +
         ", affine=" + detail::py_bool(options.affine) +
         ", track_running_stats=" + detail::py_bool(options.track_running_stats);
}

void BatchNorm1d::check_input_dim(const Tensor& x) {
  OCTO_CHECK_VALUE(x.dim() == 2 || x.dim() == 3, "BatchNorm1d: expected 2D or 3D input (got ",
                   x.dim(), "D input of shape ", x.sizes(), ")");
}

void BatchNorm2d::check_input_dim(const Tensor& x) {
  OCTO_CHECK_VALUE(x.dim() == 4, "BatchNorm2d: expected 4D input (got ", x.dim(),
                   "D input of shape ", x.sizes(), ")");
}

template class BatchNorm<BatchNorm1d>;
template class BatchNorm<BatchNorm2d>;

LayerNorm::LayerNorm(Shape shape, LayerNormOptions opts)
    : Cloneable("LayerNorm"), normalized_shape(std::move(shape)), options(opts) {
  OCTO_CHECK_VALUE(!normalized_shape.empty(),
                   "LayerNorm: normalized_shape must have at least one dim");
  for (int64_t s : normalized_shape)
    OCTO_CHECK_VALUE(s > 0, "LayerNorm: normalized_shape must be positive, got ", normalized_shape);
  OCTO_CHECK_VALUE(opts.eps > 0, "LayerNorm: eps must be positive, got ", opts.eps);
  reset();
}

void LayerNorm::reset() {
  weight = bias = Tensor();
  if (!options.elementwise_affine) return;
  weight = register_parameter("weight", ones(normalized_shape));
  if (options.bias) bias = register_parameter("bias", zeros(normalized_shape));
}

Tensor LayerNorm::forward(const Tensor& x) {
  return layer_norm(x, normalized_shape, weight, bias, options.eps);
}

std::string LayerNorm::extra_repr() const {
  std::string s = "(";
  for (size_t i = 0; i < normalized_shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(normalized_shape[i]);
  s += normalized_shape.size() == 1 ? ",)" : ")";
  return s + ", eps=" + detail::py_float(options.eps) +
         ", elementwise_affine=" + detail::py_bool(options.elementwise_affine);
}

}  // namespace octo::nn
