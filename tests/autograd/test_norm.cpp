// Tests for batch_norm and layer_norm: values, running statistics, errors and gradchecks.
#include <catch2/catch.hpp>

#include <octo/octo.h>

#include <cmath>
#include <random>

using octo::Shape;
using octo::Tensor;
using octo::autograd::TensorList;

namespace {

Tensor rand_tensor(const Shape& shape, uint32_t seed, octo::DType dtype = octo::kFloat64,
                   bool requires_grad = false, double mean = 0.0, double std = 1.0) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> dist(mean, std);
  std::vector<double> v(static_cast<size_t>(octo::detail::shape_numel(shape)));
  for (double& x : v) x = dist(gen);
  Tensor t = octo::tensor(v, shape, {.dtype = dtype});
  if (requires_grad) t.requires_grad_();
  return t;
}

std::vector<double> vals(const Tensor& t) { return t.to_vector<double>(); }

/// Reference: normalise each group of `inner` consecutive values in `groups` groups... for batch
/// norm over [N, C, S]: per channel mean/biased var; returns the normalised, affine output.
std::vector<double> ref_batch_norm(const std::vector<double>& x, const Shape& shape,
                                   const std::vector<double>& w, const std::vector<double>& b,
                                   double eps, std::vector<double>* mean_out = nullptr,
                                   std::vector<double>* var_out = nullptr) {
  const int64_t N = shape[0], C = shape[1];
  int64_t S = 1;
  for (size_t d = 2; d < shape.size(); ++d) S *= shape[d];
  std::vector<double> y(x.size());
  for (int64_t c = 0; c < C; ++c) {
    double m = 0, v = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t s = 0; s < S; ++s) m += x[(n * C + c) * S + s];
    m /= N * S;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t s = 0; s < S; ++s) v += std::pow(x[(n * C + c) * S + s] - m, 2);
    v /= N * S;
    if (mean_out) mean_out->push_back(m);
    if (var_out) var_out->push_back(v);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t s = 0; s < S; ++s) {
        const size_t i = static_cast<size_t>((n * C + c) * S + s);
        y[i] =
            (x[i] - m) / std::sqrt(v + eps) * (w.empty() ? 1.0 : w[c]) + (b.empty() ? 0.0 : b[c]);
      }
  }
  return y;
}

void require_close(const std::vector<double>& got, const std::vector<double>& want, double tol) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    REQUIRE(got[i] == Approx(want[i]).margin(tol).epsilon(tol));
  }
}

}  // namespace

TEST_CASE("batch_norm: training output and running statistics", "[norm]") {
  for (octo::DType dt : {octo::kFloat32, octo::kFloat64})
    for (const Shape& shape : std::vector<Shape>{{4, 3}, {2, 3, 5}, {2, 3, 3, 2}}) {
      INFO("shape " << octo::shape_str(shape) << " dtype " << dt);
      Tensor x = rand_tensor(shape, 1, dt, false, 1.0, 2.0);
      Tensor w = rand_tensor({3}, 2, dt), b = rand_tensor({3}, 3, dt);
      Tensor rm = octo::zeros({3}, {.dtype = dt}), rv = octo::ones({3}, {.dtype = dt});
      const uint32_t v_rm = rm.version(), v_rv = rv.version();
      Tensor y = octo::batch_norm(x, rm, rv, w, b, /*training=*/true, 0.2, 1e-5);
      std::vector<double> mean, var;
      const auto want = ref_batch_norm(vals(x), shape, vals(w), vals(b), 1e-5, &mean, &var);
      const double tol = dt == octo::kFloat32 ? 2e-5 : 1e-11;
      REQUIRE(y.sizes() == shape);
      REQUIRE(y.dtype() == dt);
      require_close(vals(y), want, tol);
      // running = 0.8 * running + 0.2 * stat, with the unbiased variance.
      const double n = static_cast<double>(x.numel() / 3);
      std::vector<double> want_rm, want_rv;
      for (int c = 0; c < 3; ++c) {
        want_rm.push_back(0.2 * mean[c]);
        want_rv.push_back(0.8 + 0.2 * var[c] * n / (n - 1));
      }
      require_close(vals(rm), want_rm, tol);
      require_close(vals(rv), want_rv, tol);
      // The buffers were changed in place: their version counters moved.
      REQUIRE(rm.version() > v_rm);
      REQUIRE(rv.version() > v_rv);
      // Without running statistics or affine parameters.
      Tensor y2 = octo::batch_norm(x, {}, {}, {}, {}, true);
      require_close(vals(y2), ref_batch_norm(vals(x), shape, {}, {}, 1e-5), tol);
    }
}

TEST_CASE("batch_norm: eval uses the running statistics and leaves them alone", "[norm]") {
  Tensor x = rand_tensor({3, 2, 4}, 5);
  Tensor rm = octo::tensor({0.5, -1.0}, {.dtype = octo::kFloat64});
  Tensor rv = octo::tensor({2.0, 0.25}, {.dtype = octo::kFloat64});
  Tensor w = octo::tensor({1.5, -2.0}, {.dtype = octo::kFloat64});
  Tensor b = octo::tensor({0.1, 0.2}, {.dtype = octo::kFloat64});
  const uint32_t v_rm = rm.version();
  Tensor y = octo::batch_norm(x, rm, rv, w, b, /*training=*/false, 0.1, 1e-3);
  const auto xv = vals(x), yv = vals(y), rmv = vals(rm), rvv = vals(rv), wv = vals(w), bv = vals(b);
  for (size_t i = 0; i < xv.size(); ++i) {
    const size_t c = (i / 4) % 2;
    REQUIRE(yv[i] == Approx((xv[i] - rmv[c]) / std::sqrt(rvv[c] + 1e-3) * wv[c] + bv[c]));
  }
  REQUIRE(rm.version() == v_rm);
  REQUIRE(rmv == std::vector<double>{0.5, -1.0});
  REQUIRE(rvv == std::vector<double>{2.0, 0.25});
  // A single value per channel is fine in eval.
  REQUIRE_NOTHROW(octo::batch_norm(rand_tensor({1, 2}, 6), rm, rv, w, b, false));
}

TEST_CASE("batch_norm: non-contiguous input", "[norm]") {
  Tensor base = rand_tensor({5, 3, 4}, 7);
  Tensor x = base.transpose(0, 2);  // [4, 3, 5]
  REQUIRE(!x.is_contiguous());
  Tensor rm = octo::zeros({3}, {.dtype = octo::kFloat64}),
         rv = octo::ones({3}, {.dtype = octo::kFloat64});
  Tensor y = octo::batch_norm(x, rm, rv, {}, {}, true);
  require_close(vals(y), ref_batch_norm(vals(x), x.sizes(), {}, {}, 1e-5), 1e-11);
}

TEST_CASE("batch_norm: bad inputs", "[norm]") {
  Tensor x = rand_tensor({4, 3}, 8);
  Tensor c3 = octo::ones({3}, {.dtype = octo::kFloat64});
  Tensor c4 = octo::ones({4}, {.dtype = octo::kFloat64});
  using Catch::Contains;
  REQUIRE_THROWS_AS(octo::batch_norm(rand_tensor({4}, 9), {}, {}, {}, {}, true), octo::ValueError);
  REQUIRE_THROWS_WITH(octo::batch_norm(rand_tensor({4}, 9), {}, {}, {}, {}, true),
                      Contains("batch_norm") && Contains("at least 2 dims"));
  REQUIRE_THROWS_AS(octo::batch_norm(x, {}, {}, c4, {}, true), octo::ValueError);
  REQUIRE_THROWS_WITH(octo::batch_norm(x, {}, {}, c4, {}, true),
                      Contains("weight") && Contains("[4]"));
  REQUIRE_THROWS_WITH(octo::batch_norm(x, {}, {}, {}, c4, true), Contains("bias"));
  REQUIRE_THROWS_WITH(octo::batch_norm(x, c4, c3, {}, {}, true), Contains("running_mean"));
  REQUIRE_THROWS_WITH(octo::batch_norm(x, c3, c4, {}, {}, true), Contains("running_var"));
  REQUIRE_THROWS_AS(octo::batch_norm(x, c3, {}, {}, {}, true), octo::ValueError);
  // Eval needs running statistics.
  REQUIRE_THROWS_AS(octo::batch_norm(x, {}, {}, {}, {}, false), octo::ValueError);
  REQUIRE_THROWS_WITH(octo::batch_norm(x, {}, {}, {}, {}, false), Contains("evaluation mode"));
  // One value per channel cannot be normalised in training (torch's message).
  REQUIRE_THROWS_AS(octo::batch_norm(rand_tensor({1, 3}, 10), {}, {}, {}, {}, true),
                    octo::ValueError);
  REQUIRE_THROWS_WITH(
      octo::batch_norm(rand_tensor({1, 3}, 10), {}, {}, {}, {}, true),
      Contains("Expected more than 1 value per channel when training, got input size [1, 3]"));
  REQUIRE_THROWS_WITH(octo::batch_norm(rand_tensor({1, 3, 1, 1}, 10), c3, c3, {}, {}, true),
                      Contains("Expected more than 1 value per channel when training"));
  // Dtypes: integer input, parameters of another dtype.
  REQUIRE_THROWS_AS(
      octo::batch_norm(octo::zeros({4, 3}, {.dtype = octo::kInt64}), {}, {}, {}, {}, true),
      octo::ValueError);
  REQUIRE_THROWS_WITH(octo::batch_norm(x, {}, {}, octo::ones({3}), {}, true),
                      Contains("weight") && Contains("dtype"));
  // Mixed devices.
  Tensor w1 = octo::ones({3}, {.dtype = octo::kFloat64, .device = octo::Device("cpu:1")});
  REQUIRE_THROWS_AS(octo::batch_norm(x, {}, {}, w1, {}, true), octo::DeviceError);
  REQUIRE_THROWS_WITH(
      octo::batch_norm(x, {}, {}, w1, {}, true),
      Contains("Expected all tensors to be on the same device") && Contains("cpu:1"));
  // The running statistics were never touched by the failed calls.
  REQUIRE(vals(c3) == std::vector<double>{1, 1, 1});
}

TEST_CASE("batch_norm: runs on another virtual cpu device", "[norm]") {
  const octo::Device d1("cpu:1");
  Tensor x = rand_tensor({5, 2, 3}, 11).to(d1);
  Tensor rm = octo::zeros({2}, {.dtype = octo::kFloat64, .device = d1});
  Tensor rv = octo::ones({2}, {.dtype = octo::kFloat64, .device = d1});
  Tensor y = octo::batch_norm(x, rm, rv, {}, {}, true);
  REQUIRE(y.device() == d1);
  require_close(vals(y), ref_batch_norm(vals(x), x.sizes(), {}, {}, 1e-5), 1e-11);
}

TEST_CASE("batch_norm: gradcheck in training mode", "[norm][gradcheck]") {
  for (const Shape& shape : std::vector<Shape>{{4, 3}, {2, 3, 3, 2}, {3, 2, 5}}) {
    INFO("shape " << octo::shape_str(shape));
    const int64_t C = shape[1];
    Tensor x = rand_tensor(shape, 20, octo::kFloat64, true);
    Tensor w = rand_tensor({C}, 21, octo::kFloat64, true);
    Tensor b = rand_tensor({C}, 22, octo::kFloat64, true);
    Tensor rm = octo::zeros({C}, {.dtype = octo::kFloat64});
    Tensor rv = octo::ones({C}, {.dtype = octo::kFloat64});
    REQUIRE(octo::autograd::gradcheck(
        [&](const TensorList& in) {
          return octo::batch_norm(in[0], rm, rv, in[1], in[2], true, 0.1, 1e-5);
        },
        {x, w, b}));
    // Without affine parameters; with only some inputs requiring grad.
    REQUIRE(octo::autograd::gradcheck(
        [](const TensorList& in) { return octo::batch_norm(in[0], {}, {}, {}, {}, true); }, {x}));
    Tensor xc = rand_tensor(shape, 23);
    REQUIRE(octo::autograd::gradcheck(
        [&](const TensorList& in) { return octo::batch_norm(xc, {}, {}, in[0], in[1], true); },
        {w, b}));
  }
}

TEST_CASE("batch_norm: gradcheck with a non-contiguous input", "[norm][gradcheck]") {
  Tensor x = rand_tensor({3, 2, 4}, 30, octo::kFloat64, true);  // used as [4, 2, 3]
  Tensor w = rand_tensor({2}, 31, octo::kFloat64, true);
  REQUIRE(octo::autograd::gradcheck(
      [](const TensorList& in) {
        return octo::batch_norm(in[0].transpose(0, 2), {}, {}, in[1], {}, true);
      },
      {x, w}));
}

TEST_CASE("batch_norm: backward records only what needs grad", "[norm]") {
  Tensor x = rand_tensor({4, 3}, 40);
  Tensor y = octo::batch_norm(x, {}, {}, {}, {}, true);
  REQUIRE(!y.requires_grad());
  REQUIRE(y.grad_fn() == nullptr);
  Tensor xg = rand_tensor({4, 3}, 40, octo::kFloat64, true);
  Tensor y2 = octo::batch_norm(xg, {}, {}, {}, {}, true);
  REQUIRE(y2.requires_grad());
  REQUIRE(y2.grad_fn() != nullptr);
  {
    octo::NoGradGuard no_grad;
    REQUIRE(octo::batch_norm(xg, {}, {}, {}, {}, true).grad_fn() == nullptr);
  }
  // An in-place change to a saved input is detected at backward.
  Tensor xi = rand_tensor({4, 3}, 41, octo::kFloat64, true);
  Tensor y3 = octo::batch_norm(xi, {}, {}, {}, {}, true);
  {
    octo::NoGradGuard no_grad;
    xi.fill_(1.0);
  }
  REQUIRE_THROWS_WITH(y3.backward(octo::ones({4, 3}, {.dtype = octo::kFloat64})),
                      Catch::Contains("modified by an inplace operation"));
}

TEST_CASE("batch_norm: weight and bias gradients through backward()", "[norm]") {
  Tensor x = rand_tensor({5, 2, 3}, 50);
  Tensor w = rand_tensor({2}, 51, octo::kFloat64, true);
  Tensor b = rand_tensor({2}, 52, octo::kFloat64, true);
  Tensor g = rand_tensor({5, 2, 3}, 53);
  octo::batch_norm(x, {}, {}, w, b, true).backward(g);
  REQUIRE(!x.grad().defined());
  const auto xhat = ref_batch_norm(vals(x), x.sizes(), {}, {}, 1e-5);
  const auto gv = vals(g);
  std::vector<double> want_w(2, 0.0), want_b(2, 0.0);
  for (size_t i = 0; i < gv.size(); ++i) {
    const size_t c = (i / 3) % 2;
    want_w[c] += gv[i] * xhat[i];
    want_b[c] += gv[i];
  }
  require_close(vals(w.grad()), want_w, 1e-10);
  require_close(vals(b.grad()), want_b, 1e-10);
}

// The tests below go through elementwise ops and reductions (eval-mode backward, layer_norm).

TEST_CASE("batch_norm: gradcheck in eval mode", "[norm][gradcheck]") {
  for (const Shape& shape : std::vector<Shape>{{4, 3}, {2, 3, 3, 2}}) {
    INFO("shape " << octo::shape_str(shape));
    const int64_t C = shape[1];
    Tensor x = rand_tensor(shape, 60, octo::kFloat64, true);
    Tensor w = rand_tensor({C}, 61, octo::kFloat64, true);
    Tensor b = rand_tensor({C}, 62, octo::kFloat64, true);
    Tensor rm = rand_tensor({C}, 63);
    Tensor rv = rand_tensor({C}, 64, octo::kFloat64, false, 2.0, 0.3);
    REQUIRE(octo::autograd::gradcheck(
        [&](const TensorList& in) {
          return octo::batch_norm(in[0], rm, rv, in[1], in[2], false, 0.1, 1e-5);
        },
        {x, w, b}));
    REQUIRE(octo::autograd::gradcheck(
        [&](const TensorList& in) { return octo::batch_norm(in[0], rm, rv, {}, {}, false); }, {x}));
  }
}

namespace {

/// Reference layer norm over the last `k` dims of row-major data.
std::vector<double> ref_layer_norm(const std::vector<double>& x, int64_t inner,
                                   const std::vector<double>& w, const std::vector<double>& b,
                                   double eps) {
  std::vector<double> y(x.size());
  for (size_t r = 0; r < x.size() / inner; ++r) {
    double m = 0, v = 0;
    for (int64_t i = 0; i < inner; ++i) m += x[r * inner + i];
    m /= inner;
    for (int64_t i = 0; i < inner; ++i) v += std::pow(x[r * inner + i] - m, 2);
    v /= inner;
    for (int64_t i = 0; i < inner; ++i)
      y[r * inner + i] = (x[r * inner + i] - m) / std::sqrt(v + eps) * (w.empty() ? 1.0 : w[i]) +
                         (b.empty() ? 0.0 : b[i]);
  }
  return y;
}

}  // namespace

TEST_CASE("layer_norm: values", "[norm]") {
  for (octo::DType dt : {octo::kFloat32, octo::kFloat64}) {
    Tensor x = rand_tensor({3, 2, 4}, 70, dt, false, 1.0, 3.0);
    Tensor w = rand_tensor({2, 4}, 71, dt), b = rand_tensor({2, 4}, 72, dt);
    const double tol = dt == octo::kFloat32 ? 1e-5 : 1e-11;
    require_close(vals(octo::layer_norm(x, {2, 4}, w, b)),
                  ref_layer_norm(vals(x), 8, vals(w), vals(b), 1e-5), tol);
    require_close(vals(octo::layer_norm(x, {4}, {}, {}, 1e-3)),
                  ref_layer_norm(vals(x), 4, {}, {}, 1e-3), tol);
    // Non-contiguous input.
    Tensor xt = x.transpose(0, 2);  // [4, 2, 3]
    require_close(vals(octo::layer_norm(xt, {3})), ref_layer_norm(vals(xt), 3, {}, {}, 1e-5), tol);
  }
}

TEST_CASE("layer_norm: bad inputs", "[norm]") {
  Tensor x = rand_tensor({2, 3}, 80);
  using Catch::Contains;
  REQUIRE_THROWS_AS(octo::layer_norm(x, {4}), octo::ValueError);
  REQUIRE_THROWS_WITH(octo::layer_norm(x, {4}),
                      Contains("normalized_shape=[4]") && Contains("[*, 4]") && Contains("[2, 3]"));
  REQUIRE_THROWS_WITH(octo::layer_norm(x, {2, 3, 1}), Contains("layer_norm"));
  REQUIRE_THROWS_WITH(octo::layer_norm(x, {}), Contains("at least 1-dimensional"));
  REQUIRE_THROWS_WITH(octo::layer_norm(x, {3}, octo::ones({2}, {.dtype = octo::kFloat64})),
                      Contains("weight") && Contains("[2]"));
  REQUIRE_THROWS_WITH(octo::layer_norm(x, {3}, {}, octo::ones({3, 1}, {.dtype = octo::kFloat64})),
                      Contains("bias"));
  REQUIRE_THROWS_AS(octo::layer_norm(octo::zeros({2, 3}, {.dtype = octo::kInt64}), {3}),
                    octo::ValueError);
  Tensor w1 = octo::ones({3}, {.dtype = octo::kFloat64, .device = octo::Device("cpu:1")});
  REQUIRE_THROWS_AS(octo::layer_norm(x, {3}, w1), octo::DeviceError);
}

TEST_CASE("layer_norm: gradcheck", "[norm][gradcheck]") {
  for (const Shape& nshape : std::vector<Shape>{{4}, {3, 4}}) {
    INFO("normalized_shape " << octo::shape_str(nshape));
    Tensor x = rand_tensor({2, 3, 4}, 90, octo::kFloat64, true);
    Tensor w = rand_tensor(nshape, 91, octo::kFloat64, true);
    Tensor b = rand_tensor(nshape, 92, octo::kFloat64, true);
    REQUIRE(octo::autograd::gradcheck(
        [&](const TensorList& in) { return octo::layer_norm(in[0], nshape, in[1], in[2]); },
        {x, w, b}));
    REQUIRE(octo::autograd::gradcheck(
        [&](const TensorList& in) { return octo::layer_norm(in[0], nshape); }, {x}));
  }
  // Non-contiguous input.
  Tensor x = rand_tensor({5, 2}, 93, octo::kFloat64, true);
  REQUIRE(octo::autograd::gradcheck(
      [](const TensorList& in) { return octo::layer_norm(in[0].t(), {5}); }, {x}));
}
