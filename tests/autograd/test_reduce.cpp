// Gradients of the reductions (sum, mean, prod, max, min, var, std, logsumexp, sum_to).
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include <octo/octo.h>

using octo::Shape;
using octo::Tensor;
using octo::autograd::gradcheck;
using octo::autograd::TensorList;

namespace {

Tensor leaf(const Shape& shape) {
  return octo::randn(shape, {.dtype = octo::kFloat64, .requires_grad = true});
}

/// A float64 leaf of `shape` whose memory is not contiguous (a transposed [.., b, a] buffer).
Tensor strided_leaf(const Shape& shape) {
  Shape rev(shape.rbegin(), shape.rend());
  Shape perm;
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) perm.push_back(d);
  Tensor x = octo::randn(rev, {.dtype = octo::kFloat64}).permute(perm);
  x.requires_grad_();
  return x;
}

/// Leaves of several shapes and layouts for one test.
std::vector<Tensor> inputs() {
  return {leaf({5}),
          leaf({3, 4}),
          leaf({2, 3, 4}),
          strided_leaf({3, 4}),
          strided_leaf({2, 3, 4}),
          leaf({4, 3}).slice(1, 0, std::nullopt, 2).detach().requires_grad_()};
}

std::vector<Shape> dim_lists(int64_t ndim) {
  std::vector<Shape> lists = {{0}, {-1}, {}};
  if (ndim >= 2) lists.push_back({0, -1});
  if (ndim >= 3) lists.push_back({1});
  return lists;
}

}  // namespace

TEST_CASE("sum gradients over dims, keepdim and all") {
  for (const Tensor& x : inputs()) {
    for (const Shape& dims : dim_lists(x.dim())) {
      for (bool keepdim : {false, true}) {
        INFO("shape " << octo::shape_str(x.sizes()) << " dims " << octo::shape_str(dims)
                      << " keepdim " << keepdim);
        CHECK(
            gradcheck([&](const TensorList& in) { return octo::sum(in[0], dims, keepdim); }, {x}));
      }
    }
    CHECK(gradcheck([](const TensorList& in) { return in[0].sum(); }, {x}));
  }
  // The gradient of a full sum is ones, whatever the input's layout.
  Tensor x = strided_leaf({3, 5});
  x.sum().backward();
  CHECK(x.grad().sizes() == Shape{3, 5});
  for (double g : x.grad().contiguous().to_vector<double>()) CHECK(g == 1.0);
}

TEST_CASE("sum_to reduces broadcast dims and records nothing when shapes match") {
  Tensor x = leaf({2, 3, 4});
  for (const Shape& target : std::vector<Shape>{{4}, {3, 1}, {2, 1, 4}, {1, 3, 4}, {}, {1}}) {
    INFO("target " << octo::shape_str(target));
    Tensor s = octo::sum_to(x, target);
    CHECK(s.sizes() == target);
    CHECK(gradcheck([&](const TensorList& in) { return octo::sum_to(in[0], target); }, {x}));
  }
  Tensor same = octo::sum_to(x, {2, 3, 4});
  CHECK(same.is_alias_of(x));
  CHECK(same.grad_fn() == nullptr);  // x is a leaf: nothing was recorded
  Tensor y = x * 2.0;
  CHECK(octo::sum_to(y, y.sizes()).grad_fn() == y.grad_fn());
  // expand's backward is sum_to.
  Tensor b = leaf({3, 1});
  CHECK(gradcheck([](const TensorList& in) { return in[0].expand({2, 3, 4}) * 1.0; }, {b}));
  CHECK(gradcheck([](const TensorList& in) { return octo::sum_to(in[0], {4}); },
                  {strided_leaf({3, 4})}));
}

TEST_CASE("integer sums are not differentiable") {
  Tensor i = octo::randint(0, 5, {3});
  CHECK_FALSE(i.sum().requires_grad());
}

TEST_CASE("mean gradients") {
  for (const Tensor& x : inputs()) {
    for (const Shape& dims : dim_lists(x.dim())) {
      for (bool keepdim : {false, true}) {
        INFO("shape " << octo::shape_str(x.sizes()) << " dims " << octo::shape_str(dims));
        CHECK(
            gradcheck([&](const TensorList& in) { return octo::mean(in[0], dims, keepdim); }, {x}));
      }
    }
    CHECK(gradcheck([](const TensorList& in) { return in[0].mean(); }, {x}));
  }
}

TEST_CASE("prod gradients, with zeros in the slice") {
  for (const Tensor& x : inputs()) {
    for (int64_t d = 0; d < x.dim(); ++d) {
      for (bool keepdim : {false, true}) {
        CHECK(gradcheck([&](const TensorList& in) { return octo::prod(in[0], d, keepdim); }, {x}));
      }
    }
  }
  // Rows with no zero, one zero and two zeros.
  Tensor z = octo::tensor({1.5, -2, 3, 0, 2, 4, 0, 0, 5}, {.dtype = octo::kFloat64}).view({3, 3});
  z.requires_grad_();
  CHECK(gradcheck([](const TensorList& in) { return octo::prod(in[0], 1); }, {z}));
  octo::prod(z, 1).sum().backward();
  std::vector<double> g = z.grad().to_vector<double>();
  // d/dx_i prod = product of the others.
  CHECK(g == std::vector<double>{-6, 4.5, -3, 8, 0, 0, 0, 0, 0});
}

TEST_CASE("max and min: full reduction splits the gradient among ties") {
  for (const Tensor& x : inputs()) {
    CHECK(gradcheck([](const TensorList& in) { return in[0].max(); }, {x}));
    CHECK(gradcheck([](const TensorList& in) { return in[0].min(); }, {x}));
  }
  Tensor t = octo::tensor({1, 3, 3, 2, -1, -1}, {.dtype = octo::kFloat64, .requires_grad = true});
  t.max().backward();
  CHECK(t.grad().to_vector<double>() == std::vector<double>{0, 0.5, 0.5, 0, 0, 0});
  Tensor u = octo::tensor({1, 3, 3, 2, -1, -1}, {.dtype = octo::kFloat64, .requires_grad = true});
  u.min().backward();
  CHECK(u.grad().to_vector<double>() == std::vector<double>{0, 0, 0, 0, 0.5, 0.5});
}

TEST_CASE("max and min along a dim: the gradient goes to the returned index") {
  for (const Tensor& x : inputs()) {
    for (int64_t d = -1; d < x.dim(); ++d) {
      for (bool keepdim : {false, true}) {
        CHECK(gradcheck([&](const TensorList& in) { return octo::max(in[0], d, keepdim).first; },
                        {x}));
        CHECK(gradcheck([&](const TensorList& in) { return octo::min(in[0], d, keepdim).first; },
                        {x}));
      }
    }
  }
  Tensor t = octo::tensor({2, 7, 7, 1, 0, 1}, {.dtype = octo::kFloat64, .requires_grad = true});
  auto [values, indices] = octo::max(t.view({2, 3}), 1);
  CHECK(values.requires_grad());
  CHECK_FALSE(indices.requires_grad());
  CHECK(indices.to_vector<int64_t>() == std::vector<int64_t>{1, 0});  // 7 tie: the first
  (values * octo::tensor({10, 100}, {.dtype = octo::kFloat64})).sum().backward();
  CHECK(t.grad().to_vector<double>() == std::vector<double>{0, 10, 0, 100, 0, 0});
  // Argmax is an integer result outside the graph.
  CHECK_FALSE(octo::argmax(t, 0).requires_grad());
  CHECK(t.argmax(0).item<int64_t>() == 1);
}

TEST_CASE("var and std gradients with corrections") {
  for (const Tensor& x : inputs()) {
    for (const Shape& dims : dim_lists(x.dim())) {
      for (int64_t correction : {0, 1}) {
        for (bool keepdim : {false, true}) {
          INFO("shape " << octo::shape_str(x.sizes()) << " dims " << octo::shape_str(dims)
                        << " correction " << correction);
          CHECK(gradcheck(
              [&](const TensorList& in) { return octo::var(in[0], dims, correction, keepdim); },
              {x}));
          CHECK(gradcheck(
              [&](const TensorList& in) { return octo::std(in[0], dims, correction, keepdim); },
              {x}));
        }
      }
    }
  }
  Tensor x = octo::tensor({1, 2, 3, 4}, {.dtype = octo::kFloat64});
  CHECK(octo::var(x, {}).item<double>() == Approx(5.0 / 3.0));
  CHECK(octo::var(x, {}, 0).item<double>() == Approx(1.25));
  CHECK(octo::std(x, {}, 0).item<double>() == Approx(std::sqrt(1.25)));
  // N - correction is formed in double, as in PyTorch: no int64 overflow at the extremes.
  Tensor xg = x.detach().requires_grad_();
  Tensor v = octo::var(xg, {}, std::numeric_limits<int64_t>::min());
  CHECK(v.item<double>() == Approx(5.0 / (4.0 + 9223372036854775808.0)));  // sum of squares 5
  v.backward();
  CHECK(xg.grad().abs().max().item<double>() < 1e-15);
}

TEST_CASE("logsumexp is stable and differentiable") {
  for (const Tensor& x : inputs()) {
    for (int64_t d = -1; d < x.dim(); ++d) {
      for (bool keepdim : {false, true}) {
        CHECK(gradcheck([&](const TensorList& in) { return octo::logsumexp(in[0], d, keepdim); },
                        {x}));
      }
    }
  }
  Tensor x = octo::randn({3, 5}, {.dtype = octo::kFloat64});
  std::vector<double> v = x.to_vector<double>();
  Tensor l = octo::logsumexp(x, 1);
  CHECK(l.sizes() == Shape{3});
  for (int r = 0; r < 3; ++r) {
    double s = 0;
    for (int c = 0; c < 5; ++c) s += std::exp(v[r * 5 + c]);
    CHECK(l.to_vector<double>()[r] == Approx(std::log(s)).epsilon(1e-12));
  }
  // Large values do not overflow; -inf rows give -inf.
  double inf = std::numeric_limits<double>::infinity();
  Tensor big = octo::tensor({1000, 1000, -inf, -inf}, {.dtype = octo::kFloat64}).view({2, 2});
  std::vector<double> lb = octo::logsumexp(big, 1).to_vector<double>();
  CHECK(lb[0] == Approx(1000 + std::log(2.0)));
  CHECK(lb[1] == -inf);
  CHECK(octo::logsumexp(octo::zeros({2, 0}, {.dtype = octo::kFloat64}), 1).to_vector<double>() ==
        std::vector<double>{-inf, -inf});
  CHECK_THROWS_AS(octo::logsumexp(x, 2), octo::IndexError);
}
