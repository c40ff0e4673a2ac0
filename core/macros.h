// Portability macros shared by host code and CUDA kernels.
#pragma once

#if defined(__CUDACC__)
#define OCTO_HOST_DEVICE __host__ __device__
#define OCTO_DEVICE __device__
#else
#define OCTO_HOST_DEVICE
#define OCTO_DEVICE
#endif

#define OCTO_INLINE inline
#define OCTO_STRINGIFY_(x) #x
#define OCTO_STRINGIFY(x) OCTO_STRINGIFY_(x)

#if defined(__GNUC__)
#define OCTO_LIKELY(x) __builtin_expect(!!(x), 1)
#define OCTO_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define OCTO_LIKELY(x) (x)
#define OCTO_UNLIKELY(x) (x)
#endif
