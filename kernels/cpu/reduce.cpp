// CPU reductions over any set of dims. (placeholder: not implemented yet)
#include "core/error.h"
#include "kernels/cpu/cpu_backend.h"

namespace octo::kernels {

#define OCTO_CPU_TODO(name) OCTO_THROW(NotImplementedError, "cpu backend: " name " is not implemented yet")

void CpuBackend::reduce(ReduceOp, const TensorArg&, const TensorArg&, Scalar) { OCTO_CPU_TODO("reduce"); }

}  // namespace octo::kernels
