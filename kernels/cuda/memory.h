// Launchers of the memory kernels in memory.cu, used by copy.cpp's host/device/peer routing.
#pragma once

#include "kernels/cuda/stream.h"
#include "kernels/tensor_arg.h"

namespace octo::kernels::cuda_memory {

/// dst = src elementwise on the GPU that holds both (any strides, any dtypes), queued on
/// `stream`; the caller made that GPU current. Same-dtype contiguous pairs should use
/// cudaMemcpyAsync instead.
void launch_copy(const TensorArg& dst, const TensorArg& src, cuda::StreamHandle stream);

}  // namespace octo::kernels::cuda_memory
