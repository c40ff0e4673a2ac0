// Tests for the conv family (autograd layer): conv2d's checks, promotion, results and gradients.
#include <catch2/catch.hpp>

#include <octo/octo.h>

#include <cmath>
#include <random>
#include <vector>

using octo::Shape;
using octo::Tensor;
using octo::autograd::gradcheck;
using octo::autograd::TensorList;

namespace {

Tensor rnd(const Shape& shape, uint32_t seed, octo::DType dtype = octo::kFloat64,
           bool requires_grad = false) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<double> v(static_cast<size_t>(octo::detail::shape_numel(shape)));
  for (double& x : v) x = dist(gen);
  Tensor t = octo::tensor(v, shape, {.dtype = dtype});
  if (requires_grad) t.requires_grad_();
  return t;
}

/// Naive conv2d (stride, padding, dilation, groups) in double on a batched input.
std::vector<double> naive_conv(const Tensor& x, const Tensor& w, const Tensor& b,
                               std::array<int64_t, 2> s, std::array<int64_t, 2> p,
                               std::array<int64_t, 2> d, int64_t groups, Shape& out_shape) {
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t K = w.size(0), Cg = w.size(1), kH = w.size(2), kW = w.size(3);
  const int64_t OH = (H + 2 * p[0] - d[0] * (kH - 1) - 1) / s[0] + 1;
  const int64_t OW = (W + 2 * p[1] - d[1] * (kW - 1) - 1) / s[1] + 1;
  out_shape = {N, K, OH, OW};
  const auto xv = x.to_vector<double>(), wv = w.to_vector<double>();
  const auto bv = b.defined() ? b.to_vector<double>() : std::vector<double>(K, 0.0);
  std::vector<double> y;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double acc = bv[k];
          const int64_t g = k / (K / groups);
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t i = 0; i < kH; ++i)
              for (int64_t j = 0; j < kW; ++j) {
                int64_t h = oh * s[0] - p[0] + i * d[0], ww = ow * s[1] - p[1] + j * d[1];
                if (h >= 0 && h < H && ww >= 0 && ww < W)
                  acc += xv[((n * C + g * Cg + c) * H + h) * W + ww] *
                         wv[((k * Cg + c) * kH + i) * kW + j];
              }
          y.push_back(acc);
        }
  (void)C;
  return y;
}

void require_close(const Tensor& got, const std::vector<double>& want, const Shape& shape,
                   double tol) {
  REQUIRE(got.sizes() == shape);
  auto g = got.to_vector<double>();
  REQUIRE(g.size() == want.size());
  for (size_t i = 0; i < g.size(); ++i) REQUIRE(std::fabs(g[i] - want[i]) <= tol);
}

struct GradConfig {
  Shape x, w;
  std::array<int64_t, 2> stride, padding, dilation;
  int64_t groups;
};

}  // namespace

TEST_CASE("conv2d matches a naive convolution", "[conv][autograd]") {
  Tensor x = rnd({2, 4, 7, 6}, 1), w = rnd({6, 2, 3, 2}, 2), b = rnd({6}, 3);
  Shape shape;
  auto want = naive_conv(x, w, b, {2, 1}, {1, 2}, {1, 2}, 2, shape);
  require_close(octo::conv2d(x, w, b, {2, 1}, {1, 2}, {1, 2}, 2), want, shape, 1e-12);
  // float32 too, and without bias
  Tensor xf = x.to(octo::kFloat32), wf = w.to(octo::kFloat32);
  want = naive_conv(xf, wf, Tensor(), {1, 1}, {0, 0}, {1, 1}, 2, shape);
  Tensor yf = octo::conv2d(xf, wf, {}, {1, 1}, {0, 0}, {1, 1}, 2);
  REQUIRE(yf.dtype() == octo::kFloat32);
  require_close(yf, want, shape, 1e-5);
}

TEST_CASE("conv2d accepts unbatched input and non-contiguous tensors", "[conv][autograd]") {
  Tensor x = rnd({3, 5, 5}, 4), w = rnd({2, 3, 3, 3}, 5);
  Tensor y = octo::conv2d(x, w, {}, {1, 1}, {1, 1});
  Shape shape;
  auto want = naive_conv(x.unsqueeze(0), w, Tensor(), {1, 1}, {1, 1}, {1, 1}, 1, shape);
  require_close(y, want, {2, 5, 5}, 1e-12);

  Tensor xt = rnd({2, 6, 3, 5}, 6).transpose(1, 3);        // [2, 5, 3, 6], non-contiguous
  Tensor wt = rnd({3, 3, 5, 4}, 7).permute({3, 2, 0, 1});  // [4, 5, 3, 3]
  REQUIRE_FALSE(xt.is_contiguous());
  want = naive_conv(xt, wt, Tensor(), {1, 2}, {1, 0}, {1, 1}, 1, shape);
  require_close(octo::conv2d(xt, wt, {}, {1, 2}, {1, 0}), want, shape, 1e-12);
}

TEST_CASE("conv2d promotes dtypes", "[conv][autograd]") {
  Tensor x = rnd({1, 2, 4, 4}, 8, octo::kFloat32), w = rnd({3, 2, 2, 2}, 9, octo::kFloat64);
  Tensor y = octo::conv2d(x, w);
  REQUIRE(y.dtype() == octo::kFloat64);
  Shape shape;
  require_close(y, naive_conv(x, w, Tensor(), {1, 1}, {0, 0}, {1, 1}, 1, shape), shape, 1e-6);
  Tensor b = rnd({3}, 10, octo::kFloat64);
  REQUIRE(octo::conv2d(x, w.to(octo::kFloat32), b).dtype() == octo::kFloat64);
  // gradients come back in each input's own dtype
  Tensor xg = x.clone().requires_grad_(), wg = w.clone().requires_grad_();
  Tensor yg = octo::conv2d(xg, wg);
  yg.backward(octo::ones_like(yg));
  REQUIRE(xg.grad().dtype() == octo::kFloat32);
  REQUIRE(wg.grad().dtype() == octo::kFloat64);
}

TEST_CASE("conv2d rejects bad arguments", "[conv][autograd]") {
  Tensor x = rnd({2, 4, 6, 6}, 1), w = rnd({6, 4, 3, 3}, 2);
  using Catch::Contains;
  REQUIRE_THROWS_AS(octo::conv2d(rnd({4, 6}, 3), w), octo::ValueError);
  REQUIRE_THROWS_WITH(octo::conv2d(rnd({4, 6}, 3), w),
                      Contains("expected a 3-d (unbatched) or 4-d (batched) input"));
  REQUIRE_THROWS_WITH(octo::conv2d(x, rnd({6, 4, 3}, 3)), Contains("expected a 4-d weight"));
  REQUIRE_THROWS_AS(octo::conv2d(x, rnd({6, 3, 3, 3}, 3)), octo::ValueError);
  REQUIRE_THROWS_WITH(octo::conv2d(x, rnd({6, 3, 3, 3}, 3)),
                      Contains("to have 3 channels, but got 4 channels instead"));
  REQUIRE_THROWS_WITH(octo::conv2d(x, rnd({6, 1, 3, 3}, 3), {}, {1, 1}, {0, 0}, {1, 1}, 4),
                      Contains("to be divisible by groups (4)"));
  REQUIRE_THROWS_WITH(octo::conv2d(x, w, rnd({5}, 3)), Contains("expected bias of shape [6]"));
  REQUIRE_THROWS_WITH(octo::conv2d(x, w, rnd({6, 1}, 3)), Contains("expected bias of shape [6]"));
  REQUIRE_THROWS_AS(octo::conv2d(x, rnd({6, 4, 7, 7}, 3)), octo::ValueError);
  REQUIRE_THROWS_WITH(octo::conv2d(x, rnd({6, 4, 7, 7}, 3)),
                      Contains("calculated output size (0 x 0) is too small for input (6 x 6)"));
  REQUIRE_THROWS_WITH(octo::conv2d(x, w, {}, {1, 1}, {0, 0}, {3, 3}),  // effective kernel 7
                      Contains("is too small"));
  REQUIRE_NOTHROW(octo::conv2d(x, rnd({6, 4, 7, 7}, 3), {}, {1, 1}, {1, 1}));  // padding helps
  REQUIRE_THROWS_WITH(octo::conv2d(x, w, {}, {0, 1}), Contains("stride must be positive"));
  REQUIRE_THROWS_WITH(octo::conv2d(x, w, {}, {1, 1}, {-1, 0}),
                      Contains("padding must be non-negative"));
  REQUIRE_THROWS_WITH(octo::conv2d(x, w, {}, {1, 1}, {0, 0}, {1, 0}),
                      Contains("dilation must be positive"));
  REQUIRE_THROWS_WITH(octo::conv2d(x, w, {}, {1, 1}, {0, 0}, {1, 1}, 0),
                      Contains("groups must be positive"));
  Tensor xi = octo::zeros({2, 4, 6, 6}, {.dtype = octo::kInt64});
  REQUIRE_THROWS_AS(octo::conv2d(xi, w.to(octo::kInt64)), octo::ValueError);
  REQUIRE_THROWS_WITH(
      octo::conv2d(xi, w.to(octo::kInt64)),
      Contains(
          "expected floating-point tensors (float32, float64, bfloat16 or float16), got input int64, weight int64"));
}

TEST_CASE("conv2d rejects tensors on different devices", "[conv][autograd]") {
  Tensor x = rnd({1, 2, 4, 4}, 1), w = rnd({3, 2, 3, 3}, 2), b = rnd({3}, 3);
  using Catch::Contains;
  REQUIRE_THROWS_AS(octo::conv2d(x, w.to(octo::Device("cpu:1"))), octo::DeviceError);
  REQUIRE_THROWS_WITH(octo::conv2d(x, w, b.to(octo::Device("cpu:1"))),
                      Contains("Expected all tensors to be on the same device") &&
                          Contains("cpu:0") && Contains("cpu:1"));
  // All on cpu:1 is fine and stays there.
  octo::Device d1("cpu:1");
  Tensor y = octo::conv2d(x.to(d1), w.to(d1), b.to(d1));
  REQUIRE(y.device() == d1);
}

TEST_CASE("conv2d handles an empty batch", "[conv][autograd]") {
  Tensor x = octo::zeros({0, 2, 5, 5}, {.dtype = octo::kFloat64});
  Tensor w = rnd({3, 2, 3, 3}, 1, octo::kFloat64, true);
  Tensor y = octo::conv2d(x, w);
  REQUIRE(y.sizes() == Shape{0, 3, 3, 3});
  y.backward(octo::ones_like(y));
  for (double v : w.grad().to_vector<double>()) REQUIRE(v == 0.0);
}

TEST_CASE("conv2d gradients pass gradcheck", "[conv][autograd][gradcheck]") {
  const std::vector<GradConfig> configs = {
      {{1, 1, 4, 4}, {1, 1, 3, 3}, {1, 1}, {0, 0}, {1, 1}, 1},
      {{2, 2, 5, 4}, {3, 2, 3, 2}, {2, 1}, {1, 1}, {1, 1}, 1},
      {{1, 4, 5, 5}, {4, 2, 2, 3}, {1, 2}, {2, 1}, {2, 1}, 2},
      {{2, 3, 4, 4}, {3, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 3},  // depthwise
      {{2, 3, 3, 4}, {2, 3, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1},  // pointwise
      {{1, 2, 6, 5}, {2, 2, 2, 2}, {2, 2}, {1, 0}, {2, 2}, 1},
  };
  for (size_t ci = 0; ci < configs.size(); ++ci) {
    const GradConfig& c = configs[ci];
    INFO("config " << ci);
    Tensor x = rnd(c.x, 20 + ci, octo::kFloat64, true);
    Tensor w = rnd(c.w, 40 + ci, octo::kFloat64, true);
    Tensor b = rnd({c.w[0]}, 60 + ci, octo::kFloat64, true);
    REQUIRE(gradcheck(
        [&](const TensorList& in) {
          return octo::conv2d(in[0], in[1], {}, c.stride, c.padding, c.dilation, c.groups);
        },
        {x, w}));
    REQUIRE(gradcheck(
        [&](const TensorList& in) {
          return octo::conv2d(in[0], in[1], in[2], c.stride, c.padding, c.dilation, c.groups);
        },
        {x, w, b}));
  }
}

TEST_CASE("conv2d gradcheck with non-contiguous and unbatched inputs",
          "[conv][autograd][gradcheck]") {
  Tensor base = rnd({2, 4, 3, 2}, 70, octo::kFloat64, true);  // viewed as [2, 2, 4, 3]
  Tensor w = rnd({2, 2, 2, 2}, 71, octo::kFloat64, true);
  REQUIRE(gradcheck(
      [](const TensorList& in) {
        return octo::conv2d(in[0].permute({0, 3, 1, 2}), in[1].transpose(2, 3), {}, {1, 1}, {1, 0});
      },
      {base, w}));
  Tensor x3 = rnd({2, 4, 4}, 72, octo::kFloat64, true);
  Tensor b = rnd({2}, 73, octo::kFloat64, true);
  REQUIRE(gradcheck(
      [](const TensorList& in) {
        return octo::conv2d(in[0], in[1], in[2], {2, 1}, {1, 1});
      },
      {x3, w, b}));
}

TEST_CASE("conv2d backward computes only the gradients that are needed", "[conv][autograd]") {
  Tensor x = rnd({2, 3, 5, 5}, 80);  // a constant input, as in a network's first layer
  Tensor w = rnd({4, 3, 3, 3}, 81, octo::kFloat64, true);
  Tensor b = rnd({4}, 82, octo::kFloat64, true);
  Tensor y = octo::conv2d(x, w, b, {1, 1}, {1, 1});
  REQUIRE(y.requires_grad());
  y.backward(octo::ones_like(y));  // d(sum y)/d(.)
  REQUIRE_FALSE(x.grad().defined());
  REQUIRE(w.grad().sizes() == w.sizes());
  // d(sum y)/d b[k] = number of output positions
  for (double v : b.grad().to_vector<double>()) REQUIRE(v == Approx(2 * 5 * 5));
  // d(sum y)/d w[k, c, i, j] = sum of the input pixels that meet tap (i, j)
  auto xv = x.to_vector<double>();
  auto gw = w.grad().to_vector<double>();
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 3; ++j) {
        double s = 0;
        for (int64_t n = 0; n < 2; ++n)
          for (int64_t h = 0; h < 5; ++h)
            for (int64_t ww = 0; ww < 5; ++ww) {
              int64_t ih = h + i - 1, iw = ww + j - 1;
              if (ih >= 0 && ih < 5 && iw >= 0 && iw < 5) s += xv[((n * 3 + c) * 5 + ih) * 5 + iw];
            }
        for (int64_t k = 0; k < 4; ++k) REQUIRE(gw[((k * 3 + c) * 3 + i) * 3 + j] == Approx(s));
      }
  // Under NoGradGuard nothing is recorded.
  octo::NoGradGuard no_grad;
  REQUIRE_FALSE(octo::conv2d(x, w, b).requires_grad());
}
