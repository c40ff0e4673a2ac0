// batch_norm and layer_norm, forward and backward. (placeholder: not implemented yet)
#include "autograd/ops/nn_ops.h"
#include "core/error.h"

#define OCTO_TODO(name) OCTO_THROW(::octo::NotImplementedError, name " is not implemented yet")

namespace octo {

Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight, const Tensor& bias, bool training, double momentum, double eps) { OCTO_TODO("batch_norm"); }
Tensor layer_norm(const Tensor& input, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias, double eps) { OCTO_TODO("layer_norm"); }

}  // namespace octo
