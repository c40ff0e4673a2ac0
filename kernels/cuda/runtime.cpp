// The CUDA runtime hooks: device count, current device, allocator lookup (device and pinned host),
// synchronisation.
#include <cuda_runtime_api.h>

#include "core/device_hooks.h"
#include "core/error.h"
#include "kernels/cuda/caching_allocator.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/host_allocator.h"

namespace octo {

namespace {

class CudaRuntimeHooks final : public CudaHooks {
 public:
  bool is_built() const override { return true; }
  // The set of visible devices is fixed at CUDA initialisation (CUDA_VISIBLE_DEVICES), so it is
  // counted once; every tensor allocation checks its device against it.
  int device_count() const override {
    static const int count = [] {
      int n = 0;
      if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();  // no driver or no GPU: clear the error, report none
        return 0;
      }
      return n;
    }();
    return count;
  }
  void set_device(int index) const override { OCTO_CUDA_CHECK(cudaSetDevice(index)); }
  Allocator* allocator(int index) const override { return cuda::caching_allocator(index); }
  void synchronize(int index) const override {
    cuda::detail::CudaDeviceScope scope(index);
    OCTO_CUDA_CHECK(cudaDeviceSynchronize());
  }
  std::string device_name(int index) const override {
    cudaDeviceProp prop{};
    OCTO_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
    return prop.name;
  }
  Allocator* pinned_allocator() const override { return cuda::host_allocator(); }
  bool is_pinned(const void* p) const override { return cuda::is_pinned(p); }
};

}  // namespace

const CudaHooks& cuda_hooks() {
  static CudaRuntimeHooks hooks;
  return hooks;
}

}  // namespace octo
