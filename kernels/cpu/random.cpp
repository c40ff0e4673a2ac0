// CPU random fills over Philox (uniform, normal, bernoulli, randint).
//
// Element i (row-major index) draws its words from Philox(state.seed) at counter state.offset + i
// and turns them into a value with the shared transforms (UniformTransform, ...) in
// kernels/functors.h. No state is carried between elements, so the result does not depend on the
// thread count and a CUDA kernel using the same transforms produces the same numbers.
#include <type_traits>

#include "core/error.h"
#include "core/threads.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/functors.h"

namespace octo::kernels {

namespace {

constexpr int64_t kRandomGrain = 4096;  // elements per parallel chunk, at least

template <typename T>
constexpr bool kIsHalf = std::is_same_v<T, BFloat16> || std::is_same_v<T, Float16>;

/// A value computed as int64 or double stored as T (16-bit floats via float, bool as != 0).
template <typename T, typename V>
T convert(V v) {
  if constexpr (kIsHalf<T>) {
    return T(static_cast<float>(v));
  } else if constexpr (std::is_same_v<T, bool>) {
    return v != V(0);
  } else {
    return static_cast<T>(v);
  }
}

/// out[i] = sample(i) (a transform of kernels/functors.h), for any strides of out.
template <typename T, typename Sample>
void fill_random(const TensorArg& out, Sample sample) {
  const int64_t n = out.numel();
  const bool contiguous = out.is_contiguous();
  T* base = out.data_as<T>();
  parallel_for(0, n, kRandomGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      base[contiguous ? i : out.offset_of(i)] = convert<T>(sample(static_cast<uint64_t>(i)));
  });
}

}  // namespace

void CpuBackend::uniform(const TensorArg& out, double low, double high, GeneratorState state) {
  dispatch_dtypes<FloatingTypes>(out.dtype, "uniform", [&](auto tag) {
    using T = decltype(tag);
    using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
    fill_random<T>(out, UniformTransform<C>{Philox(state.seed), state.offset, static_cast<C>(low),
                                            static_cast<C>(high)});
  });
}

void CpuBackend::normal(const TensorArg& out, double mean, double std, GeneratorState state) {
  dispatch_dtypes<FloatingTypes>(out.dtype, "normal", [&](auto tag) {
    using T = decltype(tag);
    using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
    fill_random<T>(out, NormalTransform<C>{Philox(state.seed), state.offset, static_cast<C>(mean),
                                           static_cast<C>(std)});
  });
}

void CpuBackend::bernoulli(const TensorArg& out, double p, GeneratorState state) {
  OCTO_DISPATCH_ALL_AND_HALF(out.dtype, "bernoulli", [&] {
    using T = scalar_t;
    fill_random<T>(out, BernoulliTransform<int64_t>{Philox(state.seed), state.offset, p});
  });
}

void CpuBackend::randint(const TensorArg& out, int64_t low, int64_t high, GeneratorState state) {
  OCTO_INTERNAL_ASSERT(low < high);
  const uint64_t range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  OCTO_DISPATCH_ALL_AND_HALF(out.dtype, "randint", [&] {
    using T = scalar_t;
    fill_random<T>(out, RandintTransform<int64_t>{Philox(state.seed), state.offset, low, range});
  });
}

}  // namespace octo::kernels
