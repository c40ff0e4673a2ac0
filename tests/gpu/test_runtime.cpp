// GPU runtime: devices, DeviceGuard, current streams, the stream pool, StreamGuard, events, and
// the translation of CUDA errors.
#include "gpu/gpu_main.h"

#include <octo/octo.h>

#include <set>
#include <string>
#include <thread>

#include "kernels/backend.h"
#include "kernels/cuda/stream.h"

using octo::Device;
using octo::DeviceType;
namespace cuda = octo::cuda;

namespace {
Device gpu(int i) { return Device(DeviceType::CUDA, i); }

// Queues a few hundred microseconds of work on the current stream of cuda:0.
octo::Tensor busy_work(int64_t n = int64_t(1) << 26, int repeats = 8) {
  octo::Tensor t = octo::empty({n}, {.device = gpu(0)});
  for (int i = 0; i < repeats; ++i) t.fill_(float(i + 1));
  return t;
}
}  // namespace

TEST_CASE("cuda devices are visible and named") {
  REQUIRE(octo::cuda::device_count() >= 1);
  CHECK(octo::cuda::is_available());
  CHECK(octo::cuda_hooks().is_built());
  CHECK_FALSE(octo::cuda_hooks().device_name(0).empty());
  octo::DeviceGuard guard(Device("cuda:0"));
  CHECK(Device("cuda") == Device("cuda:0"));
  octo::synchronize(Device("cuda:0"));
}

TEST_CASE("DeviceGuard makes a device current and restores the previous one") {
  const int n = octo::cuda::device_count();
  const int last = n - 1;
  CHECK(octo::current_device_index(DeviceType::CUDA) == 0);
  {
    octo::DeviceGuard guard(gpu(last));
    CHECK(octo::current_device_index(DeviceType::CUDA) == last);
    CHECK(Device("cuda") == gpu(last));
    CHECK(cuda::current_stream().device_index() == last);
    octo::Tensor t = octo::zeros({4}, {.device = Device("cuda")});
    CHECK(t.device() == gpu(last));
    CHECK(t.cpu().to_vector<float>() == std::vector<float>(4, 0.0f));
  }
  CHECK(octo::current_device_index(DeviceType::CUDA) == 0);
  CHECK(Device("cuda") == gpu(0));

  try {
    octo::DeviceGuard bad(gpu(n));
    FAIL("DeviceGuard accepted a device that does not exist");
  } catch (const octo::DeviceError& e) {
    CHECK_THAT(e.what(), Catch::Contains("cuda:" + std::to_string(n)));
    CHECK_THAT(e.what(), Catch::Contains("CUDA device(s) are visible"));
  }
  CHECK(octo::current_device_index(DeviceType::CUDA) == 0);
}

TEST_CASE("the default current stream is the legacy default stream of each device") {
  for (int i = 0; i < octo::cuda::device_count(); ++i) {
    cuda::Stream s = cuda::current_stream(i);
    CHECK(s.is_default());
    CHECK(s.device() == gpu(i));
    CHECK(s == cuda::default_stream(i));
  }
  CHECK_THROWS_AS(cuda::current_stream(octo::cuda::device_count()), octo::DeviceError);
}

TEST_CASE("the stream pool hands out distinct non-default streams, round-robin") {
  std::set<cuda::StreamHandle> low, high;
  cuda::Stream first = cuda::stream_from_pool(0);
  low.insert(first.handle());
  for (int i = 1; i < cuda::kStreamPoolSize; ++i) low.insert(cuda::stream_from_pool(0).handle());
  CHECK(int(low.size()) == cuda::kStreamPoolSize);
  CHECK(low.count(nullptr) == 0);
  CHECK(cuda::stream_from_pool(0) == first);  // wrapped around
  for (int i = 0; i < cuda::kStreamPoolSize; ++i)
    high.insert(cuda::stream_from_pool(0, /*high_priority=*/true).handle());
  CHECK(int(high.size()) == cuda::kStreamPoolSize);
  for (auto h : high) CHECK(low.count(h) == 0);
  CHECK(first.device() == gpu(0));
  CHECK_FALSE(first.is_default());
}

TEST_CASE("StreamGuard and set_current_stream change the current stream and restore it") {
  cuda::Stream s1 = cuda::stream_from_pool(0);
  cuda::Stream s2 = cuda::stream_from_pool(0);
  REQUIRE(s1 != s2);
  CHECK(cuda::current_stream(0).is_default());
  {
    cuda::StreamGuard g1(s1);
    CHECK(cuda::current_stream(0) == s1);
    CHECK(cuda::current_stream() == s1);  // the guard made cuda:0 current, too
    {
      cuda::StreamGuard g2(s2);
      CHECK(cuda::current_stream(0) == s2);
    }
    CHECK(cuda::current_stream(0) == s1);
  }
  CHECK(cuda::current_stream(0).is_default());

  cuda::set_current_stream(s2);
  CHECK(cuda::current_stream(0) == s2);
  cuda::set_current_stream(cuda::default_stream(0));
  CHECK(cuda::current_stream(0).is_default());
  CHECK_THROWS_AS(cuda::set_current_stream(cuda::Stream(Device("cpu:0"), nullptr)),
                  octo::DeviceError);
}

TEST_CASE("current streams are per thread") {
  cuda::Stream s = cuda::stream_from_pool(0);
  cuda::StreamGuard guard(s);
  bool other_thread_default = false;
  std::thread worker([&] { other_thread_default = cuda::current_stream(0).is_default(); });
  worker.join();
  CHECK(other_thread_default);
  CHECK(cuda::current_stream(0) == s);
}

TEST_CASE("events order work between streams") {
  cuda::Stream producer = cuda::stream_from_pool(0);
  cuda::Stream consumer = cuda::stream_from_pool(0);
  REQUIRE(producer != consumer);
  const int64_t n = int64_t(1) << 24;
  octo::Tensor t;
  cuda::Event ready;
  {
    cuda::StreamGuard g(producer);
    t = busy_work(n, 16);  // the last fill writes 16
    ready.record();        // on the producer, the current stream
  }
  CHECK(ready.is_created());
  CHECK(ready.device_index() == 0);
  consumer.wait(ready);
  std::vector<float> v;
  {
    cuda::StreamGuard g(consumer);
    v = t.slice(0, n - 1000, n).cpu().to_vector<float>();  // queued on the consumer
  }
  CHECK(v == std::vector<float>(1000, 16.0f));
}

TEST_CASE("events: query, synchronize, elapsed_time") {
  cuda::Event never;
  CHECK_FALSE(never.is_created());
  CHECK(never.query());                 // nothing captured: complete
  never.synchronize();                  // no-op
  cuda::current_stream(0).wait(never);  // no-op
  CHECK(never.device_index() == -1);

  cuda::Event start(/*enable_timing=*/true), end(/*enable_timing=*/true);
  start.record();
  octo::Tensor t = busy_work();
  end.record();
  end.synchronize();
  CHECK(end.query());
  CHECK(start.query());
  float ms = start.elapsed_time(end);
  CHECK(ms >= 0.0f);
  CHECK(ms < 60000.0f);

  cuda::Stream s = cuda::current_stream(0);
  s.synchronize();
  CHECK(s.query());

  cuda::Event untimed;
  untimed.record();
  try {
    (void)untimed.elapsed_time(end);
    FAIL("elapsed_time accepted an event without timing");
  } catch (const octo::ValueError& e) {
    CHECK_THAT(e.what(), Catch::Contains("enable_timing"));
  }
  cuda::Event unrecorded(true);
  CHECK_THROWS_AS(start.elapsed_time(unrecorded), octo::ValueError);

  cuda::Event moved(std::move(start));
  CHECK(moved.is_created());
  CHECK_FALSE(start.is_created());  // NOLINT(bugprone-use-after-move): moved-from is empty
  CHECK(moved.timing_enabled());
  cuda::Event assigned;
  assigned = std::move(moved);
  CHECK(assigned.is_created());
  CHECK(assigned.query());
}

TEST_CASE("an event belongs to the device it was first recorded on") {
  if (octo::cuda::device_count() < 2) {
    // One GPU: the second device is refused before any event is involved.
    CHECK_THROWS_AS(cuda::default_stream(1), octo::DeviceError);
    return;
  }
  cuda::Event e;
  e.record(cuda::default_stream(0));
  try {
    e.record(cuda::default_stream(1));
    FAIL("an event recorded on cuda:0 was recorded on cuda:1");
  } catch (const octo::DeviceError& err) {
    CHECK_THAT(err.what(), Catch::Contains("belongs to cuda:0"));
  }
  cuda::default_stream(1).wait(e);  // waiting across devices is fine
  cuda::default_stream(1).synchronize();
}

TEST_CASE("CUDA errors name the call, the message and the error code") {
  const int bad = octo::cuda::device_count() + 100;
  try {
    octo::cuda_hooks().set_device(bad);
    FAIL("cudaSetDevice accepted a device that does not exist");
  } catch (const octo::DeviceError& e) {
    CHECK_THAT(e.what(), Catch::StartsWith("CUDA error in cudaSetDevice(index): "));
    CHECK_THAT(e.what(), Catch::Contains("(cudaErrorInvalidDevice)"));
  }
  // The error was cleared: the runtime keeps working.
  octo::Tensor t = octo::full({3}, 7, {.dtype = octo::kInt64, .device = gpu(0)});
  CHECK(t.cpu().to_vector<int64_t>() == std::vector<int64_t>(3, 7));
}

TEST_CASE("a dtype the CUDA backend does not support is named in the error") {
  // Every primitive has a CUDA kernel; what is missing is per dtype (cuBLAS has no integer GEMM).
  octo::Tensor a = octo::zeros({1, 2, 3}, {.dtype = octo::kInt64, .device = gpu(0)});
  octo::Tensor bt = octo::zeros({1, 3, 2}, {.dtype = octo::kInt64, .device = gpu(0)});
  octo::Tensor out = octo::empty({1, 2, 2}, {.dtype = octo::kInt64, .device = gpu(0)});
  auto& b = octo::kernels::cuda_backend();
  try {
    b.bmm(out.arg(), a.arg(), bt.arg());
    FAIL("bmm on int64 did not throw");
  } catch (const octo::NotImplementedError& e) {
    CHECK_THAT(e.what(), Catch::Contains("bmm is not implemented for dtype int64"));
  }
  // The unary and binary table entries run on the device.
  octo::Tensor x = octo::zeros({2, 3}, {.device = gpu(0)});
  octo::Tensor y = octo::empty({2, 3}, {.device = gpu(0)});
  b.unary(octo::kernels::UnaryOp::Exp, y.arg(), x.arg());
  CHECK(y.to(octo::kCPU).sum().item<float>() == 6.0f);
  CHECK(&octo::kernels::backend(gpu(0)) == &b);
}
