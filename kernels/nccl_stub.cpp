// Linked instead of kernels/cuda/nccl.cpp when octo is built without CUDA: NCCL is unavailable.
#include "kernels/cuda/nccl.h"

#include "core/error.h"

namespace octo::cuda::nccl {

namespace {
[[noreturn]] void no_cuda(const char* op) {
  OCTO_THROW(DeviceError, "nccl::", op,
             ": octo was built without CUDA support; rebuild with -Dcuda=enabled on a machine "
             "with the CUDA toolkit and NCCL to use cuda devices");
}
}  // namespace

bool is_available() { return false; }

int version() { no_cuda("version"); }

void broadcast(const std::vector<kernels::TensorArg>&, int) { no_cuda("broadcast"); }

void reduce(const std::vector<kernels::TensorArg>&, int, const kernels::TensorArg&) {
  no_cuda("reduce");
}

}  // namespace octo::cuda::nccl
