// Factories: shapes, values, ranges, random distributions.
#include "tensor/factories.h"

#include <cmath>

#include "core/error.h"
#include "core/random.h"
#include "kernels/backend.h"

namespace octo {

namespace {
Tensor finish(Tensor t, const TensorOptions& options) {
  if (options.requires_grad) t.requires_grad_(true);
  return t;
}
/// A contiguous float64 CPU tensor of `shape` whose element i (in row-major order) is value(i),
/// for the factories computed on the host. Its allocation goes through make_empty, so a shape
/// whose size overflows, or that cannot be allocated, is an octo::Error (a std::vector staging
/// buffer would throw std::length_error or std::bad_alloc instead).
template <typename F>
Tensor host_values(const Shape& shape, F value) {
  Tensor host = detail::make_empty(shape, kFloat64, kCPU);
  auto* p = static_cast<double*>(host.raw_data());
  for (int64_t i = 0, n = host.numel(); i < n; ++i) p[i] = value(i);
  return host;
}
/// Converts a tensor built on the CPU to the requested dtype and moves it to the device.
Tensor from_host(Tensor host, const TensorOptions& options) {
  if (host.dtype() != options.dtype) host = host.to(options.dtype);
  if (options.device != kCPU) {
    Tensor out = detail::make_empty(host.sizes(), host.dtype(), options.device);
    out.copy_(host);
    host = out;
  }
  return finish(host, options);
}
}  // namespace

Tensor empty(const Shape& shape, TensorOptions options) {
  return finish(detail::make_empty(shape, options.dtype, options.device), options);
}

Tensor full(const Shape& shape, Scalar value, TensorOptions options) {
  Tensor t = detail::make_empty(shape, options.dtype, options.device);
  if (t.numel() > 0) kernels::backend(t.device()).fill(t.arg(), value);
  return finish(t, options);
}
Tensor zeros(const Shape& shape, TensorOptions options) { return full(shape, 0, options); }
Tensor ones(const Shape& shape, TensorOptions options) { return full(shape, 1, options); }

Tensor arange(int64_t end, TensorOptions options) {
  return arange(0.0, static_cast<double>(end), 1.0, options);
}

Tensor arange(double start, double end, double step, TensorOptions options) {
  OCTO_CHECK_VALUE(std::isfinite(start) && std::isfinite(end) && std::isfinite(step),
                   "arange: start, end and step must be finite, got start ", start, ", end ", end,
                   ", step ", step);
  OCTO_CHECK_VALUE(step != 0, "arange: step must be nonzero");
  OCTO_CHECK_VALUE((step > 0 && end >= start) || (step < 0 && end <= start),
                   "arange: upper bound and larger bound inconsistent with step sign (start ",
                   start, ", end ", end, ", step ", step, ")");
  const double count = std::ceil((end - start) / step);
  OCTO_CHECK_VALUE(count < 9.2e18, "arange: start ", start, ", end ", end, " and step ", step,
                   " give ", count, " values, more than fit in 64 bits");
  return from_host(host_values({static_cast<int64_t>(count)},
                               [&](int64_t i) { return start + static_cast<double>(i) * step; }),
                   options);
}

Tensor linspace(double start, double end, int64_t steps, TensorOptions options) {
  OCTO_CHECK_VALUE(steps >= 0, "linspace: number of steps must be non-negative, got ", steps);
  double step = steps > 1 ? (end - start) / static_cast<double>(steps - 1) : 0.0;
  // Fill from both ends, as PyTorch does, so the last value is exactly `end`.
  int64_t half = steps / 2;
  return from_host(host_values({steps},
                               [&](int64_t i) {
                                 return i < half ? start + step * static_cast<double>(i)
                                                 : end - step * static_cast<double>(steps - 1 - i);
                               }),
                   options);
}

Tensor eye(int64_t n, int64_t m, TensorOptions options) {
  if (m < 0) m = n;
  OCTO_CHECK_VALUE(n >= 0, "eye: n must be non-negative, got ", n);
  // make_empty rejects an n * m that overflows; with m == 0 there is no element to divide for.
  return from_host(host_values({n, m}, [&](int64_t i) { return i / m == i % m ? 1.0 : 0.0; }),
                   options);
}

Tensor rand(const Shape& shape, TensorOptions options) {
  OCTO_CHECK_VALUE(is_floating(options.dtype), "rand: expected a floating dtype, got ",
                   options.dtype);
  Tensor t = detail::make_empty(shape, options.dtype, options.device);
  auto state = default_generator(options.device).reserve(static_cast<uint64_t>(t.numel()));
  if (t.numel() > 0) kernels::backend(t.device()).uniform(t.arg(), 0.0, 1.0, state);
  return finish(t, options);
}

Tensor randn(const Shape& shape, TensorOptions options) {
  OCTO_CHECK_VALUE(is_floating(options.dtype), "randn: expected a floating dtype, got ",
                   options.dtype);
  Tensor t = detail::make_empty(shape, options.dtype, options.device);
  auto state = default_generator(options.device).reserve(static_cast<uint64_t>(t.numel()));
  if (t.numel() > 0) kernels::backend(t.device()).normal(t.arg(), 0.0, 1.0, state);
  return finish(t, options);
}

Tensor randint(int64_t low, int64_t high, const Shape& shape, TensorOptions options) {
  OCTO_CHECK_VALUE(low < high, "randint: expected low < high, got low = ", low, ", high = ", high);
  Tensor t = detail::make_empty(shape, options.dtype, options.device);
  auto state = default_generator(options.device).reserve(static_cast<uint64_t>(t.numel()));
  if (t.numel() > 0) kernels::backend(t.device()).randint(t.arg(), low, high, state);
  return finish(t, options);
}

Tensor randperm(int64_t n, TensorOptions options) {
  OCTO_CHECK_VALUE(n >= 0, "randperm: n must be non-negative, got ", n);
  Tensor host = detail::make_empty({n}, kInt64, kCPU);
  auto* p = static_cast<int64_t*>(host.raw_data());
  for (int64_t i = 0; i < n; ++i) p[i] = i;
  Generator& g = default_generator(kCPU);
  for (int64_t i = n - 1; i > 0; --i) {  // Fisher-Yates
    auto j = static_cast<int64_t>(g.randint(static_cast<uint64_t>(i + 1)));
    std::swap(p[i], p[j]);
  }
  return from_host(host, options);
}

Tensor tensor(std::initializer_list<double> values, TensorOptions options) {
  return tensor(std::vector<double>(values), {static_cast<int64_t>(values.size())}, options);
}

Tensor tensor(const std::vector<double>& values, const Shape& shape, TensorOptions options) {
  OCTO_CHECK_VALUE(detail::shape_numel(shape) == static_cast<int64_t>(values.size()),
                   "tensor: shape ", shape, " needs ", detail::shape_numel(shape),
                   " values but got ", values.size());
  return from_host(from_vector(values, shape), options);
}

template <typename T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape, Device device) {
  OCTO_CHECK_VALUE(detail::shape_numel(shape) == static_cast<int64_t>(values.size()),
                   "from_vector: shape ", shape, " needs ", detail::shape_numel(shape),
                   " values but got ", values.size());
  Tensor host = detail::make_empty(shape, dtype_of<T>, kCPU);
  T* p = static_cast<T*>(host.raw_data());
  for (size_t i = 0; i < values.size(); ++i) p[i] = values[i];
  return from_host(host, {.dtype = dtype_of<T>, .device = device});
}
template Tensor from_vector(const std::vector<float>&, const Shape&, Device);
template Tensor from_vector(const std::vector<double>&, const Shape&, Device);
template Tensor from_vector(const std::vector<int64_t>&, const Shape&, Device);
template Tensor from_vector(const std::vector<int32_t>&, const Shape&, Device);
template Tensor from_vector(const std::vector<uint8_t>&, const Shape&, Device);
template Tensor from_vector(const std::vector<bool>&, const Shape&, Device);

Tensor scalar_tensor(Scalar value, TensorOptions options) { return full({}, value, options); }

Tensor empty_like(const Tensor& t) { return empty(t.sizes(), t.options()); }
Tensor zeros_like(const Tensor& t) { return zeros(t.sizes(), t.options()); }
Tensor ones_like(const Tensor& t) { return ones(t.sizes(), t.options()); }
Tensor full_like(const Tensor& t, Scalar value) { return full(t.sizes(), value, t.options()); }
Tensor rand_like(const Tensor& t) { return rand(t.sizes(), t.options()); }
Tensor randn_like(const Tensor& t) { return randn(t.sizes(), t.options()); }

}  // namespace octo
