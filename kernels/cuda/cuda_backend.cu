// The CUDA backend (placeholder until the CUDA backend lands: every primitive throws).
#include "core/error.h"
#include "kernels/backend.h"

namespace octo::kernels {

Backend& cuda_backend() {
  OCTO_THROW(NotImplementedError, "the CUDA backend is not implemented yet");
}

}  // namespace octo::kernels
