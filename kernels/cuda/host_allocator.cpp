// The caching pinned host allocator: power-of-two buckets over cudaHostAlloc, reuse gated by
// events on the streams that used a block, pointer lookup for is_pinned, empty_cache, statistics.
#include "kernels/cuda/host_allocator.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "core/device_hooks.h"
#include "core/error.h"
#include "kernels/cuda/caching_allocator.h"
#include "kernels/cuda/cuda_check.h"

namespace octo::cuda {

namespace {

// Requests above this fail at once (no machine has that much host memory); it also keeps the
// power-of-two rounding below from overflowing.
constexpr size_t kMaxHostRequest = size_t(1) << 60;
constexpr int kBuckets = 64;

// One cudaHostAlloc. Never split: a block serves one allocation of its bucket's size at a time.
struct HostBlock {
  HostBlock(void* ptr, size_t size) : ptr(ptr), size(size) {}
  void* ptr;
  size_t size;             // a power of two >= kMinHostBlock
  bool allocated = false;  // handed out to a tensor
  bool poisoned = false;   // recording its release events failed: never reused
  int pending_events = 0;  // freed, but streams that used it may not have finished
  std::set<std::pair<int, cudaStream_t>> streams;  // (device, stream) that used it while live
};

size_t round_pow2(size_t n) {
  size_t size = kMinHostBlock;
  while (size < n) size <<= 1;
  return size;
}

int bucket_of(size_t pow2_size) {
  int b = 0;
  while ((size_t(1) << b) < pow2_size) ++b;
  return b;
}

class HostCachingAllocator final : public Allocator {
 public:
  DataPtr allocate(size_t nbytes) override {
    if (nbytes == 0) return DataPtr(nullptr, [](void*) {});
    std::lock_guard<std::mutex> lock(mutex_);
    process_events();
    if (nbytes > kMaxHostRequest) throw_oom(nbytes);
    const size_t size = round_pow2(nbytes);
    std::vector<HostBlock*>& bucket = free_[bucket_of(size)];
    HostBlock* block = nullptr;
    if (!bucket.empty()) {  // the most recently freed block: likeliest to be in the CPU's caches
      block = bucket.back();
      bucket.pop_back();
    } else {
      block = new_block(size, nbytes);
    }
    block->allocated = true;
    stats_.allocated_bytes += int64_t(block->size);
    stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
    ++stats_.allocations;
    ++stats_.total_allocations;
    return DataPtr(block->ptr, [this, block](void*) {
      try {
        free(block);
      } catch (...) {  // a deleter must not throw (e.g. during CUDA runtime teardown at exit)
      }
    });
  }

  MemoryStats stats() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }

  void reset_peak_stats() override {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.peak_allocated_bytes = stats_.allocated_bytes;
  }

  void empty_cache() override {
    std::lock_guard<std::mutex> lock(mutex_);
    release_cached_blocks();
  }

  bool contains(const void* p) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return find(p) != nullptr;
  }

  bool record_use(const void* p, int device, cudaStream_t stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    HostBlock* block = find(p);
    if (!block || !block->allocated) return false;
    block->streams.insert({device, stream});
    return true;
  }

 private:
  // The block whose [ptr, ptr + size) holds p, or null.
  HostBlock* find(const void* p) const {
    if (!p || blocks_.empty()) return nullptr;
    const auto addr = reinterpret_cast<uintptr_t>(p);
    auto it = blocks_.upper_bound(addr);  // first block starting after p
    if (it == blocks_.begin()) return nullptr;
    --it;
    HostBlock* block = it->second;
    return addr < it->first + block->size ? block : nullptr;
  }

  HostBlock* new_block(size_t size, size_t requested) {
    void* ptr = nullptr;
    // Portable: pinned for every device's context, so copies to any GPU are true DMA transfers.
    cudaError_t status = cudaHostAlloc(&ptr, size, cudaHostAllocPortable);
    if (status == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // clear it, give the cache back to the driver, and try once more
      release_cached_blocks();
      status = cudaHostAlloc(&ptr, size, cudaHostAllocPortable);
      if (status == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        throw_oom(requested);
      }
    }
    OCTO_CUDA_CHECK(status);
    auto* block = new HostBlock(ptr, size);
    blocks_.emplace(reinterpret_cast<uintptr_t>(ptr), block);
    stats_.reserved_bytes += int64_t(size);
    ++stats_.system_allocations;
    return block;
  }

  [[noreturn]] void throw_oom(size_t requested) const {
    OCTO_THROW(OutOfMemoryError, "out of pinned host memory: tried to allocate ",
               format_bytes(int64_t(std::min<size_t>(requested, size_t(INT64_MAX)))), "; ",
               format_bytes(stats_.allocated_bytes), " pinned in live tensors, ",
               format_bytes(stats_.reserved_bytes),
               " reserved (page-locked memory is limited by the OS: see ulimit -l)");
  }

  void free(HostBlock* block) {
    std::lock_guard<std::mutex> lock(mutex_);
    block->allocated = false;
    stats_.allocated_bytes -= int64_t(block->size);
    --stats_.allocations;
    if (block->streams.empty()) {
      free_[bucket_of(block->size)].push_back(block);
      return;
    }
    // Streams that used it may still be copying from or into it: one event per stream, recorded
    // now (after every use queued so far), gates its reuse. See Note [Non-blocking copies].
    std::vector<cudaEvent_t> events;
    try {
      for (const auto& [device, stream] : block->streams) {
        detail::CudaDeviceScope scope(device);
        cudaEvent_t event = nullptr;
        OCTO_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
        events.push_back(event);
        OCTO_CUDA_CHECK(cudaEventRecord(event, stream));
      }
    } catch (...) {
      // Without every event, reuse could overwrite memory a copy still reads: keep the block
      // out of the free lists for good (it stays counted as reserved).
      for (cudaEvent_t e : events) cudaEventDestroy(e);
      block->poisoned = true;
      block->streams.clear();
      throw;
    }
    block->streams.clear();
    for (cudaEvent_t e : events) pending_.emplace_back(e, block);
    block->pending_events += int(events.size());
  }

  // Blocks whose events have all completed become reusable.
  void process_events() {
    for (auto it = pending_.begin(); it != pending_.end();) {
      cudaError_t status = cudaEventQuery(it->first);
      if (status == cudaErrorNotReady) {
        cudaGetLastError();
        ++it;
        continue;
      }
      OCTO_CUDA_CHECK(status);
      OCTO_CUDA_CHECK(cudaEventDestroy(it->first));
      HostBlock* block = it->second;
      it = pending_.erase(it);
      if (--block->pending_events == 0 && !block->poisoned) {
        free_[bucket_of(block->size)].push_back(block);
      }
    }
  }

  // Frees every cached block (after waiting for the streams that used freed blocks).
  void release_cached_blocks() {
    for (auto& [event, block] : pending_) OCTO_CUDA_CHECK(cudaEventSynchronize(event));
    process_events();
    for (auto& bucket : free_) {
      while (!bucket.empty()) {
        HostBlock* block = bucket.back();
        OCTO_CUDA_CHECK(cudaFreeHost(block->ptr));
        bucket.pop_back();
        blocks_.erase(reinterpret_cast<uintptr_t>(block->ptr));
        stats_.reserved_bytes -= int64_t(block->size);
        delete block;
      }
    }
  }

  mutable std::mutex mutex_;
  std::map<uintptr_t, HostBlock*> blocks_;  // every block held, by address (for find)
  std::vector<HostBlock*> free_[kBuckets];  // reusable blocks, by log2(size)
  std::deque<std::pair<cudaEvent_t, HostBlock*>> pending_;
  MemoryStats stats_;
};

// Set once the allocator exists, so that is_pinned() never creates it (nor needs a GPU).
std::atomic<HostCachingAllocator*> g_allocator{nullptr};

HostCachingAllocator& instance() {
  // Created on first use and never destroyed: pinned storages may outlive main.
  static HostCachingAllocator* allocator = [] {
    auto* a = new HostCachingAllocator();
    g_allocator.store(a, std::memory_order_release);
    return a;
  }();
  return *allocator;
}

}  // namespace

Allocator* host_allocator() {
  OCTO_CHECK_DEVICE(
      cuda_hooks().device_count() > 0,
      "pinned host memory needs a CUDA GPU (cudaHostAlloc), but no CUDA GPU is visible; keep the tensor in ordinary (pageable) memory");
  return &instance();
}

bool is_pinned(const void* p) {
  HostCachingAllocator* a = g_allocator.load(std::memory_order_acquire);
  return a != nullptr && a->contains(p);
}

bool record_host_use(const void* p, const Stream& stream) {
  HostCachingAllocator* a = g_allocator.load(std::memory_order_acquire);
  OCTO_CHECK_DEVICE(stream.device().is_cuda(),
                    "record_host_use: expected a CUDA stream, got one on ", stream.device());
  return a != nullptr && a->record_use(p, stream.device_index(), stream.handle());
}

void empty_host_cache() {
  HostCachingAllocator* a = g_allocator.load(std::memory_order_acquire);
  if (a) a->empty_cache();
}

}  // namespace octo::cuda
