// Allocators: where storage bytes come from. The CPU allocator is 64-byte aligned, counted, and
// keeps freed large blocks for reuse (Note [CPU caching allocator] in allocator.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "core/device.h"

namespace octo {

/// Owning pointer to device memory; the deleter returns it to the allocator that made it.
using DataPtr = std::unique_ptr<void, std::function<void(void*)>>;

/// Bytes and blocks an allocator currently holds; peak since the last reset.
struct MemoryStats {
  int64_t allocated_bytes = 0;  // in live tensors' storages
  int64_t reserved_bytes = 0;   // held from the system (>= allocated for caching allocators)
  int64_t peak_allocated_bytes = 0;
  int64_t allocations = 0;         // live allocations
  int64_t total_allocations = 0;   // ever made (a caching allocator's cache hits count here too)
  int64_t system_allocations = 0;  // calls to the system allocator (malloc / cudaMalloc)
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  /// Returns nbytes of memory (a null DataPtr for 0 bytes); throws OutOfMemoryError on failure.
  virtual DataPtr allocate(size_t nbytes) = 0;
  virtual MemoryStats stats() const = 0;
  virtual void reset_peak_stats() = 0;
  /// Returns cached, unused memory to the system (no-op for allocators that do not cache).
  virtual void empty_cache() {}
};

inline constexpr size_t kCpuAlignment = 64;  // bytes: one cache line, and an AVX-512 register

/// The host allocator shared by every virtual CPU device.
Allocator* cpu_allocator();
/// The allocator for a device: the CPU allocator or that CUDA device's caching allocator.
Allocator* allocator_for(Device device);
/// Memory statistics for a device (all cpu:N share host memory, so they report the same).
MemoryStats memory_stats(Device device);
/// Returns the device's cached, unused blocks to the system (every cpu:N shares one cache).
void empty_cache(Device device);

}  // namespace octo
