// CPU batch-norm forward and backward. (placeholder: not implemented yet)
#include "core/error.h"
#include "kernels/cpu/cpu_backend.h"

namespace octo::kernels {

#define OCTO_CPU_TODO(name) OCTO_THROW(NotImplementedError, "cpu backend: " name " is not implemented yet")

void CpuBackend::batch_norm_forward(const TensorArg&, const TensorArg&, const TensorArg&, const TensorArg&, const TensorArg&, const TensorArg&, const TensorArg&, const TensorArg&, bool, double, double) { OCTO_CPU_TODO("batch_norm_forward"); }
void CpuBackend::batch_norm_backward(const TensorArg&, const TensorArg&, const TensorArg&, const TensorArg&, const TensorArg&, const TensorArg&, const TensorArg&, const TensorArg&) { OCTO_CPU_TODO("batch_norm_backward"); }

}  // namespace octo::kernels
