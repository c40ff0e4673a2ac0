// cpu_backend(): the process-wide CPU backend (kernels/backend.h declares it).
#include "kernels/cpu/cpu_backend.h"

namespace octo::kernels {

Backend& cpu_backend() {
  static CpuBackend instance;
  return instance;
}

}  // namespace octo::kernels
