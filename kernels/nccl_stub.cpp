// Linked instead of kernels/cuda/nccl.cpp when octo is built without CUDA: NCCL is unavailable.
#include "kernels/collectives.h"

#include "core/error.h"

namespace octo::cuda::nccl {

namespace {
[[noreturn]] void no_cuda(const char* op) {
  OCTO_THROW(
      DeviceError, "nccl::", op,
      ": octo was built without CUDA support; rebuild with -Dcuda=enabled on a machine with the CUDA toolkit and NCCL to use cuda devices");
}
}  // namespace

bool is_available() { return false; }

int version() { no_cuda("version"); }

void broadcast(const std::vector<kernels::TensorArg>&, int) { no_cuda("broadcast"); }

void reduce(const std::vector<kernels::TensorArg>&, int, const kernels::TensorArg&) {
  no_cuda("reduce");
}

UniqueId make_unique_id() { no_cuda("make_unique_id"); }

struct ProcessComm::Impl {};
ProcessComm::ProcessComm(const UniqueId&, int, int, int device) : device_(device) {
  no_cuda("ProcessComm");
}
ProcessComm::~ProcessComm() = default;
std::shared_ptr<Pending> ProcessComm::all_reduce(const kernels::TensorArg&, RedOp,
                                                 const Allocations&) {
  no_cuda("all_reduce");
}
std::shared_ptr<Pending> ProcessComm::broadcast(const kernels::TensorArg&, int,
                                                const Allocations&) {
  no_cuda("broadcast");
}
std::shared_ptr<Pending> ProcessComm::all_gather(const kernels::TensorArg&,
                                                 const kernels::TensorArg&, const Allocations&) {
  no_cuda("all_gather");
}
std::shared_ptr<Pending> ProcessComm::reduce_scatter(const kernels::TensorArg&,
                                                     const kernels::TensorArg&, RedOp,
                                                     const Allocations&) {
  no_cuda("reduce_scatter");
}
void ProcessComm::abort() {}

}  // namespace octo::cuda::nccl
