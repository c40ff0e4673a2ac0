// The throwers behind OCTO_CUDA_CHECK & co.: name the failing call, the status and its meaning.
#include "kernels/cuda/cuda_check.h"

#include <cublas_v2.h>
#include <cudnn.h>
#include <nccl.h>

#include <string>

#include "core/error.h"

namespace octo::cuda::detail {

namespace {
const char* nccl_status_name(int status) {
  switch (status) {
    case ncclUnhandledCudaError:
      return "ncclUnhandledCudaError";
    case ncclSystemError:
      return "ncclSystemError";
    case ncclInternalError:
      return "ncclInternalError";
    case ncclInvalidArgument:
      return "ncclInvalidArgument";
    case ncclInvalidUsage:
      return "ncclInvalidUsage";
    case ncclRemoteError:
      return "ncclRemoteError";
    case ncclInProgress:
      return "ncclInProgress";
    default:
      return "unknown ncclResult_t";
  }
}

// Errors that surface at some later call than the kernel that caused them.
bool is_asynchronous_error(cudaError_t status) {
  return status == cudaErrorIllegalAddress || status == cudaErrorLaunchFailure ||
         status == cudaErrorAssert || status == cudaErrorIllegalInstruction ||
         status == cudaErrorMisalignedAddress || status == cudaErrorLaunchTimeout;
}
}  // namespace

void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line) {
  cudaGetLastError();  // clear a non-sticky error so later, unrelated calls do not report it
  std::string msg = ::octo::detail::str("CUDA error in ", call, ": ", cudaGetErrorString(status),
                                        " (", cudaGetErrorName(status), ")");
  if (is_asynchronous_error(status)) {
    msg +=
        "; kernel errors are reported asynchronously, so the failing call may be an earlier one (run with CUDA_LAUNCH_BLOCKING=1 to find it); the CUDA context is now unusable";
  }
  switch (status) {
    case cudaErrorMemoryAllocation:
      throw OutOfMemoryError(msg, file, line);
    case cudaErrorNoDevice:
    case cudaErrorInvalidDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorDevicesUnavailable:
      throw DeviceError(msg, file, line);
    default:
      throw Error(msg, file, line);
  }
}

void throw_cublas_error(int status, const char* call, const char* file, int line) {
  auto s = static_cast<cublasStatus_t>(status);
  std::string msg = ::octo::detail::str("cuBLAS error in ", call, ": ", cublasGetStatusString(s),
                                        " (", cublasGetStatusName(s), ")");
  if (s == CUBLAS_STATUS_ALLOC_FAILED) throw OutOfMemoryError(msg, file, line);
  throw Error(msg, file, line);
}

void throw_cudnn_error(int status, const char* call, const char* file, int line) {
  auto s = static_cast<cudnnStatus_t>(status);
  std::string msg = ::octo::detail::str("cuDNN error in ", call, ": ", cudnnGetErrorString(s));
  char detail[512] = {};
  cudnnGetLastErrorString(detail, sizeof detail);
  if (detail[0] != '\0') msg += ::octo::detail::str(" (", detail, ")");
  if (s == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED ||
      s == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED) {
    throw OutOfMemoryError(msg, file, line);
  }
  throw Error(msg, file, line);
}

void throw_nccl_error(int status, const char* call, const char* file, int line) {
  auto s = static_cast<ncclResult_t>(status);
  std::string msg = ::octo::detail::str("NCCL error in ", call, ": ", ncclGetErrorString(s), " (",
                                        nccl_status_name(status), ")");
  const char* last = ncclGetLastError(nullptr);
  if (last && last[0] != '\0') msg += ::octo::detail::str(": ", last);
  throw Error(msg, file, line);
}

}  // namespace octo::cuda::detail
