// CPU elementwise kernels (unary, binary, where) over the shared functors. (placeholder: not implemented yet)
#include "core/error.h"
#include "kernels/cpu/cpu_backend.h"

namespace octo::kernels {

#define OCTO_CPU_TODO(name) OCTO_THROW(NotImplementedError, "cpu backend: " name " is not implemented yet")

void CpuBackend::unary(UnaryOp, const TensorArg&, const TensorArg&, Scalar, Scalar) { OCTO_CPU_TODO("unary"); }
void CpuBackend::binary(BinaryOp, const TensorArg&, const TensorArg&, const TensorArg&, Scalar) { OCTO_CPU_TODO("binary"); }
void CpuBackend::where(const TensorArg&, const TensorArg&, const TensorArg&, const TensorArg&) { OCTO_CPU_TODO("where"); }

}  // namespace octo::kernels
