// CUDA fill and copy: cpu <-> cuda round trips for every dtype, strided views on either side,
// dtype conversion (on upload, download and on the GPU), strided and broadcast destinations,
// fills, grid-stride sizes, non-default streams, and GPU-to-GPU copies.
#include "gpu/gpu_main.h"

#include <octo/octo.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/cuda/stream.h"

using octo::Device;
using octo::DeviceType;
using octo::DType;
using octo::Shape;
using octo::Tensor;
namespace cuda = octo::cuda;

namespace {
const Device kGpu(DeviceType::CUDA, 0);
const std::vector<DType> kAllDTypes = {octo::kFloat32,  octo::kFloat64, octo::kInt64,
                                       octo::kInt32,    octo::kUInt8,   octo::kBool,
                                       octo::kBFloat16, octo::kFloat16};

/// Random integers in [0, 100) on the CPU: exact in every dtype (bool keeps "nonzero").
Tensor random_cpu(const Shape& shape, DType dtype, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<double> v(size_t(octo::detail::shape_numel(shape)));
  for (double& x : v) x = double(rng() % 100);
  return octo::tensor(v, shape, {.dtype = dtype});
}

/// A CPU tensor's elements in row-major order, as doubles.
std::vector<double> values(const Tensor& t) {
  REQUIRE(t.device().is_cpu());
  return t.to(octo::kFloat64).to_vector<double>();
}

/// What converting v to dtype gives, written out: integers truncate, bool is v != 0, the 16-bit
/// floats hold these test values exactly.
double converted(double v, DType dtype) {
  switch (dtype) {
    case octo::kBool:
      return v != 0.0 ? 1.0 : 0.0;
    case octo::kInt64:
      return double(int64_t(v));
    case octo::kInt32:
      return double(int32_t(v));
    case octo::kUInt8:
      return double(uint8_t(int(v)));
    case octo::kFloat32:
      return double(float(v));
    default:
      return v;
  }
}
}  // namespace

TEST_CASE("cpu -> cuda -> cpu keeps every value of every dtype") {
  const std::vector<Shape> shapes = {{}, {0}, {1}, {7}, {3, 5, 17}, {2, 0, 3}, {1000003}};
  uint32_t seed = 1;
  for (DType dtype : kAllDTypes) {
    for (const Shape& shape : shapes) {
      CAPTURE(std::string(octo::dtype_name(dtype)), shape);
      Tensor src = random_cpu(shape, dtype, seed++);
      Tensor g = src.to(kGpu);
      CHECK(g.device() == kGpu);
      CHECK(g.dtype() == dtype);
      CHECK(g.sizes() == shape);
      Tensor back = g.to(Device("cpu"));
      CHECK(back.device().is_cpu());
      CHECK(values(back) == values(src));
      // And again through a GPU-side clone (device-to-device memcpy).
      CHECK(values(g.clone().cpu()) == values(src));
    }
  }
}

TEST_CASE("strided CPU tensors upload correctly") {
  Tensor base = random_cpu({6, 9}, octo::kFloat32, 11);
  const std::vector<double> b = values(base);
  SECTION("transpose") {
    Tensor g = base.t().to(kGpu);
    CHECK(g.is_contiguous());
    std::vector<double> expected;
    for (int i = 0; i < 9; ++i)
      for (int j = 0; j < 6; ++j) expected.push_back(b[size_t(j * 9 + i)]);
    CHECK(values(g.cpu()) == expected);
  }
  SECTION("slice with a step, and a dtype change") {
    Tensor g = base.slice(1, 1, 9, 3).to(kGpu, octo::kFloat64);  // columns 1, 4, 7
    CHECK(g.dtype() == octo::kFloat64);
    std::vector<double> expected;
    for (int i = 0; i < 6; ++i)
      for (int j = 1; j < 9; j += 3) expected.push_back(b[size_t(i * 9 + j)]);
    CHECK(values(g.cpu()) == expected);
  }
  SECTION("broadcast (stride 0) source") {
    Tensor row = random_cpu({5}, octo::kInt64, 12);
    Tensor g = row.expand({4, 5}).to(kGpu);
    std::vector<double> r = values(row), expected;
    for (int i = 0; i < 4; ++i) expected.insert(expected.end(), r.begin(), r.end());
    CHECK(values(g.cpu()) == expected);
  }
}

TEST_CASE("strided CUDA tensors download correctly") {
  Tensor base = random_cpu({4, 5, 6}, octo::kFloat64, 21);
  const std::vector<double> b = values(base);
  Tensor g = base.to(kGpu);
  auto at = [&](int i, int j, int k) { return b[size_t((i * 5 + j) * 6 + k)]; };
  SECTION("permute") {
    Tensor p = g.permute({2, 0, 1});  // [6, 4, 5]
    CHECK_FALSE(p.is_contiguous());
    std::vector<double> expected;
    for (int k = 0; k < 6; ++k)
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 5; ++j) expected.push_back(at(i, j, k));
    CHECK(values(p.cpu()) == expected);
    CHECK(values(p.contiguous().cpu()) == expected);  // the GPU's own strided copy
    CHECK(values(p.cpu().to(octo::kInt32)) == expected);
  }
  SECTION("select and a stepped slice, downloaded into another dtype") {
    Tensor s = g.select(1, 2).slice(1, 0, 6, 2);  // [4, 3]
    std::vector<double> expected;
    for (int i = 0; i < 4; ++i)
      for (int k = 0; k < 6; k += 2) expected.push_back(at(i, 2, k));
    CHECK(values(s.to(octo::kCPU, octo::kFloat32)) == expected);
    CHECK(values(s.to(octo::kCPU, octo::kInt64)) == expected);
  }
  SECTION("broadcast view") {
    Tensor e = g.select(0, 1).select(0, 3).expand({3, 6});  // row (1, 3, :) three times
    std::vector<double> expected;
    for (int r = 0; r < 3; ++r)
      for (int k = 0; k < 6; ++k) expected.push_back(at(1, 3, k));
    CHECK(values(e.cpu()) == expected);
  }
}

TEST_CASE("dtype conversions on upload, download and on the GPU") {
  const std::vector<double> raw = {-2.75, -0.5, 0.0, 0.25, 1.5, 3.0, 100.0, 7.0};
  Tensor src64 = octo::tensor(raw, {8}, {.dtype = octo::kFloat64});
  SECTION("float64 to every dtype") {
    for (DType to : kAllDTypes) {
      if (to == octo::kUInt8) continue;  // negative values are out of uint8's range
      CAPTURE(std::string(octo::dtype_name(to)));
      std::vector<double> expected;
      for (double v : raw) expected.push_back(converted(v, to));
      CHECK(values(src64.to(kGpu, to).cpu()) == expected);           // converted while uploading
      CHECK(values(src64.to(kGpu).to(to).cpu()) == expected);        // converted on the GPU
      CHECK(values(src64.to(kGpu).to(octo::kCPU, to)) == expected);  // converted while downloading
    }
  }
  SECTION("every pair of dtypes, contiguous and strided") {
    uint32_t seed = 100;
    for (DType from : kAllDTypes) {
      for (DType to : kAllDTypes) {
        CAPTURE(std::string(octo::dtype_name(from)), std::string(octo::dtype_name(to)));
        Tensor src = random_cpu({5, 7}, from, seed++);
        std::vector<double> v = values(src), expected, expected_t;
        for (double x : v) expected.push_back(converted(x, to));
        for (int j = 0; j < 7; ++j)
          for (int i = 0; i < 5; ++i) expected_t.push_back(converted(v[size_t(i * 7 + j)], to));
        Tensor g = src.to(kGpu);
        CHECK(values(g.to(to).cpu()) == expected);
        CHECK(values(g.t().to(to).cpu()) == expected_t);
        CHECK(values(src.t().to(kGpu, to).cpu()) == expected_t);
        CHECK(values(g.t().to(octo::kCPU, to)) == expected_t);
      }
    }
  }
}

TEST_CASE("copy_ into strided and broadcast CUDA destinations") {
  Tensor dst = octo::zeros({8, 10}, {.device = kGpu});
  Tensor src = random_cpu({8, 5}, octo::kFloat64, 31);
  const std::vector<double> s = values(src);
  auto check_odd_columns = [&] {
    std::vector<double> got = values(dst.cpu());
    for (int i = 0; i < 8; ++i) {
      for (int j = 0; j < 10; ++j) {
        double expected = j % 2 == 1 ? double(float(s[size_t(i * 5 + j / 2)])) : 0.0;
        CHECK(got[size_t(i * 10 + j)] == expected);
      }
    }
  };
  SECTION("from the host") {
    dst.slice(1, 1, 10, 2).copy_(src);  // odd columns, float64 -> float32
    check_odd_columns();
  }
  SECTION("from the same GPU") {
    dst.slice(1, 1, 10, 2).copy_(src.to(kGpu));  // strided destination, converted on the GPU
    check_odd_columns();
  }
  SECTION("broadcast from the host and from the GPU") {
    Tensor row = random_cpu({10}, octo::kInt32, 32);
    std::vector<double> r = values(row);
    for (const Tensor& from : {row, row.to(kGpu)}) {
      dst.zero_();
      dst.copy_(from);  // every row of dst becomes `row`
      std::vector<double> all = values(dst.cpu());
      for (int i = 0; i < 8; ++i)
        for (int j = 0; j < 10; ++j) CHECK(all[size_t(i * 10 + j)] == r[size_t(j)]);
    }
  }
}

TEST_CASE("fill on CUDA tensors") {
  CHECK(values(octo::full({3, 1000}, 2.5, {.device = kGpu}).cpu()) ==
        std::vector<double>(3000, 2.5));
  CHECK(values(octo::zeros({17}, {.dtype = octo::kInt64, .device = kGpu}).cpu()) ==
        std::vector<double>(17, 0.0));
  const int64_t big = (int64_t(1) << 53) + 1;  // not representable as a double
  CHECK(octo::full({5}, big, {.dtype = octo::kInt64, .device = kGpu}).cpu().to_vector<int64_t>() ==
        std::vector<int64_t>(5, big));
  CHECK(values(octo::full({4}, 0.5, {.dtype = octo::kFloat16, .device = kGpu}).cpu()) ==
        std::vector<double>(4, 0.5));
  CHECK(values(octo::full({4}, -3.0, {.dtype = octo::kBFloat16, .device = kGpu}).cpu()) ==
        std::vector<double>(4, -3.0));
  CHECK(octo::ones({6}, {.dtype = octo::kBool, .device = kGpu}).cpu().to_vector<bool>() ==
        std::vector<bool>(6, true));
  CHECK(octo::full({1}, 200, {.dtype = octo::kUInt8, .device = kGpu}).cpu().item<uint8_t>() == 200);

  // Strided fills touch only the view's elements (zero included: no memset of the whole range).
  for (double value : {0.0, 9.0}) {
    Tensor t = octo::full({7, 9}, 1.0, {.dtype = octo::kFloat64, .device = kGpu});
    t.slice(1, 0, 9, 3).fill_(value);
    std::vector<double> v = values(t.cpu());
    for (int i = 0; i < 7; ++i)
      for (int j = 0; j < 9; ++j) CHECK(v[size_t(i * 9 + j)] == (j % 3 == 0 ? value : 1.0));
  }
  Tensor empty = octo::empty({0, 3}, {.device = kGpu});
  empty.fill_(1.0);  // nothing to do
  CHECK(empty.numel() == 0);
}

TEST_CASE("sizes beyond one grid use the grid-stride loops") {
  const int64_t n = 20'000'003;  // more elements than 65536 blocks x 256 threads
  Tensor ones = octo::ones({n}, {.device = kGpu});
  Tensor halves = octo::full({n}, 0.5, {.device = kGpu});
  std::vector<double> v = values(ones.to(octo::kFloat64).cpu());  // conversion kernel
  REQUIRE(int64_t(v.size()) == n);
  double sum = 0;
  for (double x : v) sum += x;
  CHECK(sum == double(n));
  Tensor every_other = halves.slice(0, 0, n, 2).contiguous();  // strided copy kernel
  std::vector<float> h = every_other.cpu().to_vector<float>();
  CHECK(int64_t(h.size()) == (n + 1) / 2);
  CHECK(h == std::vector<float>(h.size(), 0.5f));
}

TEST_CASE("fills and copies run on the current stream") {
  cuda::Stream side = cuda::stream_from_pool(0);
  Tensor src = random_cpu({33, 65}, octo::kFloat32, 41);
  std::vector<double> v = values(src), expected_t;
  for (int j = 0; j < 65; ++j)
    for (int i = 0; i < 33; ++i) expected_t.push_back(v[size_t(i * 65 + j)]);
  {
    cuda::StreamGuard guard(side);
    Tensor g = src.to(kGpu);
    Tensor t = g.t().contiguous();
    Tensor f = octo::full({100}, 4.0, {.device = kGpu});
    CHECK(values(t.cpu()) == expected_t);
    CHECK(values(f.cpu()) == std::vector<double>(100, 4.0));
  }
  CHECK(cuda::current_stream(0).is_default());
}

TEST_CASE("copies between GPUs") {
  const int n = octo::cuda::device_count();
  Tensor src = random_cpu({6, 7}, octo::kFloat32, 51);
  const std::vector<double> v = values(src);
  if (n < 2) {
    // One GPU: cuda:1 is refused with a message naming it.
    try {
      (void)src.to(Device("cuda:1"));
      FAIL("a copy to cuda:1 succeeded with one GPU");
    } catch (const octo::DeviceError& e) {
      CHECK_THAT(e.what(), Catch::Contains("cuda:1"));
    }
    return;
  }
  const Device g0("cuda:0"), g1("cuda:1");
  Tensor a = src.to(g0);
  std::vector<double> expected_t;
  for (int j = 0; j < 7; ++j)
    for (int i = 0; i < 6; ++i) expected_t.push_back(v[size_t(i * 7 + j)]);
  CHECK(values(a.to(g1).cpu()) == v);                  // contiguous: peer memcpy
  CHECK(values(a.t().to(g1).cpu()) == expected_t);     // packed on cuda:0 first
  CHECK(values(a.to(g1, octo::kFloat64).cpu()) == v);  // converted on cuda:0
  Tensor dst = octo::zeros({7, 12}, {.dtype = octo::kInt64, .device = g1});
  dst.slice(1, 0, 12, 2).copy_(a.t());  // strided destination
  std::vector<double> got = values(dst.cpu());
  for (int i = 0; i < 7; ++i)
    for (int j = 0; j < 12; ++j)
      CHECK(got[size_t(i * 12 + j)] == (j % 2 == 0 ? expected_t[size_t(i * 6 + j / 2)] : 0.0));
  CHECK(values(a.to(g1).to(g0).cpu()) == v);
}

TEST_CASE("tensors on the CPU and a GPU are different devices") {
  Tensor c = octo::zeros({2});
  Tensor g = octo::zeros({2}, {.device = kGpu});
  try {
    octo::detail::check_same_device({&c, &g});
    FAIL("cpu and cuda tensors passed check_same_device");
  } catch (const octo::DeviceError& e) {
    CHECK_THAT(e.what(), Catch::Contains("found at least two devices, cpu:0 and cuda:0"));
  }
  CHECK(g[1].item<float>() == 0.0f);
  CHECK(g.to_vector<int32_t>() == std::vector<int32_t>{0, 0});
}
