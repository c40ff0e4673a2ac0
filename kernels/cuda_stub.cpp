// Linked instead of kernels/cuda/ when octo is built without CUDA: every use says so.
#include "core/device_hooks.h"
#include "core/error.h"
#include "kernels/backend.h"

namespace octo {

namespace {
[[noreturn]] void no_cuda() {
  OCTO_THROW(
      DeviceError,
      "octo was built without CUDA support; rebuild with -Dcuda=enabled on a machine with the CUDA toolkit to use cuda devices");
}

class NoCudaHooks final : public CudaHooks {
 public:
  bool is_built() const override { return false; }
  int device_count() const override { return 0; }
  void set_device(int) const override { no_cuda(); }
  Allocator* allocator(int) const override { no_cuda(); }
  void synchronize(int) const override { no_cuda(); }
  std::string device_name(int) const override { no_cuda(); }
  Allocator* pinned_allocator() const override { no_cuda(); }
  bool is_pinned(const void*) const override { return false; }
};
}  // namespace

const CudaHooks& cuda_hooks() {
  static NoCudaHooks hooks;
  return hooks;
}

namespace kernels {
Backend& cuda_backend() { no_cuda(); }
}  // namespace kernels

}  // namespace octo
