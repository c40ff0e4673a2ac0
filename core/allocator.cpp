// The 64-byte aligned, counted CPU allocator and the per-device allocator lookup.
#include "core/allocator.h"

#include <atomic>
#include <cstdlib>

#include "core/device_hooks.h"
#include "core/error.h"

namespace octo {

namespace {

class CpuAllocator final : public Allocator {
 public:
  DataPtr allocate(size_t nbytes) override {
    if (nbytes == 0) return DataPtr(nullptr, [](void*) {});
    size_t rounded = (nbytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
    void* p = std::aligned_alloc(kCpuAlignment, rounded);
    if (!p) {
      OCTO_THROW(OutOfMemoryError, "CPU out of memory: tried to allocate ", nbytes,
                 " bytes; octo currently holds ", allocated_.load(), " bytes of host memory");
    }
    int64_t now = allocated_.fetch_add(int64_t(rounded)) + int64_t(rounded);
    int64_t peak = peak_.load();
    while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
    }
    live_.fetch_add(1);
    total_.fetch_add(1);
    return DataPtr(p, [this, rounded](void* q) {
      std::free(q);
      allocated_.fetch_sub(int64_t(rounded));
      live_.fetch_sub(1);
    });
  }
  MemoryStats stats() const override {
    MemoryStats s;
    s.allocated_bytes = s.reserved_bytes = allocated_.load();
    s.peak_allocated_bytes = peak_.load();
    s.allocations = live_.load();
    s.total_allocations = s.system_allocations = total_.load();
    return s;
  }
  void reset_peak_stats() override { peak_.store(allocated_.load()); }

 private:
  std::atomic<int64_t> allocated_{0}, peak_{0}, live_{0}, total_{0};
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

}  // namespace octo
