// Double backward: create_graph, gradgradcheck for every op family, a Hessian-vector product,
// and anomaly mode naming the op.
#include <catch2/catch.hpp>
#include <cmath>

#include <octo/octo.h>

using octo::Tensor;
using octo::autograd::gradgradcheck;
using octo::autograd::TensorList;

namespace {

Tensor r(const octo::Shape& shape, bool grad = true) {
  return octo::randn(shape, {.dtype = octo::kFloat64, .requires_grad = grad});
}

}  // namespace

TEST_CASE("create_graph: the gradient of x^3 is 3x^2 and can be differentiated again") {
  Tensor x = r({4});
  Tensor y = (x * x * x).sum();
  TensorList g = octo::autograd::grad({y}, {x}, {}, {}, false, /*create_graph=*/true);
  REQUIRE(g[0].requires_grad());
  TensorList h = octo::autograd::grad({g[0].sum()}, {x});
  auto xv = x.to_vector<double>(), hv = h[0].to_vector<double>();
  for (size_t i = 0; i < xv.size(); ++i) CHECK(hv[i] == Approx(6 * xv[i]));
  // Tensor::backward(create_graph) leaves a .grad that has a history.
  Tensor z = r({3});
  (z * z).sum().backward({}, {}, /*create_graph=*/true);
  REQUIRE(z.grad().requires_grad());
  Tensor gz = z.grad();
  z.set_grad(Tensor());
  gz.sum().backward();
  for (double v : z.grad().to_vector<double>()) CHECK(v == Approx(2.0));
}

TEST_CASE("create_graph gradients accumulate out of place, and a plain backward adds to them") {
  Tensor x = r({3});
  (x * x).sum().backward({}, {}, /*create_graph=*/true);
  Tensor first = x.grad();
  (x * x * x).sum().backward({}, {}, /*create_graph=*/true);
  REQUIRE(x.grad().requires_grad());
  CHECK(first.raw_data() != x.grad().raw_data());  // the first gradient was not overwritten
  // d/dx of the accumulated 2x + 3x^2 is 2 + 6x.
  TensorList h = octo::autograd::grad({x.grad().sum()}, {x});
  auto xv = x.to_vector<double>(), hv = h[0].to_vector<double>();
  for (size_t i = 0; i < xv.size(); ++i) CHECK(hv[i] == Approx(2 + 6 * xv[i]));
  (x * 4.0).sum().backward();  // plain: adds 4 without recording
  CHECK_FALSE(x.grad().requires_grad());
  auto gv = x.grad().to_vector<double>();
  for (size_t i = 0; i < xv.size(); ++i) CHECK(gv[i] == Approx(2 * xv[i] + 3 * xv[i] * xv[i] + 4));
  x.set_grad(Tensor());  // break the leaf <-> gradient cycle a create_graph .grad makes
}

TEST_CASE("without create_graph the gradient has no history") {
  Tensor x = r({3});
  TensorList g = octo::autograd::grad({(x * x).sum()}, {x});
  CHECK_FALSE(g[0].requires_grad());
}

TEST_CASE("gradgradcheck: elementwise ops") {
  Tensor a = r({3, 4}), b = r({4});
  Tensor p = (octo::rand({3, 4}, {.dtype = octo::kFloat64}) + 0.5).requires_grad_();
  CHECK(gradgradcheck([](const TensorList& in) { return in[0] * in[1]; }, {a, b}));
  CHECK(gradgradcheck([](const TensorList& in) { return in[0] / (in[1] * in[1] + 1.0); }, {a, b}));
  CHECK(gradgradcheck([](const TensorList& in) { return octo::pow(in[0], 2.5); }, {p}));
  CHECK(gradgradcheck([](const TensorList& in) { return octo::pow(in[0], in[1]); }, {p, b}));
  for (auto f : {octo::exp, octo::tanh, octo::sigmoid, octo::sin, octo::cos, octo::gelu, octo::silu,
                 octo::erf, octo::square, octo::expm1}) {
    CHECK(gradgradcheck([f](const TensorList& in) { return f(in[0]); }, {a}));
  }
  for (auto f : {octo::log, octo::sqrt, octo::rsqrt, octo::reciprocal, octo::log1p}) {
    CHECK(gradgradcheck([f](const TensorList& in) { return f(in[0]); }, {p}));
  }
  // Piecewise-linear ops: their second derivative is 0 away from the kinks.
  CHECK(gradgradcheck([](const TensorList& in) { return octo::relu(in[0]) * in[0]; }, {a}));
  CHECK(gradgradcheck([](const TensorList& in) { return octo::leaky_relu(in[0], 0.1) * in[0]; },
                      {a}));
  CHECK(gradgradcheck([](const TensorList& in) { return octo::abs(in[0]) * in[0]; }, {a}));
  CHECK(gradgradcheck(
      [](const TensorList& in) { return octo::where(in[0] > in[1], in[0] * in[0], in[1]); },
      {a, b}));
}

TEST_CASE("gradgradcheck: reductions, views and indexing") {
  Tensor a = r({3, 4});
  CHECK(gradgradcheck([](const TensorList& in) { return octo::sum(in[0] * in[0], {1}); }, {a}));
  CHECK(gradgradcheck([](const TensorList& in) { return octo::mean(in[0] * in[0], {0}); }, {a}));
  CHECK(gradgradcheck([](const TensorList& in) { return octo::var(in[0], {1}); }, {a}));
  CHECK(gradgradcheck([](const TensorList& in) { return octo::prod(in[0], 1); }, {a}));
  CHECK(gradgradcheck([](const TensorList& in) { return octo::max(in[0] * in[0], 1).first; }, {a}));
  CHECK(gradgradcheck(
      [](const TensorList& in) {
        return (in[0].t() * in[0].t()).reshape({2, 6}).narrow(1, 1, 3);
      },
      {a}));
  Tensor idx = octo::tensor({2, 0, 2}, {.dtype = octo::kInt64});
  CHECK(gradgradcheck(
      [idx](const TensorList& in) { return octo::index_select(in[0] * in[0], 1, idx); }, {a}));
  Tensor gi = octo::tensor({0, 1, 3, 2, 1, 0}, {.dtype = octo::kInt64}).view({3, 2});
  CHECK(gradgradcheck([gi](const TensorList& in) { return octo::gather(in[0] * in[0], 1, gi); },
                      {a}));
  // scatter_add with src larger than index: the backward writes into a view of zeros, which
  // under create_graph is an in-place op on a view (CopySlices).
  Tensor src = r({3, 5});
  CHECK(gradgradcheck(
      [gi](const TensorList& in) { return octo::scatter_add(in[0] * in[0], 1, gi, in[1] * in[1]); },
      {a, src}));
  CHECK(gradgradcheck(
      [](const TensorList& in) {
        return octo::cat({in[0] * in[0], in[0].exp()}, 0);
      },
      {a}));
}

TEST_CASE("gradgradcheck: linear algebra") {
  Tensor a = r({3, 4}), b = r({4, 2}), w = r({5, 4}), bias = r({5});
  CHECK(gradgradcheck([](const TensorList& in) { return octo::matmul(in[0], in[1]); }, {a, b}));
  CHECK(gradgradcheck(
      [](const TensorList& in) { return octo::tanh(octo::linear(in[0], in[1], in[2])); },
      {a, w, bias}));
  Tensor x = r({2, 3, 4}), y = r({2, 4, 2});
  CHECK(gradgradcheck([](const TensorList& in) { return octo::bmm(in[0], in[1]); }, {x, y}));
}

TEST_CASE("gradgradcheck: softmax, log_softmax and cross-entropy") {
  Tensor a = r({3, 5});
  CHECK(gradgradcheck([](const TensorList& in) { return octo::softmax(in[0], 1); }, {a}));
  CHECK(gradgradcheck([](const TensorList& in) { return octo::log_softmax(in[0], 0); }, {a}));
  Tensor target = octo::tensor({4, 0, 2}, {.dtype = octo::kInt64});
  Tensor weight = (octo::rand({5}, {.dtype = octo::kFloat64}) + 0.5).requires_grad_();
  CHECK(gradgradcheck(
      [target](const TensorList& in) {
        return octo::cross_entropy_per_sample(in[0], target, Tensor(), -100, 0.0);
      },
      {a}));
  Tensor with_ignored = octo::tensor({4, -100, 2}, {.dtype = octo::kInt64});
  CHECK(gradgradcheck(
      [with_ignored](const TensorList& in) {
        return octo::cross_entropy_per_sample(in[0], with_ignored, in[1], -100, 0.1);
      },
      {a, weight}));
}

TEST_CASE("gradgradcheck: convolution and pooling") {
  Tensor x = r({2, 2, 5, 5}), w = r({4, 1, 3, 3}), b = r({4});
  CHECK(gradgradcheck(
      [](const TensorList& in) {
        return octo::conv2d(in[0], in[1], in[2], {2, 1}, {1, 0}, {1, 1}, /*groups=*/2);
      },
      {x, w, b}));
  Tensor y = r({1, 2, 4, 4});
  CHECK(gradgradcheck(
      [](const TensorList& in) {
        return octo::max_pool2d(in[0] * in[0], {2, 2}, {2, 2});
      },
      {y}));
  CHECK(gradgradcheck(
      [](const TensorList& in) {
        return octo::avg_pool2d(in[0] * in[0], {3, 3}, {1, 1}, {1, 1}, false, false);
      },
      {y}));
  CHECK(gradgradcheck(
      [](const TensorList& in) {
        return octo::adaptive_avg_pool2d(in[0] * in[0], {3, 3});
      },
      {y}));
}

TEST_CASE("gradgradcheck: batch norm and layer norm") {
  Tensor x = r({4, 3, 2}), w = r({3}), b = r({3});
  CHECK(gradgradcheck(
      [](const TensorList& in) {
        return octo::batch_norm(in[0], Tensor(), Tensor(), in[1], in[2], true, 0.1, 1e-5);
      },
      {x, w, b}));
  Tensor rm = octo::zeros({3}, {.dtype = octo::kFloat64}),
         rv = octo::ones({3}, {.dtype = octo::kFloat64});
  CHECK(gradgradcheck(
      [rm, rv](const TensorList& in) {
        return octo::batch_norm(in[0] * in[0], rm, rv, in[1], in[2], false, 0.1, 1e-5);
      },
      {x, w, b}));
  CHECK(gradgradcheck(
      [](const TensorList& in) {
        return octo::batch_norm_relu(in[0], Tensor(), Tensor(), in[1], in[2], true, 0.1, 1e-5);
      },
      {x, w, b}));
  CHECK(gradgradcheck(
      [rm, rv](const TensorList& in) {
        return octo::batch_norm_relu(in[0] * in[0], rm, rv, in[1], in[2], false, 0.1, 1e-5);
      },
      {x, w, b}));
  Tensor lw = r({2}), lb = r({2});
  CHECK(gradgradcheck(
      [](const TensorList& in) { return octo::layer_norm(in[0], {2}, in[1], in[2], 1e-5); },
      {x, lw, lb}));
}

TEST_CASE("the fused backward and its create_graph form agree") {
  // Under create_graph relu, gelu, batch_norm, batch_norm_relu and cross-entropy switch to
  // composite formulas;
  // their first derivatives must be the fused kernels' ones.
  Tensor x = r({4, 3, 2}), w = r({3}), b = r({3});
  auto f = [&] {
    Tensor y = octo::batch_norm(octo::gelu(x), Tensor(), Tensor(), w, b, true, 0.1, 1e-5);
    Tensor z = octo::batch_norm_relu(y * 2.0, Tensor(), Tensor(), w, b, true, 0.1, 1e-5);
    Tensor logits = octo::relu(y.flatten(1)) + y.flatten(1) + z.flatten(1);
    Tensor t = octo::tensor({1, 0, 5, 2}, {.dtype = octo::kInt64});
    return octo::cross_entropy_per_sample(logits, t, Tensor(), -100, 0.2).sum();
  };
  TensorList plain = octo::autograd::grad({f()}, {x, w, b});
  TensorList graph = octo::autograd::grad({f()}, {x, w, b}, {}, {}, false, true);
  for (size_t i = 0; i < plain.size(); ++i) {
    auto p = plain[i].to_vector<double>(), q = graph[i].to_vector<double>();
    for (size_t k = 0; k < p.size(); ++k) CHECK(q[k] == Approx(p[k]).margin(1e-12));
  }
}

TEST_CASE("Hessian-vector product of a small MLP equals the finite-difference one") {
  octo::manual_seed(3);
  Tensor x = r({5, 3}, false);
  Tensor w1 = r({4, 3}), b1 = r({4}), w2 = r({2, 4}), b2 = r({2});
  TensorList params{w1, b1, w2, b2};
  Tensor target = octo::tensor({0, 1, 1, 0, 1}, {.dtype = octo::kInt64});
  auto loss = [&](const TensorList& p) {
    Tensor h = octo::tanh(octo::linear(x, p[0], p[1]));
    return octo::cross_entropy_per_sample(octo::linear(h, p[2], p[3]), target, Tensor(), -100, 0.0)
        .mean();
  };
  TensorList v;
  for (const Tensor& p : params) v.push_back(octo::randn(p.sizes(), {.dtype = octo::kFloat64}));
  TensorList g = octo::autograd::grad({loss(params)}, params, {}, {}, false, true);
  Tensor gv = octo::zeros({}, {.dtype = octo::kFloat64});
  for (size_t i = 0; i < g.size(); ++i) gv = gv + (g[i] * v[i]).sum();
  TensorList hv = octo::autograd::grad({gv}, params);
  // Central difference of the gradient along v.
  const double eps = 1e-5;
  auto grad_at = [&](double t) {
    TensorList shifted;
    for (size_t i = 0; i < params.size(); ++i)
      shifted.push_back((params[i].detach() + v[i] * t).requires_grad_());
    return octo::autograd::grad({loss(shifted)}, shifted);
  };
  TensorList plus = grad_at(eps), minus = grad_at(-eps);
  for (size_t i = 0; i < params.size(); ++i) {
    auto a = hv[i].to_vector<double>();
    auto p = plus[i].to_vector<double>(), m = minus[i].to_vector<double>();
    for (size_t k = 0; k < a.size(); ++k)
      CHECK(a[k] == Approx((p[k] - m[k]) / (2 * eps)).margin(1e-7));
  }
}

TEST_CASE("anomaly mode names the op whose backward produced NaN or Inf") {
  Tensor x = octo::zeros({3}, {.dtype = octo::kFloat64, .requires_grad = true});
  Tensor y = octo::sqrt(x).sum();  // finite forward; d sqrt(x)/dx = inf at 0
  {
    octo::DetectAnomalyGuard anomaly;
    CHECK_THROWS_WITH(y.backward({}, true),
                      Catch::Contains("Function 'SqrtBackward' returned nan or inf"));
  }
  // Without anomaly mode the inf is simply the gradient.
  y.backward();
  CHECK(std::isinf(x.grad().to_vector<double>()[0]));
}

TEST_CASE("anomaly mode names the forward op that turned finite inputs into NaN") {
  Tensor x = octo::tensor({1.0, 0.0, 2.0}, {.dtype = octo::kFloat64, .requires_grad = true});
  octo::DetectAnomalyGuard anomaly;
  Tensor ok = x * 2.0;
  CHECK_THROWS_WITH(octo::log(x),
                    Catch::Contains("LogBackward (Log)") && Catch::Contains("produced nan or inf"));
  // Inputs that already hold NaN are not the op's doing.
  Tensor bad = octo::tensor({std::nan("")}, {.dtype = octo::kFloat64, .requires_grad = true});
  CHECK_NOTHROW(bad * 2.0);
}
