// Tests for the elementwise ops' gradients (gradcheck in float64), in-place rules and dropout.
#include <catch2/catch.hpp>

#include <octo/octo.h>

#include <cmath>
#include <functional>
#include <random>

using octo::Shape;
using octo::Tensor;
using octo::autograd::gradcheck;
using octo::autograd::TensorList;

namespace {

/// A float64 leaf with values uniform in [lo, hi) (std::mt19937, independent of octo's RNG).
Tensor leaf(const Shape& shape, uint32_t seed, double lo = -2.0, double hi = 2.0) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(static_cast<size_t>(octo::detail::shape_numel(shape)));
  for (double& x : v) x = dist(gen);
  return octo::tensor(v, shape, {.dtype = octo::kFloat64, .requires_grad = true});
}

/// A non-contiguous float64 leaf of `shape` (2-d): the transpose of a contiguous tensor.
Tensor transposed_leaf(const Shape& shape, uint32_t seed, double lo = -2.0, double hi = 2.0) {
  Tensor base = leaf({shape[1], shape[0]}, seed, lo, hi).detach();
  Tensor t = base.t();
  t.requires_grad_(true);
  return t;
}

using Unary = std::function<Tensor(const Tensor&)>;
using Binary = std::function<Tensor(const Tensor&, const Tensor&)>;

void check_unary_grad(const char* name, const Unary& f, double lo, double hi) {
  INFO(name);
  uint32_t seed = 11;
  for (const Shape& shape : std::vector<Shape>{{}, {1}, {5}, {2, 3}, {2, 1, 3}}) {
    Tensor x = leaf(shape, seed++, lo, hi);
    CHECK(gradcheck([&](const TensorList& in) { return f(in[0]); }, {x}));
  }
  Tensor xt = transposed_leaf({3, 4}, seed++, lo, hi);
  CHECK(gradcheck([&](const TensorList& in) { return f(in[0]); }, {xt}));
}

}  // namespace

TEST_CASE("gradcheck: unary math functions") {
  check_unary_grad(
      "affine", [](const Tensor& x) { return octo::affine(x, -2.5, 0.75); }, -2, 2);
  check_unary_grad(
      "neg", [](const Tensor& x) { return -x; }, -2, 2);
  check_unary_grad(
      "abs", [](const Tensor& x) { return octo::abs(x); }, 0.1, 2);
  check_unary_grad(
      "abs negative", [](const Tensor& x) { return octo::abs(x); }, -2, -0.1);
  check_unary_grad(
      "exp", [](const Tensor& x) { return octo::exp(x); }, -2, 2);
  check_unary_grad(
      "log", [](const Tensor& x) { return octo::log(x); }, 0.2, 3);
  check_unary_grad(
      "log1p", [](const Tensor& x) { return octo::log1p(x); }, -0.5, 3);
  check_unary_grad(
      "expm1", [](const Tensor& x) { return octo::expm1(x); }, -2, 2);
  check_unary_grad(
      "sqrt", [](const Tensor& x) { return octo::sqrt(x); }, 0.2, 3);
  check_unary_grad(
      "rsqrt", [](const Tensor& x) { return octo::rsqrt(x); }, 0.3, 3);
  check_unary_grad(
      "sin", [](const Tensor& x) { return octo::sin(x); }, -3, 3);
  check_unary_grad(
      "cos", [](const Tensor& x) { return octo::cos(x); }, -3, 3);
  check_unary_grad(
      "square", [](const Tensor& x) { return octo::square(x); }, -2, 2);
  check_unary_grad(
      "reciprocal", [](const Tensor& x) { return octo::reciprocal(x); }, 0.3, 3);
  check_unary_grad(
      "erf", [](const Tensor& x) { return octo::erf(x); }, -2, 2);
  check_unary_grad(
      "pow 3", [](const Tensor& x) { return octo::pow(x, 3); }, -2, 2);
  check_unary_grad(
      "pow 2.5", [](const Tensor& x) { return x.pow(2.5); }, 0.2, 2);
  check_unary_grad(
      "pow -0.5", [](const Tensor& x) { return x.pow(-0.5); }, 0.3, 2);
  check_unary_grad(
      "x + 2", [](const Tensor& x) { return x + 2; }, -2, 2);
  check_unary_grad(
      "x - 1.5", [](const Tensor& x) { return x - 1.5; }, -2, 2);
  check_unary_grad(
      "3 - x", [](const Tensor& x) { return 3 - x; }, -2, 2);
  check_unary_grad(
      "x * 3", [](const Tensor& x) { return x * 3; }, -2, 2);
  check_unary_grad(
      "-0.5 * x", [](const Tensor& x) { return -0.5 * x; }, -2, 2);
  check_unary_grad(
      "x / 4", [](const Tensor& x) { return x / 4; }, -2, 2);
  check_unary_grad(
      "2 / x", [](const Tensor& x) { return 2 / x; }, 0.5, 2);
}

TEST_CASE("gradcheck: activations") {
  check_unary_grad(
      "relu +", [](const Tensor& x) { return octo::relu(x); }, 0.1, 2);
  check_unary_grad(
      "relu -", [](const Tensor& x) { return x.relu(); }, -2, -0.1);
  check_unary_grad(
      "leaky_relu +", [](const Tensor& x) { return octo::leaky_relu(x, 0.1); }, 0.1, 2);
  check_unary_grad(
      "leaky_relu -", [](const Tensor& x) { return octo::leaky_relu(x, 0.1); }, -2, -0.1);
  check_unary_grad(
      "gelu", [](const Tensor& x) { return octo::gelu(x); }, -3, 3);
  check_unary_grad(
      "silu", [](const Tensor& x) { return octo::silu(x); }, -4, 4);
  check_unary_grad(
      "sigmoid", [](const Tensor& x) { return octo::sigmoid(x); }, -4, 4);
  check_unary_grad(
      "softplus", [](const Tensor& x) { return octo::softplus(x); }, -4, 4);
  check_unary_grad(
      "softplus linear part", [](const Tensor& x) { return octo::softplus(x); }, 21, 30);
  check_unary_grad(
      "softplus beta 2 threshold 1", [](const Tensor& x) { return octo::softplus(x, 2, 1); }, -2,
      2);
  check_unary_grad(
      "tanh", [](const Tensor& x) { return x.tanh(); }, -3, 3);
  check_unary_grad(
      "exp method", [](const Tensor& x) { return x.exp(); }, -1, 1);
  check_unary_grad(
      "log method", [](const Tensor& x) { return x.log(); }, 0.5, 2);
  check_unary_grad(
      "sqrt method", [](const Tensor& x) { return x.sqrt(); }, 0.5, 2);
  check_unary_grad(
      "sigmoid method", [](const Tensor& x) { return x.sigmoid(); }, -2, 2);
  check_unary_grad(
      "abs method", [](const Tensor& x) { return x.abs().neg(); }, 0.5, 2);
}

TEST_CASE("relu's gradient is 0 for negative and 1 for positive inputs") {
  Tensor x =
      octo::tensor({-2, -0.5, 0.5, 3}, {4}, {.dtype = octo::kFloat64, .requires_grad = true});
  octo::relu(x).backward(octo::ones({4}, {.dtype = octo::kFloat64}));
  CHECK(x.grad().to_vector<double>() == std::vector<double>{0, 0, 1, 1});
}

TEST_CASE("gradcheck: binary ops with broadcasting and non-contiguous inputs") {
  struct Op {
    const char* name;
    Binary f;
    double lo_a, hi_a, lo_b, hi_b;
  };
  const std::vector<Op> ops = {
      {"add", [](const Tensor& a, const Tensor& b) { return a + b; }, -2, 2, -2, 2},
      {"sub", [](const Tensor& a, const Tensor& b) { return a - b; }, -2, 2, -2, 2},
      {"mul", [](const Tensor& a, const Tensor& b) { return a * b; }, -2, 2, -2, 2},
      {"div", [](const Tensor& a, const Tensor& b) { return a / b; }, -2, 2, 0.5, 2},
      {"add alpha", [](const Tensor& a, const Tensor& b) { return octo::add(a, b, -1.5); }, -2, 2,
       -2, 2},
      {"sub alpha", [](const Tensor& a, const Tensor& b) { return octo::sub(a, b, 2); }, -2, 2, -2,
       2},
      {"pow", [](const Tensor& a, const Tensor& b) { return octo::pow(a, b); }, 0.5, 2, -2, 2},
      {"methods", [](const Tensor& a, const Tensor& b) { return a.mul(b).add(a).sub(b).div(b); },
       -2, 2, 0.5, 2},
  };
  const std::vector<std::pair<Shape, Shape>> shapes = {{{2, 3}, {2, 3}},    {{2, 3}, {3}},
                                                       {{3, 1}, {1, 4}},    {{}, {2, 2}},
                                                       {{2, 1, 3}, {4, 1}}, {{1}, {3}}};
  uint32_t seed = 40;
  for (const auto& op : ops) {
    INFO(op.name);
    for (const auto& [sa, sb] : shapes) {
      INFO("shapes " << octo::shape_str(sa) << " and " << octo::shape_str(sb));
      Tensor a = leaf(sa, seed++, op.lo_a, op.hi_a), b = leaf(sb, seed++, op.lo_b, op.hi_b);
      CHECK(gradcheck([&](const TensorList& in) { return op.f(in[0], in[1]); }, {a, b}));
    }
    Tensor at = transposed_leaf({3, 4}, seed++, op.lo_a, op.hi_a);
    Tensor bt = transposed_leaf({3, 4}, seed++, op.lo_b, op.hi_b);
    CHECK(gradcheck([&](const TensorList& in) { return op.f(in[0], in[1]); }, {at, bt}));
    // Only one input needs a gradient; the other is a constant.
    Tensor c = leaf({3, 4}, seed++, op.lo_b, op.hi_b).detach();
    CHECK(gradcheck([&](const TensorList& in) { return op.f(in[0], in[1]); }, {at, c}));
  }
}

TEST_CASE("gradcheck: pow with a zero base and non-negative exponent") {
  Tensor a = octo::tensor({0.0, 0.5, 1.5}, {3}, {.dtype = octo::kFloat64, .requires_grad = true});
  Tensor e = octo::tensor({2.0, 3.0, -1.0}, {3}, {.dtype = octo::kFloat64, .requires_grad = true});
  (octo::pow(a, e)).backward(octo::ones({3}, {.dtype = octo::kFloat64}));
  auto ge = e.grad().to_vector<double>();
  CHECK(ge[0] == 0.0);  // d/de 0^e is taken as 0, not NaN
  CHECK(ge[1] == Approx(std::pow(0.5, 3.0) * std::log(0.5)));
  auto ga = a.grad().to_vector<double>();
  CHECK(ga[0] == 0.0);
  CHECK(ga[2] == Approx(-1.0 / (1.5 * 1.5)));
}

TEST_CASE("gradcheck: maximum, minimum, where, clamp") {
  // Random values, so no ties at the kinks.
  Tensor a = leaf({3, 4}, 1), b = leaf({4}, 2);
  CHECK(gradcheck([](const TensorList& in) { return octo::maximum(in[0], in[1]); }, {a, b}));
  CHECK(gradcheck([](const TensorList& in) { return octo::minimum(in[0], in[1]); }, {a, b}));
  Tensor at = transposed_leaf({3, 4}, 3);
  CHECK(gradcheck([](const TensorList& in) { return octo::maximum(in[0], in[1]); }, {at, a}));

  Tensor cond = leaf({2, 1, 4}, 4).detach() > octo::zeros({});
  Tensor x = leaf({3, 1}, 5), y = leaf({2, 3, 4}, 6);
  CHECK(gradcheck([&](const TensorList& in) { return octo::where(cond, in[0], in[1]); }, {x, y}));
  CHECK(gradcheck([&](const TensorList& in) { return octo::where(cond, in[0], in[1]); }, {y, x}));

  // Inputs kept away from the bounds, where the function has a kink.
  Tensor c = octo::tensor({-2.0, -0.7, -0.2, 0.1, 0.4, 0.9, 1.7}, {7},
                          {.dtype = octo::kFloat64, .requires_grad = true});
  CHECK(gradcheck([](const TensorList& in) { return octo::clamp(in[0], -0.5, 0.5); }, {c}));
  CHECK(gradcheck([](const TensorList& in) { return octo::clamp_min(in[0], 0.0); }, {c}));
  CHECK(gradcheck([](const TensorList& in) { return octo::clamp_max(in[0], 0.0); }, {c}));
}

TEST_CASE("maximum and where send the gradient to the chosen input") {
  auto opts = octo::TensorOptions{.dtype = octo::kFloat64, .requires_grad = true};
  Tensor a = octo::tensor({1, 5, 3}, {3}, opts), b = octo::tensor({4, 2, 3}, {3}, opts);
  octo::maximum(a, b).backward(octo::ones({3}, {.dtype = octo::kFloat64}));
  CHECK(a.grad().to_vector<double>() == std::vector<double>{0, 1, 0.5});  // ties split evenly
  CHECK(b.grad().to_vector<double>() == std::vector<double>{1, 0, 0.5});

  Tensor x = octo::tensor({1, 2, 3}, {3}, opts), y = octo::tensor({7}, {1}, opts);
  Tensor cond = octo::tensor({1, 0, 1}).to(octo::kBool);
  octo::where(cond, x, y).backward(octo::full({3}, 2.0, {.dtype = octo::kFloat64}));
  CHECK(x.grad().to_vector<double>() == std::vector<double>{2, 0, 2});
  CHECK(y.grad().to_vector<double>() == std::vector<double>{2});  // summed over the broadcast

  Tensor c = octo::tensor({-1, 0.5, 2}, {3}, opts);
  octo::clamp(c, 0, 1).backward(octo::ones({3}, {.dtype = octo::kFloat64}));
  CHECK(c.grad().to_vector<double>() == std::vector<double>{0, 1, 0});
}

TEST_CASE("zero-gradient functions and non-differentiable results") {
  auto opts = octo::TensorOptions{.dtype = octo::kFloat64, .requires_grad = true};
  Tensor x = octo::tensor({-1.5, 0.3, 2.7}, {3}, opts);
  Tensor y = octo::floor(x) + octo::ceil(x) + octo::round(x) + octo::sign(x) + x;
  y.backward(octo::ones({3}, {.dtype = octo::kFloat64}));
  CHECK(x.grad().to_vector<double>() == std::vector<double>{1, 1, 1});
  // Comparisons give bool tensors that never require grad.
  Tensor m = x > octo::zeros({}, {.dtype = octo::kFloat64});
  CHECK(m.dtype() == octo::kBool);
  CHECK(!m.requires_grad());
  // Integer results cannot require grad either.
  CHECK(!(octo::ones({2}, {.dtype = octo::kInt64}) + 1).requires_grad());
  // Mixed-precision inputs get gradients in their own dtype.
  Tensor f = octo::ones({3}, {.dtype = octo::kFloat32, .requires_grad = true});
  Tensor d = octo::full({3}, 2.0, opts);
  Tensor z = f * d;
  CHECK(z.dtype() == octo::kFloat64);
  z.backward(octo::ones({3}, {.dtype = octo::kFloat64}));
  CHECK(f.grad().dtype() == octo::kFloat32);
  CHECK(f.grad().to_vector<float>() == std::vector<float>{2, 2, 2});
  CHECK(d.grad().to_vector<double>() == std::vector<double>{1, 1, 1});
}

TEST_CASE("in-place ops: leaves are protected, histories are rewritten") {
  auto opts = octo::TensorOptions{.dtype = octo::kFloat64, .requires_grad = true};
  Tensor w = octo::ones({3}, opts);
  CHECK_THROWS_WITH(w.add_(octo::ones({3}, {.dtype = octo::kFloat64})),
                    Catch::Contains("leaf Variable that requires grad"));
  CHECK_THROWS_WITH(w.mul_(2.0), Catch::Contains("in-place"));
  Tensor w2 = w;
  CHECK_THROWS(w2 += octo::ones({3}, {.dtype = octo::kFloat64}));
  {
    octo::NoGradGuard no_grad;  // allowed without grad mode, like an optimizer step
    w.add_(octo::ones({3}, {.dtype = octo::kFloat64}), -0.5);
  }
  CHECK(w.to_vector<double>() == std::vector<double>{0.5, 0.5, 0.5});

  // On a non-leaf, add_ and mul_ are recorded: y = (x * 2 + b) * c.
  Tensor x = leaf({2, 3}, 21), b = leaf({3}, 22), c = leaf({2, 3}, 23);
  CHECK(gradcheck(
      [](const TensorList& in) {
        Tensor y = in[0] * 2;
        y.add_(in[1]);
        y.mul_(in[2]);
        y.mul_(0.5);
        y.sub_(in[1]);
        return y;
      },
      {x, b, c}));
  CHECK(gradcheck(
      [](const TensorList& in) {
        Tensor y = in[0].clone();
        y += in[1];
        y *= in[2];
        y -= in[0];
        return y;
      },
      {x, b, c}));
  CHECK(gradcheck(
      [](const TensorList& in) {
        Tensor y = in[0].clone();
        y.add_(in[1], 2.5);
        return y;
      },
      {x, b}));
  // Self as the other operand: add_ needs no saved value; mul_ lost the factor it saved.
  CHECK(gradcheck(
      [](const TensorList& in) {
        Tensor y = in[0] * 1.5;
        y.add_(y);
        y.add_(y.t().t());
        return y;
      },
      {x}));
  Tensor y = x * 1.5;
  y.mul_(y);
  CHECK_THROWS_WITH(y.sum().backward(), Catch::Contains("modified by an inplace operation"));
  Tensor ok = x * 1.5;
  ok.mul_(ok.clone());
  ok.sum().backward();
  auto gx = x.grad().to_vector<double>(), vx = x.to_vector<double>();
  for (size_t i = 0; i < vx.size(); ++i)
    CHECK(gx[i] == Approx(2 * 1.5 * 1.5 * vx[i]));  // d(1.5x)^2

  // A saved tensor changed in place makes backward fail (the version counter).
  Tensor v = leaf({3}, 24);
  Tensor e = octo::exp(v);
  Tensor s = e * 2;
  e.add_(octo::ones({3}, {.dtype = octo::kFloat64}));  // exp saved its output
  CHECK_THROWS_WITH(s.sum().backward(), Catch::Contains("modified by an inplace operation") ||
                                            Catch::Contains("in-place") ||
                                            Catch::Contains("inplace"));
}

TEST_CASE("dropout: statistics, scaling, gradient and reproducibility") {
  octo::manual_seed(2024);
  const int64_t n = 100000;
  Tensor x = octo::full({n}, 3.0, {.dtype = octo::kFloat64, .requires_grad = true});
  const double p = 0.3;
  Tensor y = octo::dropout(x, p, true);
  auto vy = y.to_vector<double>();
  int64_t zeros = 0;
  for (double v : vy) {
    if (v == 0.0) {
      ++zeros;
    } else {
      REQUIRE(v == Approx(3.0 / (1 - p)));
    }
  }
  CHECK(std::fabs(double(zeros) / n - p) < 0.01);
  // Backward: grad * mask / (1 - p), i.e. y / x elementwise here.
  y.backward(octo::ones({n}, {.dtype = octo::kFloat64}));
  auto g = x.grad().to_vector<double>();
  for (int64_t i = 0; i < n; i += 101) CHECK(g[i] == Approx(vy[i] / 3.0));

  // Same seed, same mask; float32 works too.
  octo::manual_seed(9);
  auto m1 = octo::dropout(octo::ones({1000}), 0.5).to_vector<float>();
  octo::manual_seed(9);
  auto m2 = octo::dropout(octo::ones({1000}), 0.5).to_vector<float>();
  CHECK(m1 == m2);

  // gradcheck with a fixed seed inside the function (the mask is the same at every call).
  Tensor z = leaf({4, 5}, 31);
  CHECK(gradcheck(
      [](const TensorList& in) {
        octo::manual_seed(77);
        return octo::dropout(in[0], 0.4, true);
      },
      {z}));
  CHECK(gradcheck(
      [](const TensorList& in) {
        octo::manual_seed(78);
        return octo::dropout(in[0].t(), 0.5, true);
      },
      {z}));
}

TEST_CASE("dropout: p = 0, eval mode, p = 1, empty input, errors") {
  Tensor x = octo::ones({4}, {.requires_grad = true});
  Tensor y0 = octo::dropout(x, 0.0, true);
  CHECK(y0.is_alias_of(x));
  CHECK(y0.grad_fn() == x.grad_fn());  // returned unchanged, nothing recorded
  Tensor ye = octo::dropout(x, 0.5, false);
  CHECK(ye.is_alias_of(x));
  Tensor y1 = octo::dropout(x, 1.0, true);
  CHECK(y1.to_vector<float>() == std::vector<float>{0, 0, 0, 0});
  y1.backward(octo::ones({4}));
  CHECK(x.grad().to_vector<float>() == std::vector<float>{0, 0, 0, 0});
  CHECK(octo::dropout(octo::ones({0, 3}), 0.5).numel() == 0);
  CHECK_THROWS_AS(octo::dropout(x, -0.1), octo::ValueError);
  CHECK_THROWS_WITH(octo::dropout(x, 1.5), Catch::Contains("dropout") && Catch::Contains("1.5"));
  CHECK_THROWS_AS(octo::dropout(octo::ones({2}, {.dtype = octo::kInt64}), 0.5), octo::ValueError);
  // On another virtual device the mask comes from that device's generator.
  Tensor d = octo::ones({1000}, {.device = octo::Device("cpu:1")});
  Tensor yd = octo::dropout(d, 0.5);
  CHECK(yd.device() == octo::Device("cpu:1"));
  int64_t kept = 0;
  for (float v : yd.to_vector<float>()) kept += v != 0.0f;
  CHECK(std::abs(kept - 500) < 80);
}
