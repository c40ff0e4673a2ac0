// CPU conv2d forward and backward (im2col + GEMM). (placeholder: not implemented yet)
#include "core/error.h"
#include "kernels/cpu/cpu_backend.h"

namespace octo::kernels {

#define OCTO_CPU_TODO(name) OCTO_THROW(NotImplementedError, "cpu backend: " name " is not implemented yet")

void CpuBackend::conv2d_forward(const TensorArg&, const TensorArg&, const TensorArg&, const TensorArg&, const Conv2dParams&) { OCTO_CPU_TODO("conv2d_forward"); }
void CpuBackend::conv2d_backward_input(const TensorArg&, const TensorArg&, const TensorArg&, const Conv2dParams&) { OCTO_CPU_TODO("conv2d_backward_input"); }
void CpuBackend::conv2d_backward_weight(const TensorArg&, const TensorArg&, const TensorArg&, const Conv2dParams&) { OCTO_CPU_TODO("conv2d_backward_weight"); }

}  // namespace octo::kernels
