// TensorArg: the raw view of a tensor that kernels see (pointer, dtype, device, sizes, strides).
#pragma once

#include <cstdint>

#include "core/device.h"
#include "core/dtype.h"
#include "core/macros.h"

namespace octo::kernels {

inline constexpr int kMaxDims = 12;

/// What a kernel needs to read or write a tensor. `data` already includes the storage offset;
/// strides are in elements and may be 0 (broadcast) or arbitrary (views). Trivially copyable, so a
/// CUDA kernel takes it by value. Built by tensor/ (Tensor::arg()); kernels never see a Tensor.
struct TensorArg {
  void* data = nullptr;
  DType dtype = kFloat32;
  Device device;
  int ndim = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t strides[kMaxDims] = {};

  OCTO_HOST_DEVICE int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < ndim; ++i) n *= sizes[i];
    return n;
  }
  OCTO_HOST_DEVICE bool is_contiguous() const {
    int64_t expected = 1;
    for (int i = ndim - 1; i >= 0; --i) {
      if (sizes[i] != 1 && strides[i] != expected) return false;
      expected *= sizes[i];
    }
    return true;
  }
  template <typename T>
  OCTO_HOST_DEVICE T* data_as() const {
    return static_cast<T*>(data);
  }
  /// Element offset of the n-th element in row-major order of sizes.
  OCTO_HOST_DEVICE int64_t offset_of(int64_t linear) const {
    int64_t off = 0;
    for (int i = ndim - 1; i >= 0; --i) {
      int64_t s = sizes[i];
      off += (linear % s) * strides[i];
      linear /= s;
    }
    return off;
  }
  bool defined() const { return data != nullptr || numel() == 0; }
};

/// `like`'s sizes with packed (row-major contiguous) strides, over `data`: the staging buffer a
/// kernel copies a strided operand into. dtype and device stay `like`'s unless changed after.
inline TensorArg contiguous_like(const TensorArg& like, void* data) {
  TensorArg t = like;
  t.data = data;
  int64_t stride = 1;
  for (int d = t.ndim - 1; d >= 0; --d) {
    t.strides[d] = stride;
    stride *= t.sizes[d];
  }
  return t;
}

}  // namespace octo::kernels
