// CPU index_select, index_add, gather, scatter_add. (placeholder: not implemented yet)
#include "core/error.h"
#include "kernels/cpu/cpu_backend.h"

namespace octo::kernels {

#define OCTO_CPU_TODO(name) OCTO_THROW(NotImplementedError, "cpu backend: " name " is not implemented yet")

void CpuBackend::index_select(const TensorArg&, const TensorArg&, int, const TensorArg&) { OCTO_CPU_TODO("index_select"); }
void CpuBackend::index_add(const TensorArg&, int, const TensorArg&, const TensorArg&) { OCTO_CPU_TODO("index_add"); }
void CpuBackend::gather(const TensorArg&, const TensorArg&, int, const TensorArg&) { OCTO_CPU_TODO("gather"); }
void CpuBackend::scatter_add(const TensorArg&, int, const TensorArg&, const TensorArg&) { OCTO_CPU_TODO("scatter_add"); }

}  // namespace octo::kernels
