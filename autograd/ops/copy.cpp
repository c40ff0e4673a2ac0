// Copies and conversions: to(device/dtype), pin_memory, contiguous, clone, copy_, fill_ -- with
// their backward.
#include "autograd/function.h"
#include "autograd/inplace.h"
#include "autograd/ops/reduce.h"
#include "core/device_hooks.h"
#include "core/error.h"
#include "kernels/backend.h"
#include "tensor/factories.h"

namespace octo {

namespace detail {
/// dst = src for equal shapes, any devices and dtypes. Copies that touch a CUDA device go through
/// the CUDA backend, which moves data between host and GPUs (non_blocking: see
/// Backend::copy_non_blocking); cpu:i <-> cpu:j is a host copy.
void copy_raw(const Tensor& dst, const Tensor& src, bool non_blocking = false) {
  OCTO_INTERNAL_ASSERT(dst.sizes() == src.sizes());
  if (dst.numel() == 0) return;
  kernels::Backend& b = kernels::backend(dst.device().is_cuda() ? dst.device() : src.device());
  if (non_blocking) {
    b.copy_non_blocking(dst.arg(), src.arg());
  } else {
    b.copy(dst.arg(), src.arg());
  }
}
}  // namespace detail

namespace {
/// An uninitialised contiguous tensor on a CPU device, in pinned host memory.
Tensor empty_pinned(const Shape& sizes, DType dtype, Device device) {
  const size_t nbytes = size_t(detail::shape_numel(sizes)) * itemsize(dtype);
  auto storage =
      std::make_shared<Storage>(cuda_hooks().pinned_allocator()->allocate(nbytes), nbytes, device);
  return Tensor(std::make_shared<TensorImpl>(std::move(storage), sizes,
                                             detail::contiguous_strides(sizes), 0, dtype));
}
}  // namespace

Tensor Tensor::to(Device device, DType dtype, bool non_blocking) const {
  if (device == this->device() && dtype == this->dtype()) return *this;
  // A non-blocking download lands in pinned memory, as in PyTorch: into pageable memory it would
  // have to synchronise anyway.
  const bool pinned_out = non_blocking && this->device().is_cuda() && device.is_cpu();
  Tensor out = pinned_out ? empty_pinned(sizes(), dtype, device)
                          : detail::make_empty(sizes(), dtype, device);
  detail::copy_raw(out, *this, non_blocking);
  if (!is_floating(dtype) || !is_floating(this->dtype())) return out;
  Device src_device = this->device();
  DType src_dtype = this->dtype();
  return autograd::record(
      "ToCopyBackward", out, {*this}, {},
      [src_device, src_dtype](const autograd::TensorList& g, const autograd::TensorList&)
          -> autograd::TensorList { return {g[0].to(src_device, src_dtype)}; });
}
Tensor Tensor::to(Device device, bool non_blocking) const {
  return to(device, dtype(), non_blocking);
}
Tensor Tensor::to(DType dtype) const { return to(device(), dtype); }

Tensor Tensor::pin_memory() const {
  OCTO_CHECK_VALUE(device().is_cpu(),
                   "pin_memory: only CPU tensors can be pinned, got a tensor on ", device());
  OCTO_CHECK_DEVICE(
      cuda_hooks().is_built(),
      "pin_memory: octo was built without CUDA support, and pinned (page-locked) host memory needs the CUDA driver; rebuild with -Dcuda=enabled, or do not pin (DataLoader's pin_memory option is ignored without a GPU)");
  OCTO_CHECK_DEVICE(
      cuda::device_count() > 0,
      "pin_memory: no CUDA GPU is visible, and pinned (page-locked) host memory needs the CUDA driver and a GPU; do not pin (DataLoader's pin_memory option is ignored without a GPU)");
  if (is_pinned()) return *this;
  Tensor out = empty_pinned(sizes(), dtype(), device());
  detail::copy_raw(out, *this);
  return autograd::record(
      "PinMemoryBackward", out, {*this}, {},
      [](const autograd::TensorList& g, const autograd::TensorList&) -> autograd::TensorList {
        return {g[0]};
      });
}

Tensor Tensor::clone() const {
  Tensor out = detail::make_empty(sizes(), dtype(), device());
  detail::copy_raw(out, *this);
  return autograd::record(
      "CloneBackward", out, {*this}, {},
      [](const autograd::TensorList& g, const autograd::TensorList&) -> autograd::TensorList {
        return {g[0]};
      });
}

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : clone(); }

const Tensor& Tensor::copy_(const Tensor& src, bool non_blocking) const {
  autograd::check_inplace(*this);
  Tensor expanded = src;
  if (src.sizes() != sizes()) {
    NoGradGuard no_grad;  // a raw expand: the backward below reduces with sum_to
    expanded = src.expand(sizes());
  }
  detail::copy_raw(*this, expanded, non_blocking);
  Shape src_shape = src.sizes();
  Device src_device = src.device();
  DType src_dtype = src.dtype();
  autograd::record_inplace(
      "CopyBackwards", *this, {src}, {},
      [src_shape, src_device, src_dtype](const autograd::TensorList& g,
                                         const autograd::TensorList&) -> autograd::TensorList {
        // The old value of self was overwritten: it gets no gradient.
        return {Tensor(), sum_to(g[0], src_shape).to(src_device, src_dtype)};
      });
  return *this;
}

const Tensor& Tensor::fill_(Scalar value) const {
  autograd::check_inplace(*this);
  if (numel() > 0) kernels::backend(device()).fill(arg(), value);
  autograd::record_inplace(
      "FillBackward", *this, {}, {},
      [](const autograd::TensorList& g, const autograd::TensorList&) -> autograd::TensorList {
        return {Tensor()};
      });
  return *this;
}

}  // namespace octo
