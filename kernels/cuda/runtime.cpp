// The CUDA runtime hooks: device count, current device, allocator lookup, synchronisation.
#include <cuda_runtime.h>

#include "core/device_hooks.h"
#include "core/error.h"

namespace octo {

namespace {
void check(cudaError_t status, const char* call) {
  OCTO_CHECK(status == cudaSuccess, "CUDA error in ", call, ": ", cudaGetErrorString(status));
}

class CudaRuntimeHooks final : public CudaHooks {
 public:
  bool is_built() const override { return true; }
  int device_count() const override {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      cudaGetLastError();  // no driver or no GPU: clear the sticky error, report none
      return 0;
    }
    return n;
  }
  void set_device(int index) const override { check(cudaSetDevice(index), "cudaSetDevice"); }
  Allocator* allocator(int) const override {
    OCTO_THROW(NotImplementedError, "the CUDA allocator is not implemented yet");
  }
  void synchronize(int index) const override {
    check(cudaSetDevice(index), "cudaSetDevice");
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }
  std::string device_name(int index) const override {
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, index), "cudaGetDeviceProperties");
    return prop.name;
  }
};
}  // namespace

const CudaHooks& cuda_hooks() {
  static CudaRuntimeHooks hooks;
  return hooks;
}

}  // namespace octo
