// The CUDA caching allocator: device memory pooled per device and stream, reused without cudaFree.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/allocator.h"
#include "kernels/cuda/stream.h"

namespace octo::cuda {

// Size classes (the scheme of PyTorch's CUDACachingAllocator, simplified). Every request is
// rounded up to kMinBlockSize; requests <= kSmallSize come from the small pool, whose segments
// are kSmallBuffer; larger requests under kMinLargeAlloc get a kLargeBuffer segment; from
// kMinLargeAlloc on, a segment per request rounded up to kRoundLarge.
inline constexpr size_t kMinBlockSize = 512;                // bytes
inline constexpr size_t kSmallSize = size_t(1) << 20;       // 1 MiB
inline constexpr size_t kSmallBuffer = size_t(2) << 20;     // 2 MiB
inline constexpr size_t kLargeBuffer = size_t(20) << 20;    // 20 MiB
inline constexpr size_t kMinLargeAlloc = size_t(10) << 20;  // 10 MiB
inline constexpr size_t kRoundLarge = size_t(2) << 20;      // 2 MiB

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
