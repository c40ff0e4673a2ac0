// backend(device): picks the CPU or CUDA backend.
#include "kernels/backend.h"

#include "kernels/cpu/cpu_backend.h"

namespace octo::kernels {

Backend& cpu_backend() {
  static CpuBackend instance;
  return instance;
}

Backend& backend(Device device) { return device.is_cpu() ? cpu_backend() : cuda_backend(); }

}  // namespace octo::kernels
