// CPU softmax / log_softmax and their backward. (placeholder: not implemented yet)
#include "core/error.h"
#include "kernels/cpu/cpu_backend.h"

namespace octo::kernels {

#define OCTO_CPU_TODO(name) OCTO_THROW(NotImplementedError, "cpu backend: " name " is not implemented yet")

void CpuBackend::softmax(const TensorArg&, const TensorArg&, int, bool) { OCTO_CPU_TODO("softmax"); }
void CpuBackend::softmax_backward(const TensorArg&, const TensorArg&, const TensorArg&, int, bool) { OCTO_CPU_TODO("softmax_backward"); }

}  // namespace octo::kernels
