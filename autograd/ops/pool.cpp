// max/avg/adaptive pooling, forward and backward. (placeholder: not implemented yet)
#include "autograd/ops/nn_ops.h"
#include "core/error.h"

#define OCTO_TODO(name) OCTO_THROW(::octo::NotImplementedError, name " is not implemented yet")

namespace octo {

Tensor max_pool2d(const Tensor& input, std::array<int64_t, 2> kernel_size, std::array<int64_t, 2> stride, std::array<int64_t, 2> padding, std::array<int64_t, 2> dilation, bool ceil_mode) { OCTO_TODO("max_pool2d"); }
Tensor avg_pool2d(const Tensor& input, std::array<int64_t, 2> kernel_size, std::array<int64_t, 2> stride, std::array<int64_t, 2> padding, bool ceil_mode, bool count_include_pad) { OCTO_TODO("avg_pool2d"); }
Tensor adaptive_avg_pool2d(const Tensor& input, std::array<int64_t, 2> output_size) { OCTO_TODO("adaptive_avg_pool2d"); }

}  // namespace octo
