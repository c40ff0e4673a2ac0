// Tensor metadata, raw construction of tensors and views, and device checks.
#include "tensor/tensor.h"

#include <sstream>

#include "core/device_hooks.h"
#include "core/error.h"
#include "kernels/backend.h"

namespace octo {

TensorImpl& Tensor::impl() const {
  OCTO_CHECK(
      impl_ != nullptr,
      "this tensor is undefined (default-constructed); create it with a factory such as octo::zeros first");
  return *impl_;
}

bool Tensor::is_pinned() const {
  if (!defined() || !device().is_cpu()) return false;
  const void* base = impl().storage->data.get();
  return base != nullptr && cuda_hooks().is_pinned(base);
}

int64_t Tensor::size(int64_t d) const { return sizes()[detail::wrap_dim(d, dim(), "size")]; }
int64_t Tensor::stride(int64_t d) const { return strides()[detail::wrap_dim(d, dim(), "stride")]; }
int64_t Tensor::numel() const { return detail::shape_numel(sizes()); }

bool Tensor::is_contiguous() const {
  if (numel() == 0) return true;  // nothing to lay out, as in PyTorch
  int64_t expected = 1;
  for (int64_t i = dim() - 1; i >= 0; --i) {
    if (sizes()[i] != 1 && strides()[i] != expected) return false;
    expected *= sizes()[i];
  }
  return true;
}

void* Tensor::raw_data() const {
  auto* base = static_cast<char*>(impl().storage->data.get());
  return base ? base + impl().offset * static_cast<int64_t>(itemsize()) : nullptr;
}

template <typename T>
T* Tensor::data_ptr() const {
  OCTO_CHECK_VALUE(dtype_of<T> == dtype(), "data_ptr: expected a tensor of dtype ", dtype_of<T>,
                   " but this one has dtype ", dtype());
  return static_cast<T*>(raw_data());
}
template float* Tensor::data_ptr<float>() const;
template double* Tensor::data_ptr<double>() const;
template int64_t* Tensor::data_ptr<int64_t>() const;
template int32_t* Tensor::data_ptr<int32_t>() const;
template uint8_t* Tensor::data_ptr<uint8_t>() const;
template bool* Tensor::data_ptr<bool>() const;
template BFloat16* Tensor::data_ptr<BFloat16>() const;
template Float16* Tensor::data_ptr<Float16>() const;

bool Tensor::is_alias_of(const Tensor& other) const {
  return defined() && other.defined() && impl().storage == other.impl().storage;
}

kernels::TensorArg Tensor::arg() const {
  kernels::TensorArg a;
  if (!defined()) return a;
  OCTO_CHECK_VALUE(dim() <= kernels::kMaxDims, "tensors with more than ", kernels::kMaxDims,
                   " dimensions are not supported by kernels; got ", dim());
  a.data = raw_data();
  a.dtype = dtype();
  a.device = device();
  a.ndim = static_cast<int>(dim());
  for (int i = 0; i < a.ndim; ++i) {
    a.sizes[i] = sizes()[i];
    a.strides[i] = strides()[i];
  }
  return a;
}

template <typename T>
T Tensor::item() const {
  OCTO_CHECK_VALUE(numel() == 1, "a Tensor with ", numel(),
                   " elements cannot be converted to a scalar; item() needs exactly one element");
  return to_vector<T>()[0];
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  Tensor host = detail::make_empty(sizes(), dtype_of<T>, kCPU);
  kernels::TensorArg dst = host.arg(), src = arg();
  if (device().is_cuda()) {
    kernels::backend(device()).copy(dst, src);
    synchronize(device());
  } else {
    kernels::cpu_backend().copy(dst, src);
  }
  const T* p = static_cast<const T*>(host.raw_data());
  return std::vector<T>(p, p + host.numel());
}

#define OCTO_INSTANTIATE_ITEM(T)      \
  template T Tensor::item<T>() const; \
  template std::vector<T> Tensor::to_vector<T>() const;
OCTO_INSTANTIATE_ITEM(float)
OCTO_INSTANTIATE_ITEM(double)
OCTO_INSTANTIATE_ITEM(int64_t)
OCTO_INSTANTIATE_ITEM(int32_t)
OCTO_INSTANTIATE_ITEM(uint8_t)
OCTO_INSTANTIATE_ITEM(bool)
#undef OCTO_INSTANTIATE_ITEM

std::ostream& operator<<(std::ostream& os, const Shape& shape) { return os << shape_str(shape); }

std::string shape_str(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

namespace detail {

Shape contiguous_strides(const Shape& sizes) {
  Shape strides(sizes.size());
  int64_t s = 1;
  for (int64_t i = static_cast<int64_t>(sizes.size()) - 1; i >= 0; --i) {
    strides[i] = s;
    // An empty shape may have sizes whose product (0 aside) passes int64: [0, 2^62, 2^62].
    OCTO_CHECK_VALUE(!__builtin_mul_overflow(s, std::max<int64_t>(sizes[i], 1), &s), "shape ",
                     sizes, ": its strides overflow 64 bits");
  }
  return strides;
}

int64_t shape_numel(const Shape& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

int64_t checked_numel(const Shape& sizes, const char* op) {
  int64_t n = 1;
  for (int64_t s : sizes)
    OCTO_CHECK_VALUE(!__builtin_mul_overflow(n, s, &n), op ? op : "", op ? ": " : "", "shape ",
                     sizes, " has more elements than fit in 64 bits");
  return n;
}

Tensor make_empty(const Shape& sizes, DType dtype, Device device) {
  for (int64_t s : sizes) OCTO_CHECK_VALUE(s >= 0, "negative dimension in shape ", sizes);
  check_device_available(device);
  // The element and byte counts must not overflow: [2^40, 2^40] would otherwise wrap to a small
  // (or zero) allocation that later writes run past.
  const int64_t n = checked_numel(sizes);
  int64_t bytes = 0;
  OCTO_CHECK_VALUE(!__builtin_mul_overflow(n, static_cast<int64_t>(octo::itemsize(dtype)), &bytes),
                   "shape ", sizes, " of ", dtype, " needs more bytes than fit in 64 bits");
  size_t nbytes = static_cast<size_t>(bytes);
  auto storage = std::make_shared<Storage>(allocator_for(device)->allocate(nbytes), nbytes, device);
  return Tensor(
      std::make_shared<TensorImpl>(std::move(storage), sizes, contiguous_strides(sizes), 0, dtype));
}

Tensor make_view(const Tensor& t, Shape sizes, Shape strides, int64_t offset) {
  return Tensor(std::make_shared<TensorImpl>(t.impl().storage, std::move(sizes), std::move(strides),
                                             offset, t.dtype()));
}

void set_data(const Tensor& t, const Tensor& data) {
  TensorImpl& impl = t.impl();
  const TensorImpl& src = data.impl();
  impl.storage = src.storage;
  impl.sizes = src.sizes;
  impl.strides = src.strides;
  impl.offset = src.offset;
  impl.dtype = src.dtype;
  impl.device = src.device;
}

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  int64_t n = std::max<int64_t>(ndim, 1);  // a 0-d tensor accepts dim 0 and -1, like PyTorch
  OCTO_CHECK_INDEX(dim >= -n && dim < n, op,
                   ": dimension out of range (expected to be in range of [", -n, ", ", n - 1,
                   "], but got ", dim, ")");
  return dim < 0 ? dim + n : dim;
}

namespace {
[[noreturn]] void throw_mismatch(Device a, Device b) {
  OCTO_THROW(DeviceError,
             "Expected all tensors to be on the same device, but found at least two devices, ", a,
             " and ", b, "!");
}
}  // namespace

void check_same_device(std::initializer_list<const Tensor*> tensors) {
  const Tensor* first = nullptr;
  for (const Tensor* t : tensors) {
    if (!t->defined()) continue;
    if (!first) {
      first = t;
    } else if (t->device() != first->device()) {
      throw_mismatch(first->device(), t->device());
    }
  }
}

void check_same_device(const std::vector<Tensor>& tensors) {
  const Tensor* first = nullptr;
  for (const Tensor& t : tensors) {
    if (!t.defined()) continue;
    if (!first) {
      first = &t;
    } else if (t.device() != first->device()) {
      throw_mismatch(first->device(), t.device());
    }
  }
}

void check_floating(const char* op, DType dt, std::initializer_list<NamedDType> operands) {
  if (is_floating(dt)) return;
  std::ostringstream found;
  for (const NamedDType& o : operands) {
    if (found.tellp() > 0) found << ", ";
    found << o.name << ' ' << o.dtype;
  }
  OCTO_THROW(ValueError, op,
             ": expected floating-point tensors (float32, float64, bfloat16 or float16), got ",
             found.str());
}

}  // namespace detail
}  // namespace octo
