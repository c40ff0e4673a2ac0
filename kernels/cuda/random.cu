// CUDA random fills (uniform, normal, bernoulli, randint) over the shared Philox transforms.
//
// Element i (row-major index) evaluates the same transform of kernels/functors.h as the CPU
// backend (kernels/cpu/random.cpp) at counter state.offset + i, so a GPU tensor equals the CPU
// tensor drawn with the same generator state bit for bit. Instantiated for float32, float64,
// bfloat16, float16 (drawn in float, rounded once, as on the CPU) and (bernoulli, randint) int64
// and bool; other dtypes throw NotImplementedError.
#include <cuda_runtime_api.h>

#include <type_traits>

#include "core/error.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/loops.h"
#include "kernels/cuda/stream.h"
#include "kernels/functors.h"

namespace octo::kernels {

namespace {

using cuda_loops::blocks_for;
using cuda_loops::kThreads;

template <typename T, typename Sample>
__global__ void random_kernel(TensorArg out, int64_t n, bool contiguous, Sample sample) {
  T* base = out.data_as<T>();
  OCTO_CUDA_KERNEL_LOOP(i, n) {
    const auto v = sample(static_cast<uint64_t>(i));
    T r;
    if constexpr (std::is_same_v<T, bool>) {
      r = v != decltype(v)(0);
    } else {
      r = static_cast<T>(v);
    }
    base[contiguous ? i : out.offset_of(i)] = r;
  }
}

template <typename T, typename Sample>
void fill_random(const TensorArg& out, Sample sample) {
  const int64_t n = out.numel();
  if (n == 0) return;
  cuda::detail::CudaDeviceScope scope(out.device.index());
  auto stream = cuda::current_stream(out.device.index()).handle();
  random_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(out, n, out.is_contiguous(), sample);
  OCTO_CUDA_CHECK_LAUNCH("random");
}

[[noreturn]] void unsupported(const char* op, DType dtype) {
  OCTO_THROW(NotImplementedError, "cuda backend: ", op, " is not implemented for dtype ", dtype,
             " yet");
}

}  // namespace

void CudaBackend::uniform(const TensorArg& out, double low, double high, GeneratorState state) {
  dispatch_dtypes<FloatingTypes>(out.dtype, "uniform", [&](auto tag) {
    using T = decltype(tag);
    using C = std::conditional_t<std::is_same_v<T, double>, double, float>;  // as the CPU's
    fill_random<T>(out, UniformTransform<C>{Philox(state.seed), state.offset, static_cast<C>(low),
                                            static_cast<C>(high)});
  });
}

void CudaBackend::normal(const TensorArg& out, double mean, double std, GeneratorState state) {
  dispatch_dtypes<FloatingTypes>(out.dtype, "normal", [&](auto tag) {
    using T = decltype(tag);
    using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
    fill_random<T>(out, NormalTransform<C>{Philox(state.seed), state.offset, static_cast<C>(mean),
                                           static_cast<C>(std)});
  });
}

void CudaBackend::bernoulli(const TensorArg& out, double p, GeneratorState state) {
  const BernoulliTransform<int64_t> sample{Philox(state.seed), state.offset, p};
  switch (out.dtype) {
    case kFloat32:
      return fill_random<float>(out, sample);
    case kFloat64:
      return fill_random<double>(out, sample);
    case kInt64:
      return fill_random<int64_t>(out, sample);
    case kBool:
      return fill_random<bool>(out, sample);
    case kBFloat16:
      return fill_random<BFloat16>(out, sample);
    case kFloat16:
      return fill_random<Float16>(out, sample);
    default:
      unsupported("bernoulli", out.dtype);
  }
}

void CudaBackend::randint(const TensorArg& out, int64_t low, int64_t high, GeneratorState state) {
  OCTO_INTERNAL_ASSERT(low < high);
  const uint64_t range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  const RandintTransform<int64_t> sample{Philox(state.seed), state.offset, low, range};
  switch (out.dtype) {
    case kFloat32:
      return fill_random<float>(out, sample);
    case kFloat64:
      return fill_random<double>(out, sample);
    case kInt64:
      return fill_random<int64_t>(out, sample);
    case kBool:
      return fill_random<bool>(out, sample);
    case kBFloat16:
      return fill_random<BFloat16>(out, sample);
    case kFloat16:
      return fill_random<Float16>(out, sample);
    default:
      unsupported("randint", out.dtype);
  }
}

}  // namespace octo::kernels
