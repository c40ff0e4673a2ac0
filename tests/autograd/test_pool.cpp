// Tests for the pool family (autograd layer): max/avg/adaptive pooling checks, results, gradients.
#include <catch2/catch.hpp>

#include <octo/octo.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

using Catch::Contains;
using octo::Shape;
using octo::Tensor;
using octo::autograd::gradcheck;
using octo::autograd::TensorList;

namespace {

Tensor rnd(const Shape& shape, uint32_t seed, bool requires_grad = false) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<double> v(static_cast<size_t>(octo::detail::shape_numel(shape)));
  for (double& x : v) x = dist(gen);
  Tensor t = octo::tensor(v, shape, {.dtype = octo::kFloat64});
  if (requires_grad) t.requires_grad_();
  return t;
}

/// Distinct values (a shuffled 0.1 * [0, n)): max pooling has no ties, so it is differentiable.
Tensor distinct(const Shape& shape, uint32_t seed, bool requires_grad = true) {
  std::vector<double> v(static_cast<size_t>(octo::detail::shape_numel(shape)));
  std::iota(v.begin(), v.end(), 0.0);
  std::shuffle(v.begin(), v.end(), std::mt19937(seed));
  for (double& x : v) x *= 0.1;
  Tensor t = octo::tensor(v, shape, {.dtype = octo::kFloat64});
  if (requires_grad) t.requires_grad_();
  return t;
}

/// Adaptive average pooling by brute force: window i spans [floor(i*H/out), ceil((i+1)*H/out)).
std::vector<double> ref_adaptive(const Tensor& x, int64_t oh, int64_t ow) {
  const int64_t P = x.size(0) * x.size(1), H = x.size(2), W = x.size(3);
  const auto xv = x.to_vector<double>();
  std::vector<double> out;
  for (int64_t p = 0; p < P; ++p)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j) {
        const int64_t h0 = (i * H) / oh, h1 = ((i + 1) * H + oh - 1) / oh;
        const int64_t w0 = (j * W) / ow, w1 = ((j + 1) * W + ow - 1) / ow;
        double s = 0;
        for (int64_t h = h0; h < h1; ++h)
          for (int64_t w = w0; w < w1; ++w) s += xv[static_cast<size_t>((p * H + h) * W + w)];
        out.push_back(s / static_cast<double>((h1 - h0) * (w1 - w0)));
      }
  return out;
}

void require_close(const Tensor& got, const std::vector<double>& want, double tol = 1e-12) {
  const auto g = got.to_vector<double>();
  REQUIRE(g.size() == want.size());
  for (size_t i = 0; i < g.size(); ++i) REQUIRE(std::fabs(g[i] - want[i]) <= tol);
}

}  // namespace

TEST_CASE("max_pool2d computes window maxima with PyTorch's output sizes", "[pool][autograd]") {
  Tensor x = rnd({2, 3, 7, 5}, 1);
  auto xv = x.to_vector<double>();
  // kernel 3, stride 2, padding 1, ceil_mode: 7 -> 4 rows, 5 -> 3 columns
  Tensor y = octo::max_pool2d(x, {3, 3}, {2, 2}, {1, 1}, {1, 1}, true);
  REQUIRE(y.sizes() == Shape{2, 3, 4, 3});
  auto yv = y.to_vector<double>();
  for (int64_t p = 0; p < 6; ++p)
    for (int64_t oh = 0; oh < 4; ++oh)
      for (int64_t ow = 0; ow < 3; ++ow) {
        double m = -INFINITY;
        for (int64_t h = std::max<int64_t>(0, 2 * oh - 1); h < std::min<int64_t>(7, 2 * oh + 2);
             ++h)
          for (int64_t w = std::max<int64_t>(0, 2 * ow - 1); w < std::min<int64_t>(5, 2 * ow + 2);
               ++w)
            m = std::max(m, xv[static_cast<size_t>((p * 7 + h) * 5 + w)]);
        REQUIRE(yv[static_cast<size_t>((p * 4 + oh) * 3 + ow)] == m);
      }
  // Here floor mode gives the same size; stride {0, 0} means the kernel size.
  REQUIRE(octo::max_pool2d(x, {3, 3}, {2, 2}, {1, 1}).sizes() == Shape{2, 3, 4, 3});
  REQUIRE(octo::max_pool2d(x, {2, 2}).sizes() == Shape{2, 3, 3, 2});
  REQUIRE(octo::max_pool2d(x, {2, 2}, {0, 0}, {0, 0}, {1, 1}, true).sizes() == Shape{2, 3, 4, 3});
  // ceil_mode's last window may not start in the right padding: 5 with k=2, s=2, p=1 -> 3
  REQUIRE(octo::max_pool2d(rnd({1, 1, 5, 5}, 2), {2, 2}, {2, 2}, {1, 1}, {1, 1}, true).sizes() ==
          Shape{1, 1, 3, 3});
  // dilation 2: effective kernel 5
  REQUIRE(octo::max_pool2d(x, {3, 3}, {1, 1}, {0, 0}, {2, 2}).sizes() == Shape{2, 3, 3, 1});
  // unbatched input, float32
  Tensor y3 = octo::max_pool2d(x[1].to(octo::kFloat32), {2, 2});
  REQUIRE(y3.sizes() == Shape{3, 3, 2});
  REQUIRE(y3.dtype() == octo::kFloat32);
  require_close(y3, octo::max_pool2d(x, {2, 2})[1].to_vector<double>(), 1e-6);
}

TEST_CASE("avg_pool2d averages windows with PyTorch's divisors", "[pool][autograd]") {
  Tensor x = rnd({1, 2, 5, 6}, 3);
  auto xv = x.to_vector<double>();
  for (bool include : {true, false}) {
    // kernel 3, stride 2, padding 1: 5 -> 3 rows, 6 -> 3 columns
    Tensor y = octo::avg_pool2d(x, {3, 3}, {2, 2}, {1, 1}, false, include);
    REQUIRE(y.sizes() == Shape{1, 2, 3, 3});
    auto yv = y.to_vector<double>();
    for (int64_t p = 0; p < 2; ++p)
      for (int64_t oh = 0; oh < 3; ++oh)
        for (int64_t ow = 0; ow < 3; ++ow) {
          double s = 0;
          int64_t n = 0;
          for (int64_t h = 2 * oh - 1; h < 2 * oh + 2; ++h)
            for (int64_t w = 2 * ow - 1; w < 2 * ow + 2; ++w)
              if (h >= 0 && h < 5 && w >= 0 && w < 6)
                s += xv[static_cast<size_t>((p * 5 + h) * 6 + w)], ++n;
          REQUIRE(yv[static_cast<size_t>((p * 3 + oh) * 3 + ow)] ==
                  Approx(s / (include ? 9.0 : static_cast<double>(n))));
        }
  }
  REQUIRE(octo::avg_pool2d(x, {2, 2}).sizes() == Shape{1, 2, 2, 3});
  REQUIRE(octo::avg_pool2d(x, {2, 2}, {0, 0}, {0, 0}, true).sizes() == Shape{1, 2, 3, 3});
  REQUIRE(octo::avg_pool2d(x[0], {2, 2}).sizes() == Shape{2, 2, 3});
}

TEST_CASE("adaptive_avg_pool2d follows torch's window rule", "[pool][autograd]") {
  Tensor x = rnd({2, 3, 7, 5}, 4);
  for (auto [oh, ow] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 1}, {7, 5}, {3, 2}, {7, 1}, {2, 5}, {4, 4}, {9, 6}}) {
    INFO(oh << "x" << ow);
    Tensor y = octo::adaptive_avg_pool2d(x, {oh, ow});
    REQUIRE(y.sizes() == Shape{2, 3, oh, ow});
    require_close(y, ref_adaptive(x, oh, ow));
  }
  Tensor x6 = rnd({1, 2, 6, 6}, 5);
  require_close(octo::adaptive_avg_pool2d(x6, {3, 2}), ref_adaptive(x6, 3, 2));
  Tensor y3 = octo::adaptive_avg_pool2d(x6[0], {1, 1});  // unbatched
  REQUIRE(y3.sizes() == Shape{2, 1, 1});
  require_close(y3, ref_adaptive(x6, 1, 1));
  // An empty batch: no windows to average, however many are asked for; an empty gradient.
  Tensor e = rnd({0, 3, 7, 5}, 6).requires_grad_();
  Tensor ye = octo::adaptive_avg_pool2d(e, {3, int64_t{1} << 40});
  CHECK(ye.sizes() == Shape{0, 3, 3, int64_t{1} << 40});
  ye.sum().backward();
  CHECK(e.grad().sizes() == e.sizes());
}

TEST_CASE("pooling ops reject bad arguments", "[pool][autograd]") {
  Tensor x = rnd({1, 2, 5, 5}, 6);
  REQUIRE_THROWS_AS(octo::max_pool2d(rnd({5, 5}, 1), {2, 2}), octo::ValueError);
  REQUIRE_THROWS_WITH(octo::max_pool2d(rnd({5, 5}, 1), {2, 2}),
                      Contains("max_pool2d: expected a 3-d or 4-d"));
  REQUIRE_THROWS_WITH(octo::avg_pool2d(rnd({1, 0, 5, 5}, 1), {2, 2}),
                      Contains("non-zero channels"));
  REQUIRE_THROWS_WITH(octo::max_pool2d(x, {0, 2}),
                      Contains("kernel_size must be greater than zero"));
  REQUIRE_THROWS_WITH(octo::max_pool2d(x, {2, 2}, {-1, 1}), Contains("stride must be greater"));
  REQUIRE_THROWS_WITH(octo::max_pool2d(x, {2, 2}, {1, 1}, {0, 0}, {0, 1}),
                      Contains("dilation must be greater"));
  REQUIRE_THROWS_AS(octo::max_pool2d(x, {3, 3}, {1, 1}, {2, 2}), octo::ValueError);
  REQUIRE_THROWS_WITH(octo::avg_pool2d(x, {3, 3}, {1, 1}, {2, 2}),
                      Contains("at most half of kernel size"));
  REQUIRE_THROWS_WITH(octo::max_pool2d(x, {6, 6}), Contains("is too small"));
  REQUIRE_THROWS_WITH(octo::max_pool2d(x, {3, 3}, {1, 1}, {0, 0}, {3, 3}),
                      Contains("is too small"));
  Tensor xi = octo::zeros({1, 1, 4, 4}, {.dtype = octo::kInt64});
  REQUIRE_THROWS_AS(octo::max_pool2d(xi, {2, 2}), octo::ValueError);
  REQUIRE_THROWS_WITH(octo::avg_pool2d(xi, {2, 2}), Contains("expected floating-point tensors"));
  REQUIRE_THROWS_WITH(octo::adaptive_avg_pool2d(xi, {3, 3}),
                      Contains("adaptive_avg_pool2d: expected floating-point tensors"));
  REQUIRE_THROWS_WITH(octo::adaptive_avg_pool2d(x, {0, 2}),
                      Contains("output_size must be positive"));
  REQUIRE_THROWS_WITH(octo::adaptive_avg_pool2d(rnd({2, 5}, 1), {1, 1}),
                      Contains("adaptive_avg_pool2d: expected a 3-d or 4-d"));
}

TEST_CASE("pooling stays on the input's device", "[pool][autograd]") {
  octo::Device d1("cpu:1");
  Tensor x = distinct({1, 2, 4, 4}, 7, false).to(d1);
  REQUIRE(octo::max_pool2d(x, {2, 2}).device() == d1);
  REQUIRE(octo::avg_pool2d(x, {2, 2}).device() == d1);
  REQUIRE(octo::adaptive_avg_pool2d(x, {2, 2}).device() == d1);
}

TEST_CASE("max_pool2d routes the gradient to each window's maximum", "[pool][autograd]") {
  // Overlapping windows: an element that is the max of several windows gets their sum.
  Tensor x = distinct({1, 1, 4, 4}, 8);
  Tensor y = octo::max_pool2d(x, {2, 2}, {1, 1});
  y.backward(octo::ones_like(y));
  auto xv = x.to_vector<double>();
  std::vector<double> want(16, 0.0);
  for (int64_t oh = 0; oh < 3; ++oh)
    for (int64_t ow = 0; ow < 3; ++ow) {
      int64_t best = oh * 4 + ow;
      for (int64_t h = oh; h < oh + 2; ++h)
        for (int64_t w = ow; w < ow + 2; ++w)
          if (xv[h * 4 + w] > xv[best]) best = h * 4 + w;
      want[best] += 1.0;
    }
  REQUIRE(x.grad().to_vector<double>() == want);
}

TEST_CASE("max_pool2d passes gradcheck", "[pool][autograd][gradcheck]") {
  struct C {
    Shape x;
    std::array<int64_t, 2> k, s, p, d;
    bool ceil;
  };
  for (const C& c : std::vector<C>{{{1, 2, 4, 4}, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false},
                                   {{2, 1, 5, 6}, {3, 2}, {2, 1}, {1, 1}, {1, 1}, true},
                                   {{1, 2, 7, 6}, {2, 3}, {1, 2}, {1, 0}, {2, 2}, false},
                                   {{1, 1, 5, 5}, {2, 2}, {2, 2}, {1, 1}, {1, 1}, true}}) {
    Tensor x = distinct(c.x, 9);
    REQUIRE(gradcheck(
        [&](const TensorList& in) { return octo::max_pool2d(in[0], c.k, c.s, c.p, c.d, c.ceil); },
        {x}));
  }
  // non-contiguous input
  Tensor xt = distinct({1, 5, 4, 2}, 10);
  REQUIRE(gradcheck(
      [](const TensorList& in) {
        return octo::max_pool2d(in[0].permute({0, 3, 2, 1}), {2, 2}, {1, 2});
      },
      {xt}));
}

TEST_CASE("avg_pool2d passes gradcheck", "[pool][autograd][gradcheck]") {
  struct C {
    Shape x;
    std::array<int64_t, 2> k, s, p;
    bool ceil, include;
  };
  for (const C& c : std::vector<C>{{{1, 2, 4, 4}, {2, 2}, {2, 2}, {0, 0}, false, true},
                                   {{2, 1, 5, 6}, {3, 2}, {2, 1}, {1, 1}, true, true},
                                   {{1, 2, 5, 5}, {3, 3}, {2, 2}, {1, 1}, true, false},
                                   {{1, 1, 6, 3}, {2, 3}, {3, 1}, {1, 1}, false, false}}) {
    Tensor x = rnd(c.x, 11, true);
    REQUIRE(gradcheck(
        [&](const TensorList& in) {
          return octo::avg_pool2d(in[0], c.k, c.s, c.p, c.ceil, c.include);
        },
        {x}));
  }
  Tensor xt = rnd({1, 4, 5, 2}, 12, true);
  REQUIRE(gradcheck(
      [](const TensorList& in) {
        return octo::avg_pool2d(in[0].transpose(1, 3), {2, 2}, {1, 1}, {1, 1});
      },
      {xt}));
}

TEST_CASE("adaptive_avg_pool2d passes gradcheck", "[pool][autograd][gradcheck]") {
  Tensor x = rnd({2, 2, 6, 4}, 13, true);
  for (auto [oh, ow] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {3, 2}, {4, 3}, {5, 5}}) {
    INFO(oh << "x" << ow);
    REQUIRE(gradcheck(
        [oh = oh, ow = ow](const TensorList& in) {
          return octo::adaptive_avg_pool2d(in[0], {oh, ow});
        },
        {x}));
  }
  Tensor xt = rnd({1, 5, 3, 2}, 14, true);
  REQUIRE(gradcheck(
      [](const TensorList& in) {
        return octo::adaptive_avg_pool2d(in[0].transpose(1, 3), {2, 2});
      },
      {xt}));
}
