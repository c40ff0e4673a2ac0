// Storage and TensorImpl: the bytes, and the (sizes, strides, offset, dtype, device) view over
// them.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/allocator.h"
#include "core/device.h"
#include "core/dtype.h"

namespace octo {

using Shape = std::vector<int64_t>;

/// A block of device memory shared by a tensor and all its views.
///
/// Note [Version counter]: `version` is bumped by every in-place op on any tensor over this
/// storage. Views and detach()ed aliases share storage, hence the counter, as in PyTorch; the
/// autograd engine compares it with the value recorded when a tensor was saved for backward.
struct Storage {
  Storage(DataPtr d, size_t n, Device dev) : data(std::move(d)), nbytes(n), device(dev) {}
  DataPtr data;
  size_t nbytes;
  Device device;
  std::atomic<uint32_t> version{0};
};

struct AutogradMeta;  // tensor/autograd_meta.h

class TensorImpl {
 public:
  TensorImpl(std::shared_ptr<Storage> storage, Shape sizes, Shape strides, int64_t offset,
             DType dtype);
  ~TensorImpl();

  std::shared_ptr<Storage> storage;
  Shape sizes;
  Shape strides;   // in elements
  int64_t offset;  // in elements
  DType dtype;
  Device device;
  std::unique_ptr<AutogradMeta> autograd;  // null until autograd needs it
};

}  // namespace octo
