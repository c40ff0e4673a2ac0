// The 64-byte aligned, counted, caching CPU allocator and the per-device allocator lookup.
#include "core/allocator.h"

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/device_hooks.h"
#include "core/error.h"

namespace octo {

// Note [CPU caching allocator]
// A training step allocates and frees the same large buffers (activations, gradients, im2col
// scratch) every time. glibc serves blocks of 128 KiB and more with mmap, or returns the top of
// its heap to the system on free, so each step's first touch of such a buffer page-faults and
// the kernel zeroes the page: on the MNIST CNN at one thread that was a third of the step. So
// blocks of at least kCacheMinBytes are rounded up to a size class (an eighth of a power of two:
// at most 12.5% waste) and kept on a free list of that class when freed; the next request of the
// class reuses one, already mapped. The cache holds at most kMaxCachedBytes (beyond that a freed
// block goes back to the system), empty_cache() releases it all, and an allocation that fails
// releases it and tries once more before throwing. Smaller blocks go straight to aligned_alloc:
// glibc keeps those in its heap anyway. The memory is the process's either way, so the cache
// is shared by every virtual CPU device (one lock, taken only for the large blocks).

namespace {

constexpr size_t kCacheMinBytes = size_t(128) << 10;  // 128 KiB: glibc's initial mmap threshold
constexpr size_t kMaxCachedBytes = size_t(1) << 30;   // 1 GiB held unused at most

/// n rounded up to a multiple of an eighth of the largest power of two <= n (n >= 8).
size_t size_class(size_t n) {
  const size_t p = size_t(1) << (63 - __builtin_clzll(n));
  const size_t step = p / 8;
  return (n + step - 1) / step * step;
}

class CpuAllocator final : public Allocator {
 public:
  DataPtr allocate(size_t nbytes) override {
    if (nbytes == 0) return DataPtr(nullptr, [](void*) {});
    size_t rounded = (nbytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
    const bool cached = rounded >= kCacheMinBytes;
    void* p = nullptr;
    if (cached) {
      rounded = size_class(rounded);
      p = take_cached(rounded);
    }
    if (!p) p = system_allocate(rounded, nbytes);
    int64_t now = allocated_.fetch_add(int64_t(rounded)) + int64_t(rounded);
    int64_t peak = peak_.load();
    while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
    }
    live_.fetch_add(1);
    total_.fetch_add(1);
    return DataPtr(p, [this, rounded, cached](void* q) {
      allocated_.fetch_sub(int64_t(rounded));
      live_.fetch_sub(1);
      if (!cached || !keep_cached(q, rounded)) std::free(q);
    });
  }
  MemoryStats stats() const override {
    MemoryStats s;
    s.allocated_bytes = allocated_.load();
    s.reserved_bytes = s.allocated_bytes + int64_t(cached_bytes_.load());
    s.peak_allocated_bytes = peak_.load();
    s.allocations = live_.load();
    s.total_allocations = total_.load();
    s.system_allocations = system_.load();
    return s;
  }
  void reset_peak_stats() override { peak_.store(allocated_.load()); }
  void empty_cache() override {
    std::unordered_map<size_t, std::vector<void*>> blocks;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      blocks.swap(free_);
      cached_bytes_.store(0);
    }
    for (auto& [size, list] : blocks)
      for (void* q : list) std::free(q);
  }

 private:
  void* take_cached(size_t rounded) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = free_.find(rounded);
    if (it == free_.end() || it->second.empty()) return nullptr;
    void* p = it->second.back();
    it->second.pop_back();
    cached_bytes_.fetch_sub(rounded);
    return p;
  }
  bool keep_cached(void* q, size_t rounded) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (cached_bytes_.load() + rounded > kMaxCachedBytes) return false;
    free_[rounded].push_back(q);
    cached_bytes_.fetch_add(rounded);
    return true;
  }
  void* system_allocate(size_t rounded, size_t nbytes) {
    void* p = std::aligned_alloc(kCpuAlignment, rounded);
    if (!p && cached_bytes_.load() > 0) {  // the cache may hold what the system lacks
      empty_cache();
      p = std::aligned_alloc(kCpuAlignment, rounded);
    }
    if (!p) {
      OCTO_THROW(OutOfMemoryError, "CPU out of memory: tried to allocate ", nbytes,
                 " bytes; octo currently holds ", allocated_.load(), " bytes of host memory");
    }
    system_.fetch_add(1);
    return p;
  }

  std::atomic<int64_t> allocated_{0}, peak_{0}, live_{0}, total_{0}, system_{0};
  std::atomic<size_t> cached_bytes_{0};
  std::mutex mutex_;                                     // guards free_
  std::unordered_map<size_t, std::vector<void*>> free_;  // size class -> unused blocks
};

}  // namespace

Allocator* cpu_allocator() {
  static CpuAllocator* instance = new CpuAllocator();  // never destroyed: storages may outlive main
  return instance;
}

Allocator* allocator_for(Device device) {
  if (device.is_cpu()) return cpu_allocator();
  return cuda_hooks().allocator(device.index());
}

MemoryStats memory_stats(Device device) { return allocator_for(device)->stats(); }

void empty_cache(Device device) { allocator_for(device)->empty_cache(); }

}  // namespace octo
