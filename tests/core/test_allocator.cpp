// The CPU allocator (Note [CPU caching allocator]): alignment, statistics, reuse of freed large
// blocks by size class, empty_cache, and out-of-memory after the cache is released.
#include <catch2/catch.hpp>

#include <cstdint>

#include <octo/octo.h>

using octo::kCPU;

TEST_CASE("cpu allocations are 64-byte aligned and counted") {
  octo::Allocator* a = octo::cpu_allocator();
  const octo::MemoryStats before = a->stats();
  {
    octo::DataPtr small = a->allocate(100), large = a->allocate(size_t(3) << 20);
    CHECK(reinterpret_cast<uintptr_t>(small.get()) % octo::kCpuAlignment == 0);
    CHECK(reinterpret_cast<uintptr_t>(large.get()) % octo::kCpuAlignment == 0);
    const octo::MemoryStats during = a->stats();
    CHECK(during.allocations == before.allocations + 2);
    CHECK(during.allocated_bytes >= before.allocated_bytes + (int64_t(3) << 20) + 100);
    CHECK(during.reserved_bytes >= during.allocated_bytes);
    CHECK(during.peak_allocated_bytes >= during.allocated_bytes);
  }
  CHECK(a->stats().allocations == before.allocations);
  CHECK(a->stats().allocated_bytes == before.allocated_bytes);
  CHECK(a->allocate(0).get() == nullptr);
}

TEST_CASE("a freed large cpu block is reused by the next request of its size class") {
  octo::Allocator* a = octo::cpu_allocator();
  octo::empty_cache(kCPU);
  const size_t bytes = size_t(1) << 20;  // 1 MiB: cached (at least 128 KiB)
  void* first = nullptr;
  {
    octo::DataPtr p = a->allocate(bytes);
    first = p.get();
  }
  const octo::MemoryStats cached = a->stats();
  CHECK(cached.reserved_bytes >= cached.allocated_bytes + int64_t(bytes));  // held, not in use
  {
    // A slightly smaller request rounds to the same class: the same block, no system call.
    octo::DataPtr again = a->allocate(bytes - 1000);
    CHECK(again.get() == first);
    CHECK(a->stats().system_allocations == cached.system_allocations);
  }
  // Tensors go through it too: a training loop's repeated buffers stop costing page faults.
  for (int i = 0; i < 3; ++i) octo::Tensor t = octo::empty({512, 512});
  const int64_t system = a->stats().system_allocations;
  for (int i = 0; i < 10; ++i) octo::Tensor t = octo::empty({512, 512});
  CHECK(a->stats().system_allocations == system);
  octo::empty_cache(kCPU);
  const octo::MemoryStats emptied = a->stats();
  CHECK(emptied.reserved_bytes == emptied.allocated_bytes);
}

TEST_CASE("cpu out of memory is an OutOfMemoryError naming the request, cache released") {
  octo::Allocator* a = octo::cpu_allocator();
  { octo::DataPtr p = a->allocate(size_t(4) << 20); }  // leave something in the cache
  CHECK_THROWS_AS(a->allocate(size_t(1) << 50), octo::OutOfMemoryError);
  CHECK_THROWS_WITH(a->allocate(size_t(1) << 50),
                    Catch::Contains("tried to allocate 1125899906842624 bytes"));
  const octo::MemoryStats after = a->stats();
  CHECK(after.reserved_bytes == after.allocated_bytes);  // the retry emptied the cache first
}
