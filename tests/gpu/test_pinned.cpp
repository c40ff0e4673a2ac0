// Pinned host memory on a GPU: pin_memory and is_pinned, non-blocking uploads and downloads
// against the blocking path, the pinned allocator's reuse (and its refusal to reuse a block a copy
// may still be using), empty_host_cache, and DataLoader's pin_memory option.
#include "gpu/gpu_main.h"

#include <octo/octo.h>

#include <random>
#include <vector>

#include "kernels/cuda/host_allocator.h"
#include "kernels/cuda/stream.h"

using octo::Device;
using octo::DeviceType;
using octo::MemoryStats;
using octo::Shape;
using octo::Tensor;
namespace cuda = octo::cuda;

namespace {
const Device kGpu(DeviceType::CUDA, 0);

/// Random integers in [0, 1000) as a float32 CPU tensor (exact in every dtype used here).
Tensor random_cpu(const Shape& shape, uint32_t seed, octo::DType dtype = octo::kFloat32) {
  std::mt19937 rng(seed);
  std::vector<double> v(size_t(octo::detail::shape_numel(shape)));
  for (double& x : v) x = double(rng() % 1000);
  return octo::tensor(v, shape, {.dtype = dtype});
}

/// A CPU tensor's elements in row-major order, as doubles.
std::vector<double> values(const Tensor& t) {
  REQUIRE(t.device().is_cpu());
  return t.to(octo::kFloat64).to_vector<double>();
}

MemoryStats host_stats() { return cuda::host_allocator()->stats(); }
}  // namespace

TEST_CASE("pin_memory copies into pinned memory, and views of it are pinned") {
  Tensor t = random_cpu({37, 53}, 1);
  CHECK_FALSE(t.is_pinned());
  CHECK_FALSE(cuda::is_pinned(t.raw_data()));

  const MemoryStats s0 = host_stats();
  Tensor p = t.t().pin_memory();  // a strided source: the pinned copy is contiguous
  CHECK(p.is_pinned());
  CHECK(p.is_contiguous());
  CHECK(p.device() == octo::kCPU);
  CHECK(p.dtype() == octo::kFloat32);
  CHECK(p.sizes() == Shape{53, 37});
  CHECK_FALSE(p.is_alias_of(t));
  CHECK(values(p) == values(t.t()));
  const MemoryStats s1 = host_stats();
  CHECK(s1.allocated_bytes == s0.allocated_bytes + 8192);  // 53 * 37 * 4 B rounded up to 2^13
  CHECK(s1.allocations == s0.allocations + 1);

  // Already pinned: the same tensor.
  CHECK(p.pin_memory().impl_ptr() == p.impl_ptr());
  // Views, and any byte inside the block, are pinned.
  CHECK(p.narrow(0, 3, 10).is_pinned());
  CHECK(p.select(1, 36).is_pinned());
  Tensor view = p.narrow(0, 3, 10);
  CHECK(view.pin_memory().impl_ptr() == view.impl_ptr());
  CHECK(cuda::is_pinned(p.select(0, 52).raw_data()));
  CHECK(cuda::is_pinned(static_cast<char*>(p.raw_data()) + p.nbytes() - 1));
  CHECK(octo::cuda_hooks().is_pinned(p.raw_data()));
  // Pinned tensors are ordinary CPU tensors otherwise.
  CHECK(values(p * 2.0) == values(t.t() * 2.0));

  // Other dtypes and CPU devices keep theirs.
  Tensor q = random_cpu({5, 6}, 2, octo::kInt64).to(Device("cpu:1")).pin_memory();
  CHECK(q.is_pinned());
  CHECK(q.device() == Device("cpu:1"));
  CHECK(q.dtype() == octo::kInt64);
  CHECK(values(q) == values(random_cpu({5, 6}, 2, octo::kInt64)));

  // GPU tensors cannot be pinned and are not pinned.
  Tensor g = t.to(kGpu);
  CHECK_FALSE(g.is_pinned());
  CHECK_THROWS_AS(g.pin_memory(), octo::ValueError);
  CHECK_THROWS_WITH(g.pin_memory(),
                    Catch::Contains("only CPU tensors can be pinned") && Catch::Contains("cuda:0"));

  // Nothing to pin in an empty tensor: no memory, not pinned.
  Tensor e = octo::empty({0, 4}).pin_memory();
  CHECK(e.sizes() == Shape{0, 4});
  CHECK_FALSE(e.is_pinned());
}

TEST_CASE("a non-blocking upload from pinned memory equals the blocking one") {
  Tensor x = random_cpu({257, 129}, 3);
  Tensor p = x.pin_memory();
  // [257, 129] -> [129]: elementwise, a reduction and a broadcast row, all on the GPU.
  auto compute = [](const Tensor& g) { return values(((g * 2.0 + 1.0).sum({0}) * g[5]).cpu()); };

  Tensor g_async = p.to(kGpu, /*non_blocking=*/true);
  Tensor g_sync = x.to(kGpu);
  CHECK(g_async.device() == kGpu);
  CHECK(compute(g_async) == compute(g_sync));
  CHECK(values(g_async.cpu()) == values(x));

  SECTION("into a strided destination (upload, then the GPU's strided copy)") {
    Tensor dst = octo::zeros({129, 257}, {.device = kGpu}).t();
    dst.copy_(p, /*non_blocking=*/true);
    CHECK(values(dst.cpu()) == values(x));
  }
  SECTION("with a dtype conversion or a strided pinned source (these synchronise)") {
    Tensor d = p.to(kGpu, octo::kFloat64, /*non_blocking=*/true);
    CHECK(d.dtype() == octo::kFloat64);
    CHECK(values(d.cpu()) == values(x));
    CHECK(values(p.t().to(kGpu, true).cpu()) == values(x.t()));
  }
  SECTION("on a non-default stream") {
    cuda::Stream side = cuda::stream_from_pool(0);
    std::vector<double> got;
    {
      cuda::StreamGuard guard(side);
      Tensor g = p.to(kGpu, true);
      got = compute(g);  // queued on `side` after the upload; the download synchronises
    }
    CHECK(got == compute(g_sync));
  }
  SECTION("from pageable memory non_blocking is ignored") {
    Tensor g = x.to(kGpu, true);
    CHECK(values(g.cpu()) == values(x));
  }
}

TEST_CASE("a non-blocking download into pinned memory is complete after synchronize") {
  Tensor x = random_cpu({300, 70}, 4);
  Tensor g = x.to(kGpu);

  Tensor h = g.to(octo::kCPU, /*non_blocking=*/true);  // allocated pinned, as in PyTorch
  CHECK(h.is_pinned());
  CHECK(h.device() == octo::kCPU);
  octo::synchronize(kGpu);
  CHECK(values(h) == values(x));

  Tensor into = octo::empty({300, 70}).pin_memory();
  into.copy_(g * 3.0, /*non_blocking=*/true);
  octo::synchronize(kGpu);
  CHECK(values(into) == values(x * 3.0));

  // A strided source is packed on the GPU first; the download is still non-blocking.
  Tensor ht = g.t().to(octo::kCPU, true);
  CHECK(ht.is_pinned());
  cuda::current_stream(0).synchronize();
  CHECK(values(ht) == values(x.t()));

  // Into pageable memory, or with a conversion, the copy is complete on return.
  Tensor pageable = octo::empty({300, 70});
  pageable.copy_(g, true);
  CHECK(values(pageable) == values(x));
  Tensor converted = g.to(octo::kCPU, octo::kFloat64, true);
  CHECK(converted.dtype() == octo::kFloat64);
  CHECK(values(converted) == values(x));

  // A round trip made only of non-blocking copies, synchronised once.
  Tensor back = (x.pin_memory().to(kGpu, true) * 2.0).to(octo::kCPU, true);
  octo::synchronize(kGpu);
  CHECK(values(back) == values(x * 2.0));

  Tensor empty = octo::empty({0, 3}, {.device = kGpu}).to(octo::kCPU, true);
  CHECK(empty.sizes() == Shape{0, 3});
}

TEST_CASE("the pinned allocator reuses freed blocks, but not while a copy may use them") {
  cuda::empty_host_cache();
  octo::Allocator* alloc = cuda::host_allocator();
  CHECK(alloc == octo::cuda_hooks().pinned_allocator());
  const MemoryStats s0 = alloc->stats();

  octo::DataPtr a = alloc->allocate(3000);
  REQUIRE(a.get() != nullptr);
  void* first = a.get();
  CHECK(cuda::is_pinned(static_cast<char*>(first) + 4095));
  const MemoryStats s1 = alloc->stats();
  CHECK(s1.system_allocations == s0.system_allocations + 1);
  CHECK(s1.allocated_bytes == s0.allocated_bytes + 4096);  // a power of two
  CHECK(s1.reserved_bytes == s0.reserved_bytes + 4096);
  CHECK(s1.allocations == s0.allocations + 1);
  CHECK(s1.total_allocations == s0.total_allocations + 1);

  a.reset();  // no stream used it: reusable at once
  const MemoryStats s2 = alloc->stats();
  CHECK(s2.allocated_bytes == s0.allocated_bytes);
  CHECK(s2.reserved_bytes == s1.reserved_bytes);  // cached, not returned
  CHECK(cuda::is_pinned(first));                  // still pinned memory, held by the cache
  octo::DataPtr b = alloc->allocate(4000);        // the same 4 KiB bucket
  CHECK(b.get() == first);
  CHECK(alloc->stats().system_allocations == s1.system_allocations);  // a cache hit
  CHECK(alloc->stats().total_allocations == s1.total_allocations + 1);
  octo::DataPtr c = alloc->allocate(5000);  // the 8 KiB bucket: a new block
  CHECK(alloc->stats().system_allocations == s1.system_allocations + 1);
  CHECK(alloc->allocate(0).get() == nullptr);
  b.reset();
  c.reset();

  // A block an in-flight upload reads from is not handed out again until the upload is done.
  cuda::empty_host_cache();
  const int64_t n = int64_t(1) << 22;  // 16 MiB of float32
  Tensor src = random_cpu({n}, 5).pin_memory();
  const std::vector<double> expected = values(src);
  void* src_block = src.raw_data();
  Tensor busy = octo::empty({int64_t(1) << 27}, {.device = kGpu});  // 512 MiB
  Tensor dst = octo::empty({n}, {.device = kGpu});
  for (int i = 0; i < 100; ++i) busy.fill_(float(i));  // keeps the stream busy for a while
  dst.copy_(src, /*non_blocking=*/true);               // queued behind the fills
  cuda::Event copied;
  copied.record();
  const MemoryStats before = alloc->stats();
  src = Tensor();  // freed while the copy may still read it
  CHECK(alloc->stats().allocated_bytes == before.allocated_bytes - (int64_t(1) << 24));
  octo::DataPtr again = alloc->allocate(size_t(n) * 4);
  if (!copied.query()) {  // the copy was certainly still queued when `again` was allocated
    CHECK(again.get() != src_block);
    CHECK(alloc->stats().system_allocations == before.system_allocations + 1);
  } else {
    WARN("the upload finished before the check; only reuse after it is tested");
  }
  octo::synchronize(kGpu);
  CHECK(values(dst.cpu()) == expected);  // nothing overwrote the source while it was read
  const int64_t mallocs = alloc->stats().system_allocations;
  again.reset();
  octo::DataPtr third = alloc->allocate(size_t(n) * 4);  // both 16 MiB blocks are free now
  CHECK(third.get() == src_block);                       // the most recently released one
  CHECK(alloc->stats().system_allocations == mallocs);
  third.reset();

  // Same for a download: its destination block waits for it too.
  for (int i = 0; i < 100; ++i) busy.fill_(float(i));
  Tensor h = busy.narrow(0, 0, n).to(octo::kCPU, /*non_blocking=*/true);
  REQUIRE(h.is_pinned());
  void* h_block = h.raw_data();
  cuda::Event downloaded;
  downloaded.record();
  h = Tensor();
  octo::DataPtr fourth = alloc->allocate(size_t(n) * 4);
  if (!downloaded.query()) {
    CHECK(fourth.get() != h_block);
  } else {
    WARN("the download finished before the check; only reuse after it is tested");
  }
  octo::synchronize(kGpu);
  fourth.reset();
  octo::DataPtr fifth = alloc->allocate(size_t(n) * 4);
  CHECK(fifth.get() == h_block);
  fifth.reset();

  // empty_host_cache gives every unused block back.
  alloc->reset_peak_stats();
  CHECK(alloc->stats().peak_allocated_bytes == alloc->stats().allocated_bytes);
  cuda::empty_host_cache();
  const MemoryStats s3 = alloc->stats();
  CHECK(s3.reserved_bytes == s3.allocated_bytes);
  CHECK(s3.reserved_bytes < before.reserved_bytes);
}

TEST_CASE("DataLoader's pin_memory hands out pinned batches that upload without blocking") {
  using octo::data::DataLoader;
  auto ds =
      std::make_shared<octo::data::TensorDataset>(random_cpu({50, 3, 4}, 6), octo::arange(50));
  for (size_t workers : {size_t(0), size_t(2)}) {
    CAPTURE(workers);
    DataLoader plain(ds, {.batch_size = 8, .shuffle = true, .num_workers = workers, .seed = 9});
    DataLoader pinned(
        ds,
        {.batch_size = 8, .shuffle = true, .num_workers = workers, .pin_memory = true, .seed = 9});
    std::vector<std::vector<double>> a, b;
    for (const auto& batch : plain) {
      CHECK_FALSE(batch.data.is_pinned());
      a.push_back(values(batch.data.to(kGpu).sum({1, 2}).cpu()));
    }
    for (const auto& batch : pinned) {
      CHECK(batch.data.is_pinned());
      CHECK(batch.target.is_pinned());
      Tensor x = batch.data.to(kGpu, /*non_blocking=*/true);
      Tensor y = batch.target.to(kGpu, /*non_blocking=*/true);
      CHECK(y.device() == kGpu);
      b.push_back(values(x.sum({1, 2}).cpu()));
    }
    CHECK(a.size() == 7);
    CHECK(a == b);
  }
}
