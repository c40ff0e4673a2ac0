// Tensor basics: factories, metadata, copies across devices and dtypes, printing.
#include <catch2/catch.hpp>
#include <limits>
#include <sstream>

#include <octo/octo.h>

using octo::Device;
using octo::Tensor;

TEST_CASE("factories make tensors of the requested shape, dtype and device") {
  Tensor z = octo::zeros({2, 3});
  CHECK(z.sizes() == octo::Shape{2, 3});
  CHECK(z.dtype() == octo::kFloat32);
  CHECK(z.device() == Device("cpu:0"));
  CHECK(z.is_contiguous());
  CHECK(z.strides() == octo::Shape{3, 1});
  for (float v : z.to_vector<float>()) CHECK(v == 0.0f);

  Tensor o = octo::ones({4}, {.dtype = octo::kFloat64, .device = Device("cpu:1")});
  CHECK(o.device() == Device("cpu:1"));
  CHECK(o.dtype() == octo::kFloat64);
  CHECK(o.to_vector<double>() == std::vector<double>{1, 1, 1, 1});

  CHECK(octo::full({2}, 7, {.dtype = octo::kInt64}).to_vector<int64_t>() ==
        std::vector<int64_t>{7, 7});
  CHECK(octo::arange(5).to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2, 3, 4});
  CHECK(octo::arange(1.0, 2.0, 0.25).to_vector<float>() ==
        std::vector<float>{1.0f, 1.25f, 1.5f, 1.75f});
  auto ls = octo::linspace(0, 1, 5, {.dtype = octo::kFloat64}).to_vector<double>();
  CHECK(ls == std::vector<double>{0, 0.25, 0.5, 0.75, 1.0});
  CHECK(octo::eye(2, 3).to_vector<float>() == std::vector<float>{1, 0, 0, 0, 1, 0});
  CHECK(octo::tensor({1.5, 2.5}).to_vector<float>() == std::vector<float>{1.5f, 2.5f});
  CHECK(octo::zeros({0, 3}).numel() == 0);
  CHECK(octo::scalar_tensor(3.5).dim() == 0);
  CHECK(octo::scalar_tensor(3.5).item<float>() == 3.5f);
}

TEST_CASE("bad factory arguments are reported") {
  CHECK_THROWS_AS(octo::zeros({2, -1}), octo::ValueError);
  CHECK_THROWS_WITH(octo::tensor({1, 2, 3}, {2, 2}), Catch::Contains("needs 4 values but got 3"));
  CHECK_THROWS_AS(octo::arange(0.0, 1.0, 0.0), octo::ValueError);
  CHECK_THROWS_AS(octo::randint(5, 5, {2}), octo::ValueError);
  CHECK_THROWS_WITH(octo::zeros({2}).item<float>(), Catch::Contains("2 elements"));
}

TEST_CASE("to() converts dtype and moves between virtual cpu devices") {
  Tensor a = octo::tensor({1.25, -2.0, 3.75});
  Tensor b = a.to(Device("cpu:1"));
  CHECK(b.device() == Device("cpu:1"));
  CHECK(!b.is_alias_of(a));
  CHECK(b.to_vector<float>() == a.to_vector<float>());
  CHECK(a.to(Device("cpu:0")).is_alias_of(a));  // no-op returns the same tensor
  Tensor i = a.to(octo::kInt64);
  CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{1, -2, 3});
  Tensor h = a.to(octo::kBFloat16).to(octo::kFloat32);
  CHECK(h.to_vector<float>() == a.to_vector<float>());
  CHECK(octo::tensor({0.0, 2.0}).to(octo::kBool).to_vector<bool>() ==
        std::vector<bool>{false, true});
}

TEST_CASE("to() defines float to integer conversion: NaN is 0, out of range saturates") {
  // Note [Float to integer conversion]: a plain C++ cast of these values is undefined behaviour.
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor x = octo::tensor({inf, -inf, nan, 1e30, -1e30, 2.9, -2.9, 300.0, -5.0},
                          {.dtype = octo::kFloat64});
  CHECK(x.to(octo::kInt64).to_vector<int64_t>() ==
        std::vector<int64_t>{INT64_MAX, INT64_MIN, 0, INT64_MAX, INT64_MIN, 2, -2, 300, -5});
  CHECK(x.to(octo::kInt32).to_vector<int32_t>() ==
        std::vector<int32_t>{INT32_MAX, INT32_MIN, 0, INT32_MAX, INT32_MIN, 2, -2, 300, -5});
  CHECK(x.to(octo::kUInt8).to_vector<uint8_t>() ==
        std::vector<uint8_t>{255, 0, 0, 255, 0, 2, 0, 255, 0});
  // Through float32 and the 16-bit types too (their inf and NaN take the same path).
  for (octo::DType d : {octo::kFloat32, octo::kFloat16, octo::kBFloat16}) {
    CHECK(x.to(d).to(octo::kInt64).to_vector<int64_t>()[0] == INT64_MAX);
    CHECK(x.to(d).to(octo::kInt64).to_vector<int64_t>()[2] == 0);
  }
  CHECK(x.to(octo::kBool).to(octo::kInt64).to_vector<int64_t>() == std::vector<int64_t>(9, 1));
}

TEST_CASE("integer arithmetic wraps on overflow, as in PyTorch") {
  // Note [Integer overflow wraps]: two's complement, never C++'s undefined signed overflow.
  Tensor big = octo::from_vector<int64_t>({INT64_MAX, INT64_MIN, 3}, {3});
  Tensor one = octo::from_vector<int64_t>({1, 1, 1}, {3});
  CHECK((big + one).to_vector<int64_t>() == std::vector<int64_t>{INT64_MIN, INT64_MIN + 1, 4});
  CHECK((big - one).to_vector<int64_t>() == std::vector<int64_t>{INT64_MAX - 1, INT64_MAX, 2});
  CHECK((big * big).to_vector<int64_t>() == std::vector<int64_t>{1, 0, 9});
  CHECK(octo::neg(big).to_vector<int64_t>() == std::vector<int64_t>{INT64_MIN + 1, INT64_MIN, -3});
  CHECK(octo::abs(big).to_vector<int64_t>() == std::vector<int64_t>{INT64_MAX, INT64_MIN, 3});
  CHECK(octo::sum(big).item<int64_t>() == 2);  // max + min + 3 = -1 + 3
  CHECK(octo::sum(octo::from_vector<int64_t>({INT64_MAX, INT64_MAX}, {2})).item<int64_t>() == -2);
  CHECK(octo::prod(octo::from_vector<int64_t>({int64_t{1} << 62, 4}, {2}), 0).item<int64_t>() == 0);
  Tensor i32 = octo::from_vector<int32_t>({INT32_MAX}, {1});
  CHECK((i32 + octo::from_vector<int32_t>({1}, {1})).item<int32_t>() == INT32_MIN);
  CHECK(octo::pow(i32, 2).item<int32_t>() == 1);
}

TEST_CASE("clone copies, copy_ writes in place") {
  Tensor a = octo::tensor({1, 2, 3});
  Tensor c = a.clone();
  c.fill_(9);
  CHECK(a.to_vector<float>() == std::vector<float>{1, 2, 3});
  CHECK(c.to_vector<float>() == std::vector<float>{9, 9, 9});
  uint32_t v = c.version();
  c.copy_(a.to(Device("cpu:2")));
  CHECK(c.to_vector<float>() == std::vector<float>{1, 2, 3});
  CHECK(c.version() == v + 1);
}

TEST_CASE("random factories are reproducible by seed and device independent") {
  octo::manual_seed(42);
  auto a = octo::randn({1000}).to_vector<float>();
  octo::manual_seed(42);
  auto b = octo::randn({1000}).to_vector<float>();
  CHECK(a == b);
  octo::manual_seed(42);
  auto c = octo::randn({1000}, {.device = Device("cpu:1")}).to_vector<float>();
  CHECK(a == c);  // same seed, same counters: the same numbers on another device
  double mean = 0, sq = 0;
  for (float x : a) {
    mean += x;
    sq += double(x) * x;
  }
  mean /= 1000;
  double var = sq / 1000 - mean * mean;
  CHECK(std::abs(mean) < 0.1);
  CHECK(std::abs(var - 1.0) < 0.15);
  auto u = octo::rand({1000}).to_vector<float>();
  for (float x : u) CHECK((x >= 0.0f && x < 1.0f));
  auto r = octo::randint(3, 7, {1000}).to_vector<int64_t>();
  for (auto x : r) CHECK((x >= 3 && x < 7));
}

TEST_CASE("printing looks like PyTorch") {
  std::ostringstream s1;
  s1 << octo::tensor({1.0, 2.5, -3.0});
  CHECK(s1.str() == "tensor([ 1.0000,  2.5000, -3.0000])");
  std::ostringstream s2;
  s2 << octo::tensor({1, 2, 3, 4}, {2, 2}, {.dtype = octo::kFloat64, .device = Device("cpu:1")});
  CHECK(s2.str() == "tensor([[1., 2.],\n        [3., 4.]], device='cpu:1', dtype=float64)");
  std::ostringstream s3;
  s3 << octo::arange(3);
  CHECK(s3.str() == "tensor([0, 1, 2])");
  std::ostringstream s4;
  s4 << octo::scalar_tensor(0.5);
  CHECK(s4.str() == "tensor(0.5000)");
  std::ostringstream s5;
  s5 << octo::zeros({2}, {.requires_grad = true});
  CHECK(s5.str() == "tensor([0., 0.], requires_grad=True)");
  // The grad_fn name reaches tensor/'s printing through autograd's hook (tensor/autograd_hooks.h).
  std::ostringstream s6;
  s6 << octo::zeros({2}, {.requires_grad = true}) * 2.0;
  CHECK(s6.str() == "tensor([0., 0.], grad_fn=<MulBackward>)");
}
