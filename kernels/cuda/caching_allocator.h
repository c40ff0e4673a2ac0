// The CUDA caching allocator: device memory pooled per device and stream, reused without cudaFree.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/allocator.h"
#include "kernels/cuda/stream.h"

namespace octo::cuda {

// Size classes (the scheme of PyTorch's CUDACachingAllocator, simplified):
inline constexpr size_t kMinBlockSize = 512;               // every request is rounded up to this
inline constexpr size_t kSmallSize = size_t(1) << 20;      // requests <= 1 MiB use the small pool
inline constexpr size_t kSmallBuffer = size_t(2) << 20;    // small-pool segments are 2 MiB
inline constexpr size_t kLargeBuffer = size_t(20) << 20;   // requests in (1, 10) MiB: 20 MiB segments
inline constexpr size_t kMinLargeAlloc = size_t(10) << 20; // from here on, a segment per request,
inline constexpr size_t kRoundLarge = size_t(2) << 20;     // rounded up to 2 MiB

/// The caching allocator of cuda:index (what allocator_for(Device("cuda:N")) returns). Throws
/// DeviceError for a device that does not exist. Never destroyed.
Allocator* caching_allocator(int index);

/// Tells the allocator that the memory at ptr (from cuda:N's caching allocator, N = stream's
/// device) is also used by work queued on `stream`: when it is freed, it is reused only after
/// that work has finished. Needed when a tensor allocated on one stream is used on another.
void record_stream(const void* ptr, const Stream& stream);

/// Returns every cached, unused segment of every initialised device to the driver (cudaFree).
void empty_cache();

/// "512 B", "1.50 KiB", "2.00 GiB": how the allocator's messages print byte counts.
std::string format_bytes(int64_t bytes);

}  // namespace octo::cuda
