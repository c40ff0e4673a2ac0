// The CUDA caching allocator: reuse without cudaMalloc (proved by its statistics), rounding and
// pools, splitting and merging, per-stream pools, record_stream, empty_cache, out of memory,
// peak statistics and thread safety.
#include "gpu/gpu_main.h"

#include <octo/octo.h>

#include <random>
#include <thread>
#include <vector>

#include "kernels/cuda/caching_allocator.h"
#include "kernels/cuda/stream.h"

using octo::Device;
using octo::DeviceType;
using octo::MemoryStats;
namespace cuda = octo::cuda;

namespace {
constexpr size_t kMiB = size_t(1) << 20;
const Device kGpu(DeviceType::CUDA, 0);

octo::Allocator* gpu_allocator() { return octo::allocator_for(kGpu); }
MemoryStats stats() { return gpu_allocator()->stats(); }
char* as_bytes(const octo::DataPtr& p) { return static_cast<char*>(p.get()); }
}  // namespace

TEST_CASE("a freed block is reused without a new cudaMalloc") {
  cuda::empty_cache();
  const MemoryStats s0 = stats();
  octo::DataPtr p = gpu_allocator()->allocate(3000);
  REQUIRE(p.get() != nullptr);
  void* first = p.get();
  const MemoryStats s1 = stats();
  CHECK(s1.system_allocations == s0.system_allocations + 1);
  CHECK(s1.allocated_bytes == s0.allocated_bytes + 3072);  // rounded up to 512 B
  CHECK(s1.reserved_bytes == s0.reserved_bytes + int64_t(cuda::kSmallBuffer));
  CHECK(s1.allocations == s0.allocations + 1);
  CHECK(s1.total_allocations == s0.total_allocations + 1);

  p.reset();
  const MemoryStats s2 = stats();
  CHECK(s2.allocated_bytes == s0.allocated_bytes);
  CHECK(s2.reserved_bytes == s1.reserved_bytes);  // cached, not returned to the driver
  CHECK(s2.allocations == s0.allocations);

  octo::DataPtr q = gpu_allocator()->allocate(3000);
  CHECK(q.get() == first);
  CHECK(stats().system_allocations == s1.system_allocations);
  CHECK(stats().total_allocations == s1.total_allocations + 1);

  // The same through tensors.
  q.reset();
  { octo::Tensor t = octo::empty({1000, 1000}, {.device = kGpu}); }
  const int64_t mallocs = stats().system_allocations;
  for (int i = 0; i < 10; ++i) {
    octo::Tensor t = octo::empty({1000, 1000}, {.device = kGpu});
    CHECK(t.device() == kGpu);
  }
  CHECK(stats().system_allocations == mallocs);
}

TEST_CASE("requests are rounded and served from small and large pools") {
  cuda::empty_cache();
  const MemoryStats s0 = stats();
  octo::DataPtr a = gpu_allocator()->allocate(1);
  CHECK(stats().allocated_bytes == s0.allocated_bytes + 512);
  octo::DataPtr b = gpu_allocator()->allocate(513);
  CHECK(stats().allocated_bytes == s0.allocated_bytes + 512 + 1024);
  octo::DataPtr c = gpu_allocator()->allocate(100 * 1024);
  // All three come from one 2 MiB small-pool segment.
  CHECK(stats().system_allocations == s0.system_allocations + 1);
  CHECK(stats().reserved_bytes == s0.reserved_bytes + int64_t(cuda::kSmallBuffer));
  CHECK(as_bytes(b) == as_bytes(a) + 512);
  CHECK(as_bytes(c) == as_bytes(b) + 1024);

  // 1 MiB exactly is still small; just above is large and gets a 20 MiB segment.
  const MemoryStats s1 = stats();
  octo::DataPtr d = gpu_allocator()->allocate(cuda::kSmallSize);
  CHECK(stats().reserved_bytes == s1.reserved_bytes);  // fits in the small segment's rest
  octo::DataPtr e = gpu_allocator()->allocate(3 * kMiB);
  CHECK(stats().reserved_bytes == s1.reserved_bytes + int64_t(cuda::kLargeBuffer));
  octo::DataPtr f = gpu_allocator()->allocate(3 * kMiB);  // split from the same 20 MiB segment
  CHECK(stats().system_allocations == s1.system_allocations + 1);
  CHECK(as_bytes(f) == as_bytes(e) + 3 * kMiB);

  // From 10 MiB on, a segment per request, rounded up to 2 MiB (bigger than the 14 MiB left
  // in the 20 MiB segment, so it cannot come from there).
  const MemoryStats s2 = stats();
  octo::DataPtr g = gpu_allocator()->allocate(20 * kMiB + 1);
  CHECK(stats().reserved_bytes == s2.reserved_bytes + int64_t(22 * kMiB));
  CHECK(stats().allocated_bytes == s2.allocated_bytes + int64_t(20 * kMiB + 512));
  CHECK(stats().system_allocations == s2.system_allocations + 1);
}

TEST_CASE("zero-byte allocations need no memory") {
  const MemoryStats s0 = stats();
  octo::DataPtr p = gpu_allocator()->allocate(0);
  CHECK(p.get() == nullptr);
  CHECK(stats().allocations == s0.allocations);
  octo::Tensor t = octo::empty({0, 5}, {.device = kGpu});
  CHECK(t.numel() == 0);
  CHECK(stats().allocated_bytes == s0.allocated_bytes);
}

TEST_CASE("large blocks are split and merged again") {
  cuda::empty_cache();
  octo::DataPtr a = gpu_allocator()->allocate(12 * kMiB);
  char* base = as_bytes(a);
  const int64_t mallocs = stats().system_allocations;
  a.reset();
  octo::DataPtr b = gpu_allocator()->allocate(4 * kMiB);
  octo::DataPtr c = gpu_allocator()->allocate(8 * kMiB);
  CHECK(stats().system_allocations == mallocs);
  CHECK(as_bytes(b) == base);
  CHECK(as_bytes(c) == base + 4 * kMiB);
  b.reset();
  c.reset();
  octo::DataPtr d = gpu_allocator()->allocate(12 * kMiB);  // needs the two halves merged
  CHECK(stats().system_allocations == mallocs);
  CHECK(as_bytes(d) == base);
}

TEST_CASE("empty_cache returns unused segments to the driver") {
  cuda::empty_cache();
  const MemoryStats s0 = stats();
  {
    octo::DataPtr x = gpu_allocator()->allocate(30 * kMiB);
    octo::DataPtr y = gpu_allocator()->allocate(2000);
  }
  CHECK(stats().reserved_bytes == s0.reserved_bytes + int64_t(30 * kMiB + cuda::kSmallBuffer));
  cuda::empty_cache();
  CHECK(stats().reserved_bytes == s0.reserved_bytes);
  CHECK(stats().allocated_bytes == s0.allocated_bytes);

  // A segment with a live block stays.
  octo::DataPtr live = gpu_allocator()->allocate(1000);
  { octo::DataPtr freed = gpu_allocator()->allocate(1000); }
  gpu_allocator()->empty_cache();  // the same, through octo::Allocator
  CHECK(stats().reserved_bytes == s0.reserved_bytes + int64_t(cuda::kSmallBuffer));

  // The next large request needs a new cudaMalloc: the cache is gone.
  const int64_t mallocs = stats().system_allocations;
  octo::DataPtr again = gpu_allocator()->allocate(30 * kMiB);
  CHECK(stats().system_allocations == mallocs + 1);
}

TEST_CASE("out of memory frees the cache, retries, then says how much was asked for") {
  // Leave a cached segment behind: the failed request must give it back.
  { octo::DataPtr cached = gpu_allocator()->allocate(40 * kMiB); }
  octo::DataPtr live = gpu_allocator()->allocate(64 * kMiB);
  const MemoryStats before = stats();
  REQUIRE(before.reserved_bytes > before.allocated_bytes);
  try {
    octo::Tensor huge = octo::empty({int64_t(1) << 48}, {.device = kGpu});  // 1 PiB of float32
    FAIL("a 1 PiB allocation succeeded");
  } catch (const octo::OutOfMemoryError& e) {
    const MemoryStats after = stats();
    CHECK_THAT(e.what(),
               Catch::StartsWith("CUDA out of memory on cuda:0: tried to allocate 1.00 PiB; "));
    CHECK_THAT(e.what(),
               Catch::Contains(cuda::format_bytes(after.allocated_bytes) + " allocated by octo, "));
    CHECK_THAT(e.what(), Catch::Contains(cuda::format_bytes(after.reserved_bytes) + " reserved"));
    CHECK(after.reserved_bytes < before.reserved_bytes);  // the cached 40 MiB went back
    CHECK(after.allocated_bytes == before.allocated_bytes);
  }
  // Still usable afterwards.
  octo::Tensor t = octo::full({1000}, 3.0, {.device = kGpu});
  CHECK(t.cpu().to_vector<float>() == std::vector<float>(1000, 3.0f));

  // Directly through the allocator too, with a size that does not fit any GPU.
  CHECK_THROWS_AS(gpu_allocator()->allocate(size_t(1) << 62), octo::OutOfMemoryError);
}

TEST_CASE("peak statistics") {
  gpu_allocator()->reset_peak_stats();
  const MemoryStats s0 = stats();
  CHECK(s0.peak_allocated_bytes == s0.allocated_bytes);
  octo::DataPtr a = gpu_allocator()->allocate(8 * kMiB);
  octo::DataPtr b = gpu_allocator()->allocate(4 * kMiB);
  const int64_t high = stats().allocated_bytes;
  CHECK(high == s0.allocated_bytes + int64_t(12 * kMiB));
  a.reset();
  CHECK(stats().peak_allocated_bytes == high);
  gpu_allocator()->reset_peak_stats();
  CHECK(stats().peak_allocated_bytes == s0.allocated_bytes + int64_t(4 * kMiB));
  // memory_stats(Device) is the device's allocator's view.
  CHECK(octo::memory_stats(kGpu).allocated_bytes == stats().allocated_bytes);
  CHECK(octo::memory_stats(kGpu).peak_allocated_bytes == stats().peak_allocated_bytes);
}

TEST_CASE("blocks are pooled per stream") {
  cuda::empty_cache();
  octo::DataPtr a = gpu_allocator()->allocate(5000);
  void* on_default = a.get();
  a.reset();
  cuda::Stream side = cuda::stream_from_pool(0);
  const int64_t mallocs = stats().system_allocations;
  {
    cuda::StreamGuard guard(side);
    octo::DataPtr b = gpu_allocator()->allocate(5000);
    CHECK(b.get() != on_default);  // the default stream's free block is not handed to `side`
    CHECK(stats().system_allocations == mallocs + 1);
    void* on_side = b.get();
    b.reset();
    octo::DataPtr c = gpu_allocator()->allocate(5000);
    CHECK(c.get() == on_side);
  }
  octo::DataPtr d = gpu_allocator()->allocate(5000);
  CHECK(d.get() == on_default);
  CHECK(stats().system_allocations == mallocs + 1);
}

TEST_CASE("record_stream delays reuse until the other stream's work is done") {
  cuda::empty_cache();
  cuda::Stream side = cuda::stream_from_pool(0);
  octo::Tensor busy = octo::empty({int64_t(1) << 26}, {.device = kGpu});  // 256 MiB

  octo::DataPtr a = gpu_allocator()->allocate(4096);
  void* ptr = a.get();
  cuda::record_stream(ptr, side);
  {
    cuda::StreamGuard guard(side);  // keep `side` busy for a while
    for (int i = 0; i < 20; ++i) busy.fill_(float(i));
  }
  a.reset();  // freed, but `side` may still be using it
  octo::DataPtr b = gpu_allocator()->allocate(4096);
  if (!side.query()) {
    CHECK(b.get() != ptr);
  } else {
    WARN("the side stream finished before the check; only the reuse after it is tested");
  }
  b.reset();
  side.synchronize();
  octo::DataPtr c = gpu_allocator()->allocate(4096);
  CHECK(c.get() == ptr);  // reusable once the recorded stream has caught up

  try {
    cuda::record_stream(static_cast<char*>(c.get()) + 512, side);
    FAIL("record_stream accepted a pointer that is not an allocation");
  } catch (const octo::ValueError& e) {
    CHECK_THAT(e.what(), Catch::Contains("not the start of a live allocation of cuda:0"));
  }
}

TEST_CASE("concurrent allocation from several threads keeps the books balanced") {
  const MemoryStats s0 = stats();
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([t] {
      octo::DeviceGuard guard(kGpu);
      std::mt19937 rng(t);
      std::uniform_int_distribution<size_t> size(1, 3 * kMiB);
      std::vector<octo::DataPtr> held;
      for (int i = 0; i < 500; ++i) {
        held.push_back(gpu_allocator()->allocate(size(rng)));
        if (held.size() > 6) held.erase(held.begin() + long(rng() % held.size()));
      }
    });
  }
  for (auto& th : threads) th.join();
  const MemoryStats s1 = stats();
  CHECK(s1.allocated_bytes == s0.allocated_bytes);
  CHECK(s1.allocations == s0.allocations);
  CHECK(s1.total_allocations == s0.total_allocations + 8 * 500);
  CHECK(s1.reserved_bytes >= s0.reserved_bytes);
}

TEST_CASE("a device that does not exist has no allocator") {
  const int n = octo::cuda::device_count();
  CHECK_THROWS_AS(octo::allocator_for(Device(DeviceType::CUDA, n)), octo::DeviceError);
  try {
    octo::Tensor t = octo::empty({3}, {.device = Device(DeviceType::CUDA, n)});
    FAIL("a tensor was made on a device that does not exist");
  } catch (const octo::DeviceError& e) {
    CHECK_THAT(e.what(), Catch::Contains("cuda:" + std::to_string(n)));
  }
}

TEST_CASE("byte counts print with binary units") {
  CHECK(cuda::format_bytes(0) == "0 B");
  CHECK(cuda::format_bytes(512) == "512 B");
  CHECK(cuda::format_bytes(1536) == "1.50 KiB");
  CHECK(cuda::format_bytes(int64_t(2) << 30) == "2.00 GiB");
  CHECK(cuda::format_bytes(int64_t(1) << 50) == "1.00 PiB");
}
