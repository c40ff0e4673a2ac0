// Pinned (page-locked) host memory: the caching host allocator and the copy entry point that lets
// host <-> GPU copies from or into it return without waiting for the GPU.
#pragma once

#include <cstddef>

#include "core/allocator.h"
#include "kernels/cuda/stream.h"
#include "kernels/tensor_arg.h"

namespace octo::cuda {

/// Smallest pinned block, in bytes; every request is rounded up to a power of two >= this.
inline constexpr size_t kMinHostBlock = 512;

/// The caching allocator of pinned host memory (cudaHostAlloc, portable to every device): what
/// Tensor::pin_memory() allocates from. Blocks are bucketed by size rounded up to a power of two
/// and kept after free; a freed block is reused only once every stream that used it
/// (record_host_use) has finished that use. Statistics as for the device allocator: a cache hit
/// shows as total_allocations growing while system_allocations (cudaHostAlloc calls) does not.
/// Throws DeviceError when no GPU is visible. Never destroyed. Also CudaHooks::pinned_allocator().
Allocator* host_allocator();

/// True when p points into a block of the pinned allocator (anywhere inside it: views of a pinned
/// tensor count). Never throws; false when nothing was ever pinned.
bool is_pinned(const void* p);

/// Records that work queued so far on `stream` reads or writes the pinned block containing p
/// (what a non-blocking copy does): when the block is freed, an event is recorded on `stream` and
/// the block is reused only after it has completed. Returns false, doing nothing, when p is not
/// in a live pinned block.
bool record_host_use(const void* p, const Stream& stream);

/// Returns every cached, unused pinned block to the driver (cudaFreeHost), after waiting for the
/// streams that used freed blocks. Blocks still in use by tensors stay.
void empty_host_cache();

}  // namespace octo::cuda

namespace octo::kernels {

/// dst = src where either side is on a GPU: CudaBackend::copy (non_blocking = false) and
/// CudaBackend::copy_non_blocking (true), the only way code outside kernels/ reaches it. With
/// non_blocking = true and equal dtypes, a copy whose host side is contiguous pinned memory is
/// queued on the GPU's current stream and the call returns at once (see Note [Non-blocking copies]
/// in kernels/cuda/copy.cpp): the caller must not read a non-blocking download, nor overwrite the
/// source of an upload, before synchronising that stream. Every other copy (pageable host memory,
/// strided host side, dtype conversion) waits for the GPU as before, whatever non_blocking says.
/// Throws DeviceError without CUDA support.
void cuda_copy(const TensorArg& dst, const TensorArg& src, bool non_blocking);

}  // namespace octo::kernels
