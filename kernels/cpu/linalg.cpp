// CPU batched matrix multiply through Eigen. (placeholder: not implemented yet)
#include "core/error.h"
#include "kernels/cpu/cpu_backend.h"

namespace octo::kernels {

#define OCTO_CPU_TODO(name) OCTO_THROW(NotImplementedError, "cpu backend: " name " is not implemented yet")

void CpuBackend::bmm(const TensorArg&, const TensorArg&, const TensorArg&, double, double) { OCTO_CPU_TODO("bmm"); }

}  // namespace octo::kernels
