// OCTO_CUDA_CHECK and friends: turn every CUDA/cuBLAS/cuDNN/NCCL status into an octo error.
#pragma once

#include <cuda_runtime_api.h>

#include "core/macros.h"

namespace octo::cuda::detail {
// The throwers take plain ints for the library statuses so that this header needs no cuBLAS,
// cuDNN or NCCL header (every one of them spells success as 0). Each names the failing call:
//   "CUDA error in cudaMalloc(&p, 1024): out of memory (cudaErrorMemoryAllocation)".
// Allocation failures throw OutOfMemoryError; missing/invalid devices DeviceError; the rest Error.
[[noreturn]] void throw_cuda_error(cudaError_t status, const char* call, const char* file,
                                   int line);
[[noreturn]] void throw_cublas_error(int status, const char* call, const char* file, int line);
[[noreturn]] void throw_cudnn_error(int status, const char* call, const char* file, int line);
[[noreturn]] void throw_nccl_error(int status, const char* call, const char* file, int line);
}  // namespace octo::cuda::detail

// Usage: OCTO_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, stream));
// Variadic so that calls whose arguments contain template commas need no extra parentheses.
#define OCTO_CUDA_CHECK(...)                                                                       \
  do {                                                                                             \
    const cudaError_t octo_cuda_status_ = (__VA_ARGS__);                                           \
    if (OCTO_UNLIKELY(octo_cuda_status_ != cudaSuccess)) {                                         \
      ::octo::cuda::detail::throw_cuda_error(octo_cuda_status_, #__VA_ARGS__, __FILE__, __LINE__); \
    }                                                                                              \
  } while (0)

// After a kernel launch: a bad configuration only shows up in cudaGetLastError().
#define OCTO_CUDA_CHECK_LAUNCH(name)                                                      \
  do {                                                                                    \
    const cudaError_t octo_cuda_status_ = cudaGetLastError();                             \
    if (OCTO_UNLIKELY(octo_cuda_status_ != cudaSuccess)) {                                \
      ::octo::cuda::detail::throw_cuda_error(octo_cuda_status_, "launch of kernel " name, \
                                             __FILE__, __LINE__);                         \
    }                                                                                     \
  } while (0)

#define OCTO_CUBLAS_CHECK(...)                                                              \
  do {                                                                                      \
    const int octo_cublas_status_ = static_cast<int>(__VA_ARGS__);                          \
    if (OCTO_UNLIKELY(octo_cublas_status_ != 0)) {                                          \
      ::octo::cuda::detail::throw_cublas_error(octo_cublas_status_, #__VA_ARGS__, __FILE__, \
                                               __LINE__);                                   \
    }                                                                                       \
  } while (0)

#define OCTO_CUDNN_CHECK(...)                                                             \
  do {                                                                                    \
    const int octo_cudnn_status_ = static_cast<int>(__VA_ARGS__);                         \
    if (OCTO_UNLIKELY(octo_cudnn_status_ != 0)) {                                         \
      ::octo::cuda::detail::throw_cudnn_error(octo_cudnn_status_, #__VA_ARGS__, __FILE__, \
                                              __LINE__);                                  \
    }                                                                                     \
  } while (0)

#define OCTO_NCCL_CHECK(...)                                                                       \
  do {                                                                                             \
    const int octo_nccl_status_ = static_cast<int>(__VA_ARGS__);                                   \
    if (OCTO_UNLIKELY(octo_nccl_status_ != 0)) {                                                   \
      ::octo::cuda::detail::throw_nccl_error(octo_nccl_status_, #__VA_ARGS__, __FILE__, __LINE__); \
    }                                                                                              \
  } while (0)
