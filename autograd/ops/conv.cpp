// conv2d, forward and backward. (placeholder: not implemented yet)
#include "autograd/ops/nn_ops.h"
#include "core/error.h"

#define OCTO_TODO(name) OCTO_THROW(::octo::NotImplementedError, name " is not implemented yet")

namespace octo {

Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, std::array<int64_t, 2> stride, std::array<int64_t, 2> padding, std::array<int64_t, 2> dilation, int64_t groups) { OCTO_TODO("conv2d"); }

}  // namespace octo
