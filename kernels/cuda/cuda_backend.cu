// The CUDA backend object.
#include "kernels/cuda/cuda_backend.h"

namespace octo::kernels {

Backend& cuda_backend() {
  static CudaBackend instance;
  return instance;
}

}  // namespace octo::kernels
