// The CUDA caching allocator: rounding, per-stream pools, block splitting and merging, cross-stream
// reuse through events, empty_cache, statistics, and out-of-memory recovery.
#include "kernels/cuda/caching_allocator.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <mutex>
#include <set>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/device_hooks.h"
#include "core/error.h"
#include "kernels/cuda/cuda_check.h"

namespace octo::cuda {

std::string format_bytes(int64_t bytes) {
  if (bytes < 1024) return std::to_string(bytes) + " B";
  static const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = double(bytes) / 1024.0;
  int u = 0;
  while (v >= 1024.0 && u < 5) {
    v /= 1024.0;
    ++u;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f %s", v, kUnits[u]);
  return buf;
}

namespace {

// One contiguous piece of a segment (one cudaMalloc). Segments in the large pool and the small
// pool are split into blocks; neighbours are linked so that freed blocks merge again.
struct Block {
  Block(int device, cudaStream_t stream, size_t size, void* ptr, bool small)
      : device(device), stream(stream), size(size), ptr(ptr), small(small) {}
  int device = 0;
  cudaStream_t stream = nullptr;  // the stream it was allocated for; it is reused only there
  size_t size = 0;
  void* ptr = nullptr;
  bool small = false;      // which pool it belongs to
  bool allocated = false;  // handed out to a tensor
  int pending_events = 0;  // freed, but other streams may still use it (record_stream)
  std::unordered_set<cudaStream_t> stream_uses;  // streams other than `stream` that used it
  Block* prev = nullptr;                         // neighbours within the segment
  Block* next = nullptr;
};

// Pools are ordered by (stream, size, address): lower_bound finds the best fit on a stream.
struct BlockLess {
  bool operator()(const Block* a, const Block* b) const {
    return std::make_tuple(uintptr_t(a->stream), a->size, uintptr_t(a->ptr)) <
           std::make_tuple(uintptr_t(b->stream), b->size, uintptr_t(b->ptr));
  }
};
using BlockPool = std::set<Block*, BlockLess>;

size_t round_size(size_t n) { return (n + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize; }

size_t segment_size(size_t size) {
  if (size <= kSmallSize) return kSmallBuffer;
  if (size < kMinLargeAlloc) return kLargeBuffer;
  return (size + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
}

class DeviceCachingAllocator final : public Allocator {
 public:
  explicit DeviceCachingAllocator(int device) : device_(device) {}

  DataPtr allocate(size_t nbytes) override {
    if (nbytes == 0) return DataPtr(nullptr, [](void*) {});
    cudaStream_t stream = current_stream(device_).handle();
    std::lock_guard<std::mutex> lock(mutex_);
    process_events();
    // Far beyond any GPU; also keeps the rounding below from overflowing.
    if (nbytes > (size_t(1) << 60)) throw_oom(nbytes);
    size_t size = round_size(nbytes);
    bool small = size <= kSmallSize;
    BlockPool& pool = small ? small_ : large_;
    Block* block = take_from_pool(pool, stream, size);
    if (!block) block = new_segment(stream, size, small, nbytes);
    if (should_split(block, size)) {
      auto* rest = new Block(device_, stream, block->size - size,
                             static_cast<char*>(block->ptr) + size, small);
      rest->prev = block;
      rest->next = block->next;
      if (rest->next) rest->next->prev = rest;
      block->next = rest;
      block->size = size;
      pool.insert(rest);
    }
    block->allocated = true;
    active_[block->ptr] = block;
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

  void record_stream(const void* ptr, cudaStream_t stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = active_.find(const_cast<void*>(ptr));
    OCTO_CHECK_VALUE(it != active_.end(), "record_stream: the pointer ", ptr,
                     " is not the start of a live allocation of cuda:", device_,
                     "'s caching allocator");
    if (it->second->stream != stream) it->second->stream_uses.insert(stream);
  }

 private:
  Block* take_from_pool(BlockPool& pool, cudaStream_t stream, size_t size) {
    Block key(device_, stream, size, nullptr, false);
    auto it = pool.lower_bound(&key);
    if (it == pool.end() || (*it)->stream != stream) return nullptr;
    Block* block = *it;
    pool.erase(it);
    return block;
  }

  static bool should_split(const Block* block, size_t size) {
    size_t rest = block->size - size;
    return block->small ? rest >= kMinBlockSize : rest > kSmallSize;
  }

  Block* new_segment(cudaStream_t stream, size_t size, bool small, size_t requested) {
    size_t bytes = segment_size(size);
    void* ptr = nullptr;
    detail::CudaDeviceScope scope(device_);
    cudaError_t status = cudaMalloc(&ptr, bytes);
    if (status == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // clear it, give the cache back to the driver, and try once more
      release_cached_blocks();
      status = cudaMalloc(&ptr, bytes);
      if (status == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        throw_oom(requested);
      }
    }
    OCTO_CUDA_CHECK(status);
    stats_.reserved_bytes += int64_t(bytes);
    ++stats_.system_allocations;
    return new Block(device_, stream, bytes, ptr, small);
  }

  [[noreturn]] void throw_oom(size_t requested) {
    std::string msg =
        ::octo::detail::str("CUDA out of memory on cuda:", device_, ": tried to allocate ",
                            format_bytes(int64_t(std::min<size_t>(requested, size_t(INT64_MAX)))),
                            "; ", format_bytes(stats_.allocated_bytes), " allocated by octo, ",
                            format_bytes(stats_.reserved_bytes), " reserved");
    size_t free_bytes = 0, total_bytes = 0;
    if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
      msg += ::octo::detail::str("; the GPU has ", format_bytes(int64_t(free_bytes)), " free of ",
                                 format_bytes(int64_t(total_bytes)));
    } else {
      cudaGetLastError();
    }
    OCTO_THROW(OutOfMemoryError, msg);
  }

  void free(Block* block) {
    std::lock_guard<std::mutex> lock(mutex_);
    block->allocated = false;
    active_.erase(block->ptr);
    stats_.allocated_bytes -= int64_t(block->size);
    --stats_.allocations;
    if (!block->stream_uses.empty()) {
      // Other streams may still read or write it: reuse only after their current work is done.
      detail::CudaDeviceScope scope(device_);
      for (cudaStream_t s : block->stream_uses) {
        cudaEvent_t event = nullptr;
        OCTO_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
        OCTO_CUDA_CHECK(cudaEventRecord(event, s));
        pending_.emplace_back(event, block);
        ++block->pending_events;
      }
      block->stream_uses.clear();
      return;
    }
    return_to_pool(block);
  }

  // A free block goes back to its pool, merged with free neighbours of its segment.
  void return_to_pool(Block* block) {
    BlockPool& pool = block->small ? small_ : large_;
    if (mergeable(block->prev)) {
      Block* prev = block->prev;
      pool.erase(prev);
      prev->size += block->size;
      prev->next = block->next;
      if (prev->next) prev->next->prev = prev;
      delete block;
      block = prev;
    }
    if (mergeable(block->next)) {
      Block* next = block->next;
      pool.erase(next);
      block->size += next->size;
      block->next = next->next;
      if (block->next) block->next->prev = block;
      delete next;
    }
    pool.insert(block);
  }

  static bool mergeable(const Block* b) { return b && !b->allocated && b->pending_events == 0; }

  // Blocks whose cross-stream events have completed become reusable.
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
      Block* block = it->second;
      it = pending_.erase(it);
      if (--block->pending_events == 0) return_to_pool(block);
    }
  }

  // Frees every segment that is wholly unused (after waiting for pending cross-stream work).
  void release_cached_blocks() {
    for (auto& [event, block] : pending_) OCTO_CUDA_CHECK(cudaEventSynchronize(event));
    process_events();
    detail::CudaDeviceScope scope(device_);
    for (BlockPool* pool : {&small_, &large_}) {
      for (auto it = pool->begin(); it != pool->end();) {
        Block* block = *it;
        if (block->prev || block->next) {  // part of a segment still partly in use
          ++it;
          continue;
        }
        OCTO_CUDA_CHECK(cudaFree(block->ptr));
        stats_.reserved_bytes -= int64_t(block->size);
        it = pool->erase(it);
        delete block;
      }
    }
  }

  int device_;
  mutable std::mutex mutex_;
  BlockPool small_, large_;
  std::unordered_map<void*, Block*> active_;
  std::deque<std::pair<cudaEvent_t, Block*>> pending_;
  MemoryStats stats_;
};

DeviceCachingAllocator& device_allocator(int index) {
  // One per visible device, created on first use and never destroyed: storages may outlive main.
  static std::vector<DeviceCachingAllocator*>* all = [] {
    auto* v = new std::vector<DeviceCachingAllocator*>();
    for (int i = 0; i < cuda_hooks().device_count(); ++i)
      v->push_back(new DeviceCachingAllocator(i));
    return v;
  }();
  OCTO_CHECK_DEVICE(index >= 0 && index < int(all->size()), "no CUDA allocator for cuda:", index,
                    ": ", all->size(), " CUDA device(s) are visible");
  return *(*all)[index];
}

}  // namespace

Allocator* caching_allocator(int index) { return &device_allocator(index); }

void record_stream(const void* ptr, const Stream& stream) {
  if (!ptr) return;
  device_allocator(stream.device_index()).record_stream(ptr, stream.handle());
}

void empty_cache() {
  for (int i = 0; i < cuda_hooks().device_count(); ++i) device_allocator(i).empty_cache();
}

}  // namespace octo::cuda
