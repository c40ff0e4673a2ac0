// CPU random fills over Philox (uniform, normal, bernoulli, randint). (placeholder: not implemented yet)
#include "core/error.h"
#include "kernels/cpu/cpu_backend.h"

namespace octo::kernels {

#define OCTO_CPU_TODO(name) OCTO_THROW(NotImplementedError, "cpu backend: " name " is not implemented yet")

void CpuBackend::uniform(const TensorArg&, double, double, GeneratorState) { OCTO_CPU_TODO("uniform"); }
void CpuBackend::normal(const TensorArg&, double, double, GeneratorState) { OCTO_CPU_TODO("normal"); }
void CpuBackend::bernoulli(const TensorArg&, double, GeneratorState) { OCTO_CPU_TODO("bernoulli"); }
void CpuBackend::randint(const TensorArg&, int64_t, int64_t, GeneratorState) { OCTO_CPU_TODO("randint"); }

}  // namespace octo::kernels
