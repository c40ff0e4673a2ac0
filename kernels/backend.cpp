// backend(device): picks the CPU or CUDA backend.
#include "kernels/backend.h"

namespace octo::kernels {

Backend& backend(Device device) { return device.is_cpu() ? cpu_backend() : cuda_backend(); }

}  // namespace octo::kernels
