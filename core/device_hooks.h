// The CUDA runtime as seen from code that must not include CUDA headers, plus the current device.
#pragma once

#include <string>

#include "core/device.h"

namespace octo {

class Allocator;  // core/allocator.h; only pointers pass here, so allocator.cpp may include this

/// What core/ and tensor/ need from the CUDA runtime. kernels/cuda/ implements it; a build without
/// CUDA links a stub whose calls throw "octo was built without CUDA support" (device_count() is 0).
class CudaHooks {
 public:
  virtual ~CudaHooks() = default;
  virtual bool is_built() const = 0;
  /// Number of visible GPUs; 0 when there is no driver or no GPU (never throws).
  virtual int device_count() const = 0;
  virtual void set_device(int index) const = 0;
  virtual Allocator* allocator(int index) const = 0;
  /// Blocks until all work queued on the device has finished.
  virtual void synchronize(int index) const = 0;
  virtual std::string device_name(int index) const = 0;
  /// The caching allocator of pinned (page-locked) host memory that Tensor::pin_memory() uses
  /// (kernels/cuda/host_allocator.h). DeviceError without CUDA support or without a visible GPU.
  virtual Allocator* pinned_allocator() const = 0;
  /// True when p points into a block of pinned_allocator(). Never throws; false without CUDA.
  virtual bool is_pinned(const void* p) const = 0;
};

/// The process-wide hooks (defined in kernels/cuda/runtime.cpp or kernels/cuda_stub.cpp).
const CudaHooks& cuda_hooks();

namespace cuda {
/// True when octo was built with CUDA and at least one GPU is visible.
bool is_available();
/// Number of visible GPUs (0 without CUDA support or without a GPU).
int device_count();
/// Whether float32 matmuls and convolutions on CUDA may use TF32 tensor cores (10-bit mantissa,
/// several times faster, about 1e-3 relative error). Off by default, so float32 means float32
/// (PyTorch's torch.backends.cuda.matmul.allow_tf32 / cudnn.allow_tf32, as one switch).
///   octo::cuda::set_allow_tf32(true);   // opt in for speed
void set_allow_tf32(bool allow);
bool allow_tf32();
}  // namespace cuda

/// Throws DeviceError unless the device exists: any cpu:N, cuda:N with N < cuda::device_count().
void check_device_available(Device device);
/// Blocks until all queued work on the device has finished (no-op for CPU devices).
void synchronize(Device device);

/// Makes `device` the calling thread's current device for its type until the guard is destroyed;
/// for CUDA it also calls cudaSetDevice. The parallel layer's per-device workers hold one.
class DeviceGuard {
 public:
  explicit DeviceGuard(Device device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  DeviceType type_;
  int previous_;
};

}  // namespace octo
