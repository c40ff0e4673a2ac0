// CUDA fill and elementwise copy kernels (strided, with dtype conversion).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <type_traits>

#include "core/dtype.h"
#include "kernels/convert.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/loops.h"
#include "kernels/cuda/memory.h"
#include "kernels/cuda/stream.h"

namespace octo::kernels {

namespace {

using cuda_loops::blocks_for;
using cuda_loops::kThreads;
using cuda_loops::offset;

// Kernels move raw words of the element's size: one instantiation per size serves every dtype.
template <size_t Size>
struct WordOf;
template <>
struct WordOf<1> {
  using type = uint8_t;
};
template <>
struct WordOf<2> {
  using type = uint16_t;
};
template <>
struct WordOf<4> {
  using type = uint32_t;
};
template <>
struct WordOf<8> {
  using type = uint64_t;
};

template <typename W>
__global__ void fill_kernel(TensorArg out, int64_t n, W value) {
  W* p = out.data_as<W>();
  OCTO_CUDA_KERNEL_LOOP(i, n) { p[offset(out, i)] = value; }
}

template <typename W>
__global__ void copy_same_kernel(TensorArg dst, TensorArg src, int64_t n) {
  W* d = dst.data_as<W>();
  const W* s = src.data_as<W>();
  OCTO_CUDA_KERNEL_LOOP(i, n) { d[offset(dst, i)] = s[offset(src, i)]; }
}

template <typename D, typename S>
__global__ void convert_kernel(TensorArg dst, TensorArg src, int64_t n) {
  D* d = dst.data_as<D>();
  const S* s = src.data_as<S>();
  OCTO_CUDA_KERNEL_LOOP(i, n) { d[offset(dst, i)] = convert<D>(s[offset(src, i)]); }
}

template <size_t Size>
void launch_fill(const TensorArg& out, int64_t n, const void* value, cudaStream_t stream) {
  using W = typename WordOf<Size>::type;
  W word;
  std::memcpy(&word, value, Size);
  fill_kernel<W><<<blocks_for(n), kThreads, 0, stream>>>(out, n, word);
  OCTO_CUDA_CHECK_LAUNCH("fill_kernel");
}

}  // namespace

void CudaBackend::fill(const TensorArg& out, Scalar value) {
  const int64_t n = out.numel();
  if (n == 0) return;
  cuda::detail::CudaDeviceScope scope(out.device.index());
  cudaStream_t stream = cuda::current_stream(out.device.index()).handle();
  // The value converted on the host exactly as CpuBackend::fill does, then moved as raw bits.
  alignas(8) unsigned char bits[8] = {};
  const size_t size = itemsize(out.dtype);
  OCTO_DISPATCH_ALL_AND_HALF(out.dtype, "fill", [&] {
    const scalar_t v = static_cast<scalar_t>(
        value.to<std::conditional_t<std::is_integral_v<scalar_t>, int64_t, double>>());
    std::memcpy(bits, &v, sizeof v);
  });
  std::array<TensorArg, 1> args{out};
  cuda_loops::coalesce(args);
  const bool zero = std::all_of(bits, bits + size, [](unsigned char b) { return b == 0; });
  if (zero && args[0].ndim <= 1 && (args[0].ndim == 0 || args[0].strides[0] == 1)) {
    OCTO_CUDA_CHECK(cudaMemsetAsync(out.data, 0, size_t(n) * size, stream));
    return;
  }
  switch (size) {
    case 1:
      launch_fill<1>(args[0], n, bits, stream);
      break;
    case 2:
      launch_fill<2>(args[0], n, bits, stream);
      break;
    case 4:
      launch_fill<4>(args[0], n, bits, stream);
      break;
    default:
      launch_fill<8>(args[0], n, bits, stream);
      break;
  }
}

namespace cuda_memory {

void launch_copy(const TensorArg& dst, const TensorArg& src, cuda::StreamHandle stream) {
  OCTO_INTERNAL_ASSERT(dst.ndim == src.ndim);
  OCTO_INTERNAL_ASSERT(dst.device == src.device);
  const int64_t n = dst.numel();
  if (n == 0) return;
  std::array<TensorArg, 2> args{dst, src};
  cuda_loops::coalesce(args);
  const unsigned blocks = blocks_for(n);
  if (dst.dtype == src.dtype) {
    switch (itemsize(dst.dtype)) {
      case 1:
        copy_same_kernel<uint8_t><<<blocks, kThreads, 0, stream>>>(args[0], args[1], n);
        break;
      case 2:
        copy_same_kernel<uint16_t><<<blocks, kThreads, 0, stream>>>(args[0], args[1], n);
        break;
      case 4:
        copy_same_kernel<uint32_t><<<blocks, kThreads, 0, stream>>>(args[0], args[1], n);
        break;
      default:
        copy_same_kernel<uint64_t><<<blocks, kThreads, 0, stream>>>(args[0], args[1], n);
        break;
    }
    OCTO_CUDA_CHECK_LAUNCH("copy_same_kernel");
    return;
  }
  OCTO_DISPATCH_ALL_AND_HALF(dst.dtype, "copy", [&] {
    using dst_t = scalar_t;
    OCTO_DISPATCH_ALL_AND_HALF(src.dtype, "copy", [&] {
      if constexpr (!std::is_same_v<dst_t, scalar_t>) {  // equal dtypes took the branch above
        convert_kernel<dst_t, scalar_t><<<blocks, kThreads, 0, stream>>>(args[0], args[1], n);
      }
    });
  });
  OCTO_CUDA_CHECK_LAUNCH("convert_kernel");
}

}  // namespace cuda_memory

}  // namespace octo::kernels
