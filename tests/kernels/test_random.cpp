// Tests for the random kernels (uniform, normal, bernoulli, randint) through the ops.
#include <catch2/catch.hpp>

#include <octo/octo.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/backend.h"

using octo::DType;
using octo::Tensor;

namespace {

std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

}  // namespace

TEST_CASE("uniform, normal, bernoulli and randint have the right statistics") {
  octo::manual_seed(123);
  const int64_t n = 200000;
  for (DType dt : {octo::kFloat32, octo::kFloat64}) {
    auto u = values(octo::rand({n}, {.dtype = dt}));
    double mean = 0, sq = 0;
    for (double x : u) {
      REQUIRE((x >= 0.0 && x < 1.0));
      mean += x;
      sq += x * x;
    }
    mean /= n;
    CHECK(std::fabs(mean - 0.5) < 0.005);
    CHECK(std::fabs(sq / n - mean * mean - 1.0 / 12) < 0.003);

    auto z = values(octo::randn({n}, {.dtype = dt}));
    mean = sq = 0;
    int64_t beyond2 = 0;
    for (double x : z) {
      REQUIRE(std::isfinite(x));
      mean += x;
      sq += x * x;
      beyond2 += std::fabs(x) > 2;
    }
    mean /= n;
    CHECK(std::fabs(mean) < 0.01);
    CHECK(std::fabs(sq / n - mean * mean - 1.0) < 0.015);
    CHECK(std::fabs(double(beyond2) / n - 0.0455) < 0.003);  // two-sided tail of N(0, 1)
  }
  auto& backend = octo::kernels::cpu_backend();
  Tensor u2 = octo::empty({n});
  backend.uniform(u2.arg(), -3.0, 5.0, octo::default_generator().reserve(n));
  for (double x : values(u2)) REQUIRE((x >= -3.0 && x < 5.0));
  Tensor z2 = octo::empty({n}, {.dtype = octo::kFloat64});
  backend.normal(z2.arg(), 10.0, 0.5, octo::default_generator().reserve(n));
  double m = 0;
  for (double x : values(z2)) m += x;
  CHECK(std::fabs(m / n - 10.0) < 0.01);

  for (DType dt : {octo::kFloat32, octo::kUInt8, octo::kBool}) {
    Tensor mask = octo::empty({n}, {.dtype = dt});
    backend.bernoulli(mask.arg(), 0.3, octo::default_generator().reserve(n));
    double ones = 0;
    for (double x : values(mask)) {
      REQUIRE((x == 0.0 || x == 1.0));
      ones += x;
    }
    CHECK(std::fabs(ones / n - 0.3) < 0.005);
  }

  auto r = octo::randint(-2, 3, {n}).to_vector<int64_t>();
  std::vector<int64_t> counts(5, 0);
  for (int64_t x : r) {
    REQUIRE((x >= -2 && x < 3));
    ++counts[x + 2];
  }
  for (int64_t c : counts) CHECK(std::fabs(double(c) / n - 0.2) < 0.01);
  auto r32 = octo::randint(0, 7, {1000}, {.dtype = octo::kInt32}).to_vector<int32_t>();
  for (int32_t x : r32) REQUIRE((x >= 0 && x < 7));
  // A range wider than 2^63 (found by fuzz_ops: the int64 sum overflowed, which UBSan reports).
  const int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  auto wide = octo::randint(lo, hi, {4096}).to_vector<int64_t>();
  int64_t negative = 0;
  for (int64_t x : wide) {
    REQUIRE(x < hi);
    negative += x < 0;
  }
  CHECK(negative > 1800);  // about half of the range is negative
  CHECK(negative < 2300);
}

TEST_CASE("random kernels are counter based: independent of threads, offsets and strides") {
  const int64_t n = 100003;  // several parallel chunks
  auto draw = [&](int threads) {
    octo::set_num_threads(threads);
    octo::manual_seed(7);
    std::vector<std::vector<double>> out;
    out.push_back(values(octo::rand({n})));
    out.push_back(values(octo::randn({n}, {.dtype = octo::kFloat64})));
    out.push_back(values(octo::randint(0, 1000, {n})));
    Tensor mask = octo::empty({n});
    octo::kernels::cpu_backend().bernoulli(mask.arg(), 0.5, octo::default_generator().reserve(n));
    out.push_back(values(mask));
    return out;
  };
  int saved = octo::get_num_threads();
  auto one = draw(1), two = draw(2), four = draw(4);
  octo::set_num_threads(saved);
  CHECK(one == two);
  CHECK(one == four);

  // Element i uses counter offset + i: a draw at offset 10 is the tail of a draw at offset 0.
  auto& backend = octo::kernels::cpu_backend();
  Tensor full = octo::empty({50}, {.dtype = octo::kFloat64});
  Tensor tail = octo::empty({40}, {.dtype = octo::kFloat64});
  backend.normal(full.arg(), 0.0, 1.0, {99, 0});
  backend.normal(tail.arg(), 0.0, 1.0, {99, 10});
  auto vf = values(full), vt = values(tail);
  CHECK(std::vector<double>(vf.begin() + 10, vf.end()) == vt);
  // A different seed gives different numbers.
  Tensor other = octo::empty({50}, {.dtype = octo::kFloat64});
  backend.normal(other.arg(), 0.0, 1.0, {100, 0});
  CHECK(values(other) != vf);

  // A non-contiguous output gets element i (row-major in its own shape) from counter i.
  Tensor base = octo::empty({8, 5});
  Tensor strided = base.t();  // [5, 8]
  backend.uniform(strided.arg(), 0.0, 1.0, {3, 0});
  Tensor dense = octo::empty({5, 8});
  backend.uniform(dense.arg(), 0.0, 1.0, {3, 0});
  CHECK(values(strided) == values(dense));

  // The generator's offset advances, so consecutive draws differ; reseeding repeats them.
  octo::manual_seed(5);
  auto a = values(octo::rand({10}));
  auto b = values(octo::rand({10}));
  CHECK(a != b);
  octo::manual_seed(5);
  CHECK(values(octo::rand({10})) == a);
}

TEST_CASE("random kernels reject unsupported dtypes") {
  Tensor i = octo::empty({4}, {.dtype = octo::kInt64});
  CHECK_THROWS_AS(octo::kernels::cpu_backend().uniform(i.arg(), 0, 1, {0, 0}), octo::ValueError);
  CHECK_THROWS_AS(octo::kernels::cpu_backend().normal(i.arg(), 0, 1, {0, 0}), octo::ValueError);
  CHECK_THROWS_AS(octo::rand({2}, {.dtype = octo::kInt64}), octo::ValueError);
}
