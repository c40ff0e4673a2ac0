// Tests for the elementwise kernels (through the ops) against reference loops here; the random
// kernels are in test_random.cpp, the strided loop under them in test_loops.cpp.
#include <catch2/catch.hpp>

#include <octo/octo.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>

#include "kernels/backend.h"

using octo::Device;
using octo::DType;
using octo::Shape;
using octo::Tensor;

namespace {

std::vector<double> random_values(int64_t n, uint32_t seed, double lo = -2.0, double hi = 2.0) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) x = dist(gen);
  return v;
}

Tensor random_tensor(const Shape& shape, DType dtype, uint32_t seed, double lo = -2.0,
                     double hi = 2.0) {
  return octo::tensor(random_values(octo::detail::shape_numel(shape), seed, lo, hi), shape,
                      {.dtype = dtype});
}

std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

bool close(double got, double want, double tol) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  return std::fabs(got - want) <= tol + tol * std::fabs(want);
}

double tol_for(DType d) { return d == octo::kFloat64 ? 1e-12 : 2e-6; }

/// Row-major index of `out_shape` element i, mapped into an input of `in_shape` (broadcasting).
int64_t broadcast_index(int64_t i, const Shape& out_shape, const Shape& in_shape) {
  int64_t idx = 0, stride = 1;
  const size_t lead = out_shape.size() - in_shape.size();
  for (int64_t d = static_cast<int64_t>(out_shape.size()) - 1; d >= 0; --d) {
    int64_t coord = i % out_shape[d];
    i /= out_shape[d];
    if (static_cast<size_t>(d) < lead) continue;
    int64_t size = in_shape[d - lead];
    if (size != 1) idx += coord * stride;
    stride *= size;
  }
  return idx;
}

Shape ref_broadcast(const Shape& a, const Shape& b) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i + a.size() < n ? 1 : a[i + a.size() - n];
    int64_t db = i + b.size() < n ? 1 : b[i + b.size() - n];
    out[i] = da == 1 ? db : da;
  }
  return out;
}

/// Shapes to run every unary kernel over: empty, scalar, one element, odd sizes, bigger than one
/// parallel chunk (so several threads write).
const std::vector<Shape> kUnaryShapes = {{}, {0}, {1}, {7}, {3, 5}, {2, 3, 4}, {0, 3}, {70001}};

struct UnaryCase {
  const char* name;
  std::function<Tensor(const Tensor&)> op;
  std::function<double(double)> ref;
  double lo, hi;  // input domain
};

const std::vector<UnaryCase>& unary_cases() {
  static const std::vector<UnaryCase> cases = {
      {"neg", [](const Tensor& x) { return -x; }, [](double x) { return -x; }, -3, 3},
      {"abs", [](const Tensor& x) { return octo::abs(x); }, [](double x) { return std::fabs(x); },
       -3, 3},
      {"sign", [](const Tensor& x) { return octo::sign(x); },
       [](double x) { return double((x > 0) - (x < 0)); }, -3, 3},
      {"exp", [](const Tensor& x) { return octo::exp(x); }, [](double x) { return std::exp(x); },
       -3, 3},
      {"log", [](const Tensor& x) { return octo::log(x); }, [](double x) { return std::log(x); },
       0.1, 5},
      {"log1p", [](const Tensor& x) { return octo::log1p(x); },
       [](double x) { return std::log1p(x); }, -0.5, 3},
      {"expm1", [](const Tensor& x) { return octo::expm1(x); },
       [](double x) { return std::expm1(x); }, -2, 2},
      {"sqrt", [](const Tensor& x) { return octo::sqrt(x); }, [](double x) { return std::sqrt(x); },
       0, 5},
      {"rsqrt", [](const Tensor& x) { return octo::rsqrt(x); },
       [](double x) { return 1 / std::sqrt(x); }, 0.1, 5},
      {"sin", [](const Tensor& x) { return octo::sin(x); }, [](double x) { return std::sin(x); },
       -4, 4},
      {"cos", [](const Tensor& x) { return octo::cos(x); }, [](double x) { return std::cos(x); },
       -4, 4},
      {"tanh", [](const Tensor& x) { return octo::tanh(x); }, [](double x) { return std::tanh(x); },
       -4, 4},
      {"sigmoid", [](const Tensor& x) { return octo::sigmoid(x); },
       [](double x) { return 1 / (1 + std::exp(-x)); }, -30, 30},
      {"relu", [](const Tensor& x) { return octo::relu(x); },
       [](double x) { return x > 0 ? x : 0; }, -3, 3},
      {"leaky_relu", [](const Tensor& x) { return octo::leaky_relu(x, 0.2); },
       [](double x) { return x > 0 ? x : 0.2 * x; }, -3, 3},
      {"gelu", [](const Tensor& x) { return octo::gelu(x); },
       [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }, -4, 4},
      {"silu", [](const Tensor& x) { return octo::silu(x); },
       [](double x) { return x / (1 + std::exp(-x)); }, -6, 6},
      {"softplus", [](const Tensor& x) { return octo::softplus(x); },
       [](double x) { return x > 20 ? x : std::log1p(std::exp(x)); }, -30, 30},
      {"softplus beta 2 threshold 3", [](const Tensor& x) { return octo::softplus(x, 2, 3); },
       [](double x) { return 2 * x > 3 ? x : std::log1p(std::exp(2 * x)) / 2; }, -4, 4},
      {"square", [](const Tensor& x) { return octo::square(x); }, [](double x) { return x * x; },
       -3, 3},
      {"reciprocal", [](const Tensor& x) { return octo::reciprocal(x); },
       [](double x) { return 1 / x; }, 0.2, 4},
      {"erf", [](const Tensor& x) { return octo::erf(x); }, [](double x) { return std::erf(x); },
       -3, 3},
      {"floor", [](const Tensor& x) { return octo::floor(x); },
       [](double x) { return std::floor(x); }, -5, 5},
      {"ceil", [](const Tensor& x) { return octo::ceil(x); }, [](double x) { return std::ceil(x); },
       -5, 5},
      {"round", [](const Tensor& x) { return octo::round(x); },
       [](double x) { return std::nearbyint(x); }, -5, 5},
      {"pow 3", [](const Tensor& x) { return octo::pow(x, 3); }, [](double x) { return x * x * x; },
       -2, 2},
      {"pow 0.5", [](const Tensor& x) { return x.pow(0.5); }, [](double x) { return std::sqrt(x); },
       0, 4},
      {"pow -1.5", [](const Tensor& x) { return x.pow(-1.5); },
       [](double x) { return std::pow(x, -1.5); }, 0.3, 4},
      {"clamp", [](const Tensor& x) { return octo::clamp(x, -0.5, 0.75); },
       [](double x) { return std::min(std::max(x, -0.5), 0.75); }, -2, 2},
      {"clamp_min", [](const Tensor& x) { return octo::clamp_min(x, 0.25); },
       [](double x) { return std::max(x, 0.25); }, -2, 2},
      {"clamp_max", [](const Tensor& x) { return octo::clamp_max(x, 0.25); },
       [](double x) { return std::min(x, 0.25); }, -2, 2},
      {"x + 1.5", [](const Tensor& x) { return x + 1.5; }, [](double x) { return x + 1.5; }, -2, 2},
      {"x - 2", [](const Tensor& x) { return x - 2; }, [](double x) { return x - 2; }, -2, 2},
      {"3 - x", [](const Tensor& x) { return 3 - x; }, [](double x) { return 3 - x; }, -2, 2},
      {"x * -2.5", [](const Tensor& x) { return x * -2.5; }, [](double x) { return x * -2.5; }, -2,
       2},
      {"0.5 * x", [](const Tensor& x) { return 0.5 * x; }, [](double x) { return 0.5 * x; }, -2, 2},
      {"x / 3", [](const Tensor& x) { return x / 3; }, [](double x) { return x / 3; }, -2, 2},
      {"2 / x", [](const Tensor& x) { return 2.0 / x; }, [](double x) { return 2 / x; }, 0.5, 2},
      {"affine x * -2.5 + 0.75", [](const Tensor& x) { return octo::affine(x, -2.5, 0.75); },
       [](double x) { return x * -2.5 + 0.75; }, -2, 2},
  };
  return cases;
}

void check_unary(const UnaryCase& c, const Tensor& x) {
  Tensor y = c.op(x);
  REQUIRE(y.sizes() == x.sizes());
  REQUIRE(y.dtype() == x.dtype());
  auto in = values(x), out = values(y);
  for (size_t i = 0; i < in.size(); ++i) {
    double want = c.ref(in[i]);
    if (x.dtype() == octo::kFloat32) want = c.ref(static_cast<float>(in[i]));
    if (!close(out[i], want, tol_for(x.dtype()))) {
      FAIL_CHECK(c.name << " on " << x.dtype() << " " << octo::shape_str(x.sizes()) << " at " << i
                        << ": x = " << in[i] << ", got " << out[i] << ", want " << want);
      return;
    }
  }
  SUCCEED();
}

}  // namespace

TEST_CASE("unary kernels match reference loops on every shape and float dtype") {
  uint32_t seed = 1;
  for (const auto& c : unary_cases()) {
    for (DType dt : {octo::kFloat32, octo::kFloat64}) {
      for (const Shape& shape : kUnaryShapes)
        check_unary(c, random_tensor(shape, dt, seed++, c.lo, c.hi));
      // Non-contiguous inputs: a transpose and a strided slice.
      check_unary(c, random_tensor({5, 3}, dt, seed++, c.lo, c.hi).t());
      check_unary(c, random_tensor({4, 9}, dt, seed++, c.lo, c.hi).slice(1, 1, 8, 3));
    }
  }
}

TEST_CASE("unary kernels write into non-contiguous outputs") {
  auto& b = octo::kernels::cpu_backend();
  Tensor x = random_tensor({4, 6}, octo::kFloat64, 7);
  Tensor base = octo::zeros({6, 4}, {.dtype = octo::kFloat64});
  Tensor out = base.t();  // [4, 6] with strides (1, 4)
  b.unary(octo::kernels::UnaryOp::Exp, out.arg(), x.arg(), {}, {});
  auto in = values(x), got = values(out);
  for (size_t i = 0; i < in.size(); ++i) CHECK(close(got[i], std::exp(in[i]), 1e-14));
  // MulScalar in place (out aliases in), as mul_(Scalar) does.
  b.unary(octo::kernels::UnaryOp::MulScalar, x.arg(), x.arg(), 3.0, {});
  auto tripled = values(x);
  for (size_t i = 0; i < in.size(); ++i) CHECK(tripled[i] == in[i] * 3.0);
  // Affine in place, as data::normalize runs it on each channel of the converted batch.
  b.unary(octo::kernels::UnaryOp::Affine, x.arg(), x.arg(), 0.5, -1.0);
  auto shifted = values(x);
  for (size_t i = 0; i < in.size(); ++i) CHECK(shifted[i] == tripled[i] * 0.5 - 1.0);
}

TEST_CASE("affine takes x * scale's dtype and rounds once in 16 bits") {
  Tensor u8 = octo::from_vector<uint8_t>({0, 51, 255}, {3});
  Tensor f = octo::affine(u8, 1.0 / 255, -0.5);  // a float scale on integers -> float32
  CHECK(f.dtype() == octo::kFloat32);
  auto fv = f.to_vector<float>();
  CHECK(fv[0] == Approx(-0.5));
  CHECK(fv[1] == Approx(-0.3));
  CHECK(fv[2] == Approx(0.5));
  Tensor i = octo::affine(octo::arange(4), 3, -1);  // integral stays int64
  CHECK(i.dtype() == octo::kInt64);
  CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{-1, 2, 5, 8});
  for (DType dt : {octo::kBFloat16, octo::kFloat16}) {
    INFO(dt);
    const std::vector<double> v = {1.5, -2.0, 0.25, 3.0};
    Tensor y = octo::affine(octo::tensor(v, {4}).to(dt), 0.3, 0.1);
    CHECK(y.dtype() == dt);
    // Computed in float and rounded to 16 bits once: within half a 16-bit ulp of the exact value
    // (8 significant bits in bfloat16, 11 in float16).
    const double half_ulp = dt == octo::kBFloat16 ? 0x1p-8 : 0x1p-11;
    auto got = y.to(octo::kFloat32).to_vector<float>();
    for (size_t k = 0; k < v.size(); ++k) {
      const double want = v[k] * 0.3 + 0.1;
      CHECK(std::fabs(got[k] - want) <= half_ulp * std::fabs(want) * 1.01);
    }
  }
}

TEST_CASE("binary kernels broadcast like NumPy") {
  struct Op {
    const char* name;
    std::function<Tensor(const Tensor&, const Tensor&)> op;
    std::function<double(double, double)> ref;
  };
  const std::vector<Op> ops = {
      {"add", [](const Tensor& a, const Tensor& b) { return a + b; },
       [](double a, double b) { return a + b; }},
      {"sub", [](const Tensor& a, const Tensor& b) { return a - b; },
       [](double a, double b) { return a - b; }},
      {"mul", [](const Tensor& a, const Tensor& b) { return a * b; },
       [](double a, double b) { return a * b; }},
      {"div", [](const Tensor& a, const Tensor& b) { return a / b; },
       [](double a, double b) { return a / b; }},
      {"add alpha", [](const Tensor& a, const Tensor& b) { return octo::add(a, b, 2.5); },
       [](double a, double b) { return a + 2.5 * b; }},
      {"sub alpha", [](const Tensor& a, const Tensor& b) { return octo::sub(a, b, 3); },
       [](double a, double b) { return a - 3 * b; }},
      {"pow", [](const Tensor& a, const Tensor& b) { return octo::pow(octo::abs(a), b); },
       [](double a, double b) { return std::pow(std::fabs(a), b); }},
      {"maximum", [](const Tensor& a, const Tensor& b) { return octo::maximum(a, b); },
       [](double a, double b) { return std::max(a, b); }},
      {"minimum", [](const Tensor& a, const Tensor& b) { return octo::minimum(a, b); },
       [](double a, double b) { return std::min(a, b); }},
  };
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{3, 4}, {3, 4}}, {{3, 1}, {1, 4}},          {{2, 3, 4}, {4}},    {{}, {5}},
      {{5}, {}},        {{0, 3}, {1, 3}},          {{1}, {7}},          {{5, 1, 3}, {2, 1}},
      {{}, {}},         {{2, 1, 3, 1}, {4, 1, 5}}, {{300, 257}, {257}}, {{300, 1}, {300, 257}}};
  uint32_t seed = 100;
  for (const auto& op : ops) {
    for (DType dt : {octo::kFloat32, octo::kFloat64}) {
      for (const auto& [sa, sb] : shapes) {
        Tensor a = random_tensor(sa, dt, seed++, 0.5, 2.0);
        Tensor b = random_tensor(sb, dt, seed++, -2.0, 2.0);
        Tensor y = op.op(a, b);
        Shape so = ref_broadcast(sa, sb);
        REQUIRE(y.sizes() == so);
        REQUIRE(y.dtype() == dt);
        auto va = values(a), vb = values(b), vy = values(y);
        bool ok = true;
        for (int64_t i = 0; i < static_cast<int64_t>(vy.size()) && ok; ++i) {
          double x0 = va[broadcast_index(i, so, sa)], x1 = vb[broadcast_index(i, so, sb)];
          double want = op.ref(x0, x1);
          if (dt == octo::kFloat32) want = static_cast<float>(op.ref(float(x0), float(x1)));
          ok = close(vy[i], want, tol_for(dt) * 4);
          if (!ok)
            FAIL_CHECK(op.name << " " << octo::shape_str(sa) << " with " << octo::shape_str(sb)
                               << " at " << i << ": got " << vy[i] << ", want " << want);
        }
        CHECK(ok);
      }
    }
  }
}

TEST_CASE("binary kernels read non-contiguous inputs") {
  Tensor a = random_tensor({6, 5}, octo::kFloat64, 1).t();  // [5, 6], strides (1, 5)
  Tensor b = random_tensor({5, 12}, octo::kFloat64, 2).slice(1, 0, 12, 2);  // [5, 6], step 2
  Tensor c = random_tensor({6}, octo::kFloat64, 3);
  Tensor y = a * b + c;
  auto va = values(a), vb = values(b), vc = values(c), vy = values(y);
  REQUIRE(vy.size() == 30);
  for (size_t i = 0; i < 30; ++i) CHECK(close(vy[i], va[i] * vb[i] + vc[i % 6], 1e-14));
  // The raw kernel with a broadcast (stride-0) first operand and a transposed output.
  Tensor out_base = octo::zeros({6, 5}, {.dtype = octo::kFloat64});
  Tensor out = out_base.t();
  Tensor row = octo::detail::make_view(c, {5, 6}, {0, 1}, 0);
  octo::kernels::cpu_backend().binary(octo::kernels::BinaryOp::Sub, out.arg(), row.arg(), a.arg(),
                                      {});
  auto vo = values(out);
  for (size_t i = 0; i < 30; ++i) CHECK(vo[i] == vc[i % 6] - va[i]);
}

TEST_CASE("comparisons and logical ops write bool") {
  Tensor a = octo::tensor({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = octo::tensor({3, 2, 1});
  auto va = values(a), vb = values(b);
  struct Cmp {
    Tensor t;
    std::function<bool(double, double)> ref;
  };
  std::vector<Cmp> cmps = {
      {a == b, std::equal_to<double>()}, {a != b, std::not_equal_to<double>()},
      {a < b, std::less<double>()},      {a <= b, std::less_equal<double>()},
      {a > b, std::greater<double>()},   {a >= b, std::greater_equal<double>()}};
  for (auto& c : cmps) {
    REQUIRE(c.t.dtype() == octo::kBool);
    REQUIRE(c.t.sizes() == Shape{2, 3});
    auto got = c.t.to_vector<bool>();
    for (size_t i = 0; i < 6; ++i) CHECK(got[i] == c.ref(va[i], vb[i % 3]));
  }
  Tensor p = octo::tensor({0, 1, 0, 2});
  Tensor q = octo::tensor({0, 0, 3, -1}, {.dtype = octo::kInt64});
  CHECK(octo::logical_and(p, q).to_vector<bool>() == std::vector<bool>{false, false, false, true});
  CHECK(octo::logical_or(p, q).to_vector<bool>() == std::vector<bool>{false, true, true, true});
  CHECK(octo::logical_not(q).to_vector<bool>() == std::vector<bool>{true, true, false, false});
  Tensor mask = p > octo::zeros({});
  CHECK(octo::logical_not(mask).to_vector<bool>() == std::vector<bool>{true, false, true, false});
  // Mixed dtypes compare after promotion: 2 (int64) == 2.0 (float32).
  CHECK(
      (octo::tensor({2.0, 2.5}) == octo::full({2}, 2, {.dtype = octo::kInt64})).to_vector<bool>() ==
      std::vector<bool>{true, false});
}

TEST_CASE("integer dtypes: arithmetic, comparisons, clamp, true division") {
  for (DType dt : {octo::kInt64, octo::kInt32}) {
    Tensor a = octo::tensor({-7, -2, 0, 3, 9, 100}, {6}, {.dtype = dt});
    Tensor b = octo::tensor({2, -3, 5, 3, -4, 3}, {6}, {.dtype = dt});
    auto va = values(a), vb = values(b);
    auto check = [&](const Tensor& t, std::function<double(double, double)> ref) {
      REQUIRE(t.dtype() == dt);
      auto v = values(t);
      for (size_t i = 0; i < 6; ++i) CHECK(v[i] == ref(va[i], vb[i]));
    };
    check(a + b, [](double x, double y) { return x + y; });
    check(a - b, [](double x, double y) { return x - y; });
    check(a * b, [](double x, double y) { return x * y; });
    check(octo::maximum(a, b), [](double x, double y) { return std::max(x, y); });
    check(octo::minimum(a, b), [](double x, double y) { return std::min(x, y); });
    check(-a, [](double x, double) { return -x; });
    check(octo::abs(a), [](double x, double) { return std::fabs(x); });
    check(octo::sign(a), [](double x, double) { return double((x > 0) - (x < 0)); });
    check(octo::square(a), [](double x, double) { return x * x; });
    check(octo::relu(a), [](double x, double) { return std::max(x, 0.0); });
    check(octo::clamp(a, -3, 5), [](double x, double) { return std::min(std::max(x, -3.0), 5.0); });
    check(octo::clamp_min(a, 1), [](double x, double) { return std::max(x, 1.0); });
    check(a + 3, [](double x, double) { return x + 3; });
    check(a * 2, [](double x, double) { return x * 2; });
    check(a.pow(3), [](double x, double) { return x * x * x; });
    check(octo::pow(a, octo::abs(b)), [](double x, double y) { return std::pow(x, std::fabs(y)); });
    check(octo::floor(a), [](double x, double) { return x; });
    CHECK((a < b).to_vector<bool>() == std::vector<bool>{true, false, true, false, false, false});
    Tensor q = a / b;  // true division promotes to float32
    CHECK(q.dtype() == octo::kFloat32);
    auto vq = values(q);
    for (size_t i = 0; i < 6; ++i) CHECK(close(vq[i], float(va[i] / vb[i]), 1e-6));
    CHECK((a + 0.5).dtype() == octo::kFloat32);  // int tensor with float scalar -> float32
    CHECK(values(a + 0.5)[1] == -1.5);
  }
  Tensor u = octo::tensor({0, 5, 250}, {3}, {.dtype = octo::kUInt8});
  CHECK((u + 10).dtype() == octo::kUInt8);
  CHECK((u + 10).to_vector<uint8_t>() == std::vector<uint8_t>{10, 15, 4});  // wraps like uint8
  CHECK(octo::maximum(u, octo::full({3}, 7, {.dtype = octo::kUInt8})).to_vector<uint8_t>() ==
        std::vector<uint8_t>{7, 7, 250});
  CHECK(octo::clamp(u, -5, 100).to_vector<uint8_t>() == std::vector<uint8_t>{0, 5, 100});
  CHECK(octo::abs(u).to_vector<uint8_t>() == std::vector<uint8_t>{0, 5, 250});
  CHECK(octo::relu(u).to_vector<uint8_t>() == std::vector<uint8_t>{0, 5, 250});
  // Large integers stay exact (no trip through double).
  int64_t big = (int64_t(1) << 60) + 1;
  Tensor l = octo::full({2}, big, {.dtype = octo::kInt64});
  CHECK((l + 1).to_vector<int64_t>() == std::vector<int64_t>{big + 1, big + 1});
  CHECK(octo::clamp_max(l, big - 1).to_vector<int64_t>() == std::vector<int64_t>{big - 1, big - 1});
  // bool: add is or, mul is and, maximum is or.
  Tensor t = octo::tensor({0, 1, 1}).to(octo::kBool), f = octo::tensor({0, 0, 1}).to(octo::kBool);
  CHECK((t + f).dtype() == octo::kBool);
  CHECK((t + f).to_vector<bool>() == std::vector<bool>{false, true, true});
  CHECK((t * f).to_vector<bool>() == std::vector<bool>{false, false, true});
  CHECK((t + 1).dtype() == octo::kInt64);
  CHECK((t + 1).to_vector<int64_t>() == std::vector<int64_t>{1, 2, 2});
}

TEST_CASE("type promotion follows PyTorch") {
  Tensor f32 = octo::ones({2}), f64 = octo::ones({2}, {.dtype = octo::kFloat64});
  Tensor i64 = octo::ones({2}, {.dtype = octo::kInt64}),
         i32 = octo::ones({2}, {.dtype = octo::kInt32});
  Tensor u8 = octo::ones({2}, {.dtype = octo::kUInt8}), b = octo::ones({2}, {.dtype = octo::kBool});
  CHECK((f32 + f64).dtype() == octo::kFloat64);
  CHECK((i64 + f32).dtype() == octo::kFloat32);
  CHECK((i32 * i64).dtype() == octo::kInt64);
  CHECK((u8 + i32).dtype() == octo::kInt32);
  CHECK((b + u8).dtype() == octo::kUInt8);
  CHECK((f64 * 2).dtype() == octo::kFloat64);
  CHECK((2.5 * f32).dtype() == octo::kFloat32);
  CHECK((i32 * 2).dtype() == octo::kInt32);
  CHECK((i32 / 2).dtype() == octo::kFloat32);
  // A 0-d tensor does not raise a dimensioned tensor's dtype within its category...
  CHECK((f32 * octo::scalar_tensor(2.0, {.dtype = octo::kFloat64})).dtype() == octo::kFloat32);
  CHECK((i32 + octo::scalar_tensor(2, {.dtype = octo::kInt64})).dtype() == octo::kInt32);
  // ...but does across categories, and two 0-d tensors promote normally.
  CHECK((i64 + octo::scalar_tensor(2.0, {.dtype = octo::kFloat64})).dtype() == octo::kFloat64);
  CHECK((octo::scalar_tensor(1.0) + octo::scalar_tensor(2.0, {.dtype = octo::kFloat64})).dtype() ==
        octo::kFloat64);
  CHECK((f32 < f64).dtype() == octo::kBool);
  CHECK(octo::where(b, f32, i64).dtype() == octo::kFloat32);
}

TEST_CASE("where broadcasts condition and values") {
  Tensor cond = octo::tensor({1, 0, 1}).to(octo::kBool);   // [3]
  Tensor a = random_tensor({2, 1}, octo::kFloat64, 5);     // [2, 1]
  Tensor b = random_tensor({4, 1, 3}, octo::kFloat64, 6);  // [4, 1, 3]
  Tensor y = octo::where(cond, a, b);
  REQUIRE(y.sizes() == Shape{4, 2, 3});
  auto vc = cond.to_vector<bool>();
  auto va = values(a), vb = values(b), vy = values(y);
  for (int64_t i = 0; i < 24; ++i) {
    int64_t k = i % 3, r = (i / 3) % 2, q = i / 6;
    CHECK(vy[i] == (vc[k] ? va[r] : vb[q * 3 + k]));
  }
  Tensor big = random_tensor({50001}, octo::kFloat32, 8);
  Tensor w = octo::where(big > octo::zeros({}), big, octo::zeros({}));
  auto vbig = values(big), vw = values(w);
  for (size_t i = 0; i < vbig.size(); i += 97) CHECK(vw[i] == std::max(vbig[i], 0.0));
  CHECK(octo::where(cond.slice(0, 0, 0), octo::ones({0}), octo::zeros({})).numel() == 0);
}

TEST_CASE("NaN propagates through maximum, minimum, clamp and relu") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor x = octo::tensor({nan, 1.0, -1.0}, {3}, {.dtype = octo::kFloat64});
  Tensor y = octo::tensor({0.0, nan, 2.0}, {3}, {.dtype = octo::kFloat64});
  auto mx = values(octo::maximum(x, y)), mn = values(octo::minimum(x, y));
  CHECK(std::isnan(mx[0]));
  CHECK(std::isnan(mx[1]));
  CHECK(mx[2] == 2.0);
  CHECK(std::isnan(mn[0]));
  CHECK(mn[2] == -1.0);
  CHECK(std::isnan(values(octo::clamp(x, 0, 0.5))[0]));
  CHECK(std::isnan(values(octo::relu(x))[0]));
  CHECK(values(octo::sigmoid(octo::tensor({-1000.0, 1000.0})))[0] == 0.0);  // no overflow to NaN
}

TEST_CASE("round is half to even; clamp with min > max gives max") {
  auto r = values(octo::round(octo::tensor({0.5, 1.5, 2.5, -0.5, -1.5, 2.4})));
  CHECK(r == std::vector<double>{0, 2, 2, -0, -2, 2});
  CHECK(values(octo::clamp(octo::tensor({-1, 0, 5}), 3, 1)) == std::vector<double>{1, 1, 1});
}

TEST_CASE("in-place add_, sub_, mul_ and compound assignment") {
  Tensor x = octo::tensor({1, 2, 3, 4, 5, 6}, {2, 3});
  uint32_t v0 = x.version();
  Tensor row = octo::tensor({10, 20, 30});
  x.add_(row);  // broadcast into self
  CHECK(values(x) == std::vector<double>{11, 22, 33, 14, 25, 36});
  CHECK(x.version() == v0 + 1);
  x.sub_(row);
  CHECK(values(x) == std::vector<double>{1, 2, 3, 4, 5, 6});
  x.add_(row, -0.5);
  CHECK(values(x) == std::vector<double>{-4, -8, -12, -1, -5, -9});
  x.mul_(-1);
  x.mul_(octo::tensor({2, 1, 0.5}));
  CHECK(values(x) == std::vector<double>{8, 8, 6, 2, 5, 4.5});
  x += octo::ones({2, 3});
  x -= octo::full({1}, 2.0);
  x *= octo::full({}, 2.0);
  x *= 0.5;
  CHECK(values(x) == std::vector<double>{7, 7, 5, 1, 4, 3.5});
  // A view updates its base.
  Tensor base = octo::zeros({3, 3});
  Tensor col = base.select(1, 1);
  col.add_(octo::tensor({1, 2, 3}));
  CHECK(values(base) == std::vector<double>{0, 1, 0, 0, 2, 0, 0, 3, 0});
  // Overlapping operand: a.add_(a.t()) reads a's old values.
  Tensor sq = octo::tensor({1, 2, 3, 4}, {2, 2});
  sq.add_(sq.t());
  CHECK(values(sq) == std::vector<double>{2, 5, 5, 8});
  // int self with an int other; float self with a float64 other.
  Tensor i = octo::full({2}, 3, {.dtype = octo::kInt64});
  i.add_(octo::full({2}, 4, {.dtype = octo::kInt32}));
  CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{7, 7});
  Tensor f = octo::ones({2});
  f.add_(octo::full({2}, 0.25, {.dtype = octo::kFloat64}));
  CHECK(f.dtype() == octo::kFloat32);
  CHECK(values(f) == std::vector<double>{1.25, 1.25});
}

TEST_CASE("bad elementwise arguments are reported") {
  Tensor a = octo::ones({2, 3}), b = octo::ones({4});
  CHECK_THROWS_AS(a + b, octo::ValueError);
  CHECK_THROWS_WITH(a * b, Catch::Contains("mul") && Catch::Contains("[2, 3] and [4]"));
  CHECK_THROWS_WITH(octo::broadcast_shapes({2, 3}, {3, 2}), Catch::Contains("non-singleton"));
  CHECK(octo::broadcast_shapes({5, 1, 3}, {4, 1}) == Shape{5, 4, 3});
  CHECK(octo::broadcast_shapes({0}, {1}) == Shape{0});
  Tensor c = octo::ones({2, 3}, {.device = Device("cpu:1")});
  CHECK_THROWS_AS(a + c, octo::DeviceError);
  CHECK_THROWS_WITH(a * c, Catch::Contains("cpu:0 and cpu:1"));
  CHECK_THROWS_WITH(octo::where(octo::ones({2, 3}, {.dtype = octo::kBool}), a, c),
                    Catch::Contains("same device"));
  Tensor i = octo::ones({3}, {.dtype = octo::kInt64});
  CHECK_THROWS_AS(octo::exp(i), octo::ValueError);
  CHECK_THROWS_WITH(octo::sigmoid(i), Catch::Contains("sigmoid") && Catch::Contains("int64"));
  CHECK_THROWS_WITH(octo::where(a, a, a), Catch::Contains("bool"));
  Tensor t = octo::ones({2}, {.dtype = octo::kBool});
  CHECK_THROWS_AS(t - t, octo::ValueError);
  CHECK_THROWS_AS(-t, octo::ValueError);
  CHECK_THROWS_WITH(i.pow(-1), Catch::Contains("negative"));
  CHECK_THROWS_WITH(octo::clamp(a, std::nullopt, std::nullopt), Catch::Contains("min"));
  CHECK_THROWS_WITH(b.add_(a), Catch::Contains("add_") && Catch::Contains("[4] and [2, 3]"));
  CHECK_THROWS_WITH(octo::ones({3}).add_(a),
                    Catch::Contains("add_") && Catch::Contains("broadcast"));
  CHECK_THROWS_WITH(i.add_(octo::ones({3})), Catch::Contains("can't be cast"));
  CHECK_THROWS_AS(i.mul_(0.5), octo::ValueError);
  CHECK_THROWS_AS(octo::add(Tensor(), a), octo::ValueError);
  // The kernel itself rejects ops a dtype does not have.
  Tensor o = octo::empty({3}, {.dtype = octo::kInt64});
  CHECK_THROWS_WITH(
      octo::kernels::cpu_backend().unary(octo::kernels::UnaryOp::Exp, o.arg(), i.arg(), {}, {}),
      Catch::Contains("exp") && Catch::Contains("int64"));
  CHECK(octo::allclose(a, a.clone()));
  CHECK(!octo::allclose(a, b));
  CHECK(!octo::allclose(a, a * 1.001));
  CHECK(octo::allclose(a, a * 1.001, 1e-2));
}

TEST_CASE("16-bit float tensors compute in float and store rounded") {
  for (DType dt : {octo::kBFloat16, octo::kFloat16}) {
    Tensor a = octo::tensor({1.5, -2.0, 0.25, 3.0}).to(dt);
    Tensor b = octo::tensor({0.5, 4.0, -1.0, 2.0}).to(dt);
    Tensor s = a * b + octo::exp(a);
    CHECK(s.dtype() == dt);
    auto got = s.to(octo::kFloat32).to_vector<float>();
    std::vector<double> va = {1.5, -2.0, 0.25, 3.0}, vb = {0.5, 4.0, -1.0, 2.0};
    for (size_t i = 0; i < 4; ++i) {
      double want = va[i] * vb[i] + std::exp(va[i]);
      CHECK(std::fabs(got[i] - want) <= 0.02 * std::fabs(want));  // 8 (bf16) / 11 (f16) bits
    }
    CHECK((a > b).to_vector<bool>() == std::vector<bool>{true, false, true, true});
    CHECK((a + b.to(octo::kFloat32)).dtype() == octo::kFloat32);
    auto r = octo::rand({1000}, {.dtype = dt}).to(octo::kFloat32).to_vector<float>();
    for (float x : r) REQUIRE((x >= 0.0f && x <= 1.0f));
  }
}
