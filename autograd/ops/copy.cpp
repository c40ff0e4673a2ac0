// Copies and conversions: to(device/dtype), contiguous, clone, copy_, fill_ -- with their backward.
#include "autograd/function.h"
#include "autograd/ops/reduce.h"
#include "core/device_hooks.h"
#include "core/error.h"
#include "kernels/backend.h"
#include "tensor/factories.h"

namespace octo {

namespace detail {
/// dst = src for equal shapes, any devices and dtypes. Copies that touch a CUDA device go through
/// the CUDA backend; cpu:i <-> cpu:j is a host copy.
void copy_raw(const Tensor& dst, const Tensor& src) {
  OCTO_INTERNAL_ASSERT(dst.sizes() == src.sizes());
  if (dst.numel() == 0) return;
  bool cuda = dst.device().is_cuda() || src.device().is_cuda();
  auto& b = cuda ? kernels::cuda_backend() : kernels::cpu_backend();
  b.copy(dst.arg(), src.arg());
}
}  // namespace detail

Tensor Tensor::to(Device device, DType dtype) const {
  if (device == this->device() && dtype == this->dtype()) return *this;
  Tensor out = detail::make_empty(sizes(), dtype, device);
  detail::copy_raw(out, *this);
  if (!is_floating(dtype) || !is_floating(this->dtype())) return out;
  Device src_device = this->device();
  DType src_dtype = this->dtype();
  return autograd::record(
      "ToCopyBackward", out, {*this}, {},
      [src_device, src_dtype](const autograd::TensorList& g, const autograd::TensorList&)
          -> autograd::TensorList { return {g[0].to(src_device, src_dtype)}; });
}
Tensor Tensor::to(Device device) const { return to(device, dtype()); }
Tensor Tensor::to(DType dtype) const { return to(device(), dtype); }

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

const Tensor& Tensor::copy_(const Tensor& src) const {
  autograd::check_inplace(*this);
  Tensor expanded = src;
  if (src.sizes() != sizes()) {
    NoGradGuard no_grad;  // a raw expand: the backward below reduces with sum_to
    expanded = src.expand(sizes());
  }
  detail::copy_raw(*this, expanded);
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
