// CPU max and average pooling, forward and backward. (placeholder: not implemented yet)
#include "core/error.h"
#include "kernels/cpu/cpu_backend.h"

namespace octo::kernels {

#define OCTO_CPU_TODO(name) OCTO_THROW(NotImplementedError, "cpu backend: " name " is not implemented yet")

void CpuBackend::max_pool2d_forward(const TensorArg&, const TensorArg&, const TensorArg&, const Pool2dParams&) { OCTO_CPU_TODO("max_pool2d_forward"); }
void CpuBackend::max_pool2d_backward(const TensorArg&, const TensorArg&, const TensorArg&, const Pool2dParams&) { OCTO_CPU_TODO("max_pool2d_backward"); }
void CpuBackend::avg_pool2d_forward(const TensorArg&, const TensorArg&, const Pool2dParams&) { OCTO_CPU_TODO("avg_pool2d_forward"); }
void CpuBackend::avg_pool2d_backward(const TensorArg&, const TensorArg&, const Pool2dParams&) { OCTO_CPU_TODO("avg_pool2d_backward"); }

}  // namespace octo::kernels
