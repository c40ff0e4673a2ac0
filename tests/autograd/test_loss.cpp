// Gradients of the fused cross-entropy (cross_entropy_per_sample and F::cross_entropy on it), and
// the fused op against the composite log_softmax + nll formula.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include <octo/octo.h>

#include "autograd/ops/loss.h"

using octo::Shape;
using octo::Tensor;
using octo::autograd::gradcheck;
using octo::autograd::TensorList;
namespace F = octo::nn::functional;

namespace {

Tensor leaf(const Shape& shape, double scale = 1.0) {
  Tensor t = octo::randn(shape, {.dtype = octo::kFloat64}) * scale;
  t.requires_grad_();
  return t;
}

Tensor positive_leaf(int64_t n) {
  Tensor t = octo::rand({n}, {.dtype = octo::kFloat64}) + 0.2;
  t.requires_grad_();
  return t;
}

Tensor labels(const std::vector<int64_t>& v) {
  return octo::from_vector<int64_t>(v, {static_cast<int64_t>(v.size())});
}

/// The per-sample loss written with log_softmax, gather and index_select (no fused kernel).
Tensor composite(const Tensor& x, const Tensor& y, const Tensor& w, int64_t ignore_index,
                 double e) {
  const int64_t C = x.size(1);
  Tensor logp = octo::log_softmax(x, 1);
  Tensor valid = octo::ne(y, octo::scalar_tensor(ignore_index, {.dtype = octo::kInt64}));
  Tensor safe = octo::masked_fill(y, octo::logical_not(valid), 0);
  Tensor picked = octo::gather(logp, 1, safe.unsqueeze(1)).squeeze(1);
  Tensor per =
      w.defined() ? -(1.0 - e) * octo::index_select(w, 0, safe) * picked : -(1.0 - e) * picked;
  if (e > 0) {
    Tensor wl = w.defined() ? logp * w.view({1, C}) : logp;
    per = per - (e / static_cast<double>(C)) * octo::sum(wl, {1});
  }
  return octo::where(valid, per, octo::zeros({}, x.options()));
}

void check_close(const Tensor& got, const Tensor& want, double tol, const char* what) {
  const std::vector<double> g = got.contiguous().to_vector<double>();
  const std::vector<double> w = want.contiguous().to_vector<double>();
  REQUIRE(g.size() == w.size());
  for (size_t i = 0; i < g.size(); ++i) {
    INFO(what << " element " << i << ": got " << g[i] << ", want " << w[i]);
    CHECK(std::fabs(g[i] - w[i]) <= tol * (1.0 + std::fabs(w[i])));
  }
}

struct Config {
  bool weighted;
  bool ignore;
  double e;
};

std::vector<Config> configs() {
  std::vector<Config> out;
  for (bool weighted : {false, true})
    for (bool ignore : {false, true})
      for (double e : {0.0, 0.3}) out.push_back({weighted, ignore, e});
  return out;
}

}  // namespace

TEST_CASE("cross_entropy_per_sample gradcheck over logits and weight") {
  octo::manual_seed(11);
  const Tensor y = labels({0, 3, 1, 3, 2, 1});
  const Tensor y_ign = labels({0, 3, -1, 3, 2, -1});
  for (const Config& c : configs()) {
    INFO("weighted " << c.weighted << " ignore " << c.ignore << " e " << c.e);
    const Tensor t = c.ignore ? y_ign : y;
    const int64_t ii = c.ignore ? -1 : -100;
    Tensor x = leaf({6, 4}, 2.0);
    if (c.weighted) {
      Tensor w = positive_leaf(4);
      CHECK(gradcheck(
          [&](const TensorList& in) {
            return octo::cross_entropy_per_sample(in[0], t, in[1], ii, c.e);
          },
          {x, w}));
    } else {
      CHECK(gradcheck(
          [&](const TensorList& in) {
            return octo::cross_entropy_per_sample(in[0], t, {}, ii, c.e);
          },
          {x}));
    }
    // Non-contiguous logits: a transposed view.
    Tensor xt = leaf({4, 6});
    CHECK(gradcheck(
        [&](const TensorList& in) {
          return octo::cross_entropy_per_sample(in[0].t(), t, {}, ii, c.e);
        },
        {xt}));
  }
  // One class: the loss is 0 (no smoothing) or constant, the gradient 0.
  Tensor x1 = leaf({3, 1});
  CHECK(gradcheck(
      [&](const TensorList& in) {
        return octo::cross_entropy_per_sample(in[0], labels({0, 0, 0}), in[1], -100, 0.2);
      },
      {x1, positive_leaf(1)}));
}

TEST_CASE("F::cross_entropy gradcheck through the fused op") {
  octo::manual_seed(12);
  const Tensor w_const = octo::tensor({0.5, 1.5, 1.0, 2.0}, {.dtype = octo::kFloat64});
  const Tensor y = labels({0, 3, 1, 3, 2});
  const Tensor y_ign = labels({0, 3, 2, 3, 2});  // ignore_index 2 below
  for (const char* red : {"none", "sum", "mean"}) {
    for (const Config& c : configs()) {
      INFO(red << " weighted " << c.weighted << " ignore " << c.ignore << " e " << c.e);
      const Tensor t = c.ignore ? y_ign : y;
      F::CrossEntropyOptions o{
          .ignore_index = c.ignore ? 2 : -100, .reduction = red, .label_smoothing = c.e};
      if (c.weighted) o.weight = w_const;
      Tensor x = leaf({5, 4}, 2.0);
      CHECK(gradcheck([&](const TensorList& in) { return F::cross_entropy(in[0], t, o); }, {x}));
      // The weight is differentiable too (the mean's divisor depends on it).
      if (c.weighted) {
        CHECK(gradcheck(
            [&](const TensorList& in) {
              F::CrossEntropyOptions ow = o;
              ow.weight = in[1];
              return F::cross_entropy(in[0], t, ow);
            },
            {x, positive_leaf(4)}));
      }
    }
    // 4-d input [N, C, H, W], each reduction, with weights, ignore_index and smoothing.
    Tensor x4 = leaf({2, 4, 3, 2});
    Tensor y4 = octo::randint(0, 4, {2, 3, 2});
    y4.narrow(0, 0, 1).narrow(1, 0, 1).fill_(1);  // some targets equal ignore_index
    CHECK(gradcheck(
        [&](const TensorList& in) {
          return F::cross_entropy(
              in[0], y4,
              {.weight = w_const, .ignore_index = 1, .reduction = red, .label_smoothing = 0.15});
        },
        {x4}));
  }
  // Unbatched input [C] with a 0-d target.
  Tensor xu = leaf({5});
  CHECK(gradcheck(
      [&](const TensorList& in) {
        return F::cross_entropy(in[0], octo::scalar_tensor(int64_t{3}, {.dtype = octo::kInt64}),
                                {.label_smoothing = 0.1});
      },
      {xu}));
}

TEST_CASE("fused cross-entropy equals log_softmax + nll in float64 (values and gradients)") {
  octo::manual_seed(13);
  const int64_t N = 9, C = 7;
  for (const Config& c : configs()) {
    for (bool transposed : {false, true}) {
      INFO("weighted " << c.weighted << " ignore " << c.ignore << " e " << c.e << " transposed "
                       << transposed);
      const int64_t ii = c.ignore ? 3 : -100;
      Tensor base = transposed ? leaf({C, N}, 4.0) : leaf({N, C}, 4.0);
      Tensor y = octo::randint(0, C, {N});
      if (c.ignore) y.narrow(0, 1, 2).fill_(3);
      Tensor w = c.weighted ? positive_leaf(C) : Tensor();
      Tensor g = octo::randn({N}, {.dtype = octo::kFloat64});
      auto x_of = [&] { return transposed ? base.t() : base; };

      Tensor fused = octo::cross_entropy_per_sample(x_of(), y, w, ii, c.e);
      Tensor ref = composite(x_of(), y, w, ii, c.e);
      check_close(fused, ref, 1e-12, "loss");

      octo::sum(fused * g).backward();
      Tensor gx_fused = base.grad().clone();
      Tensor gw_fused = c.weighted ? w.grad().clone() : Tensor();
      base.set_grad(Tensor());
      if (c.weighted) w.set_grad(Tensor());
      octo::sum(ref * g).backward();
      check_close(gx_fused, base.grad(), 1e-12, "logits grad");
      if (c.weighted) check_close(gw_fused, w.grad(), 1e-12, "weight grad");
    }
  }
}

TEST_CASE("F::cross_entropy equals nll_loss(log_softmax) for every reduction, 4-d input too") {
  octo::manual_seed(14);
  const Tensor w = octo::rand({5}, {.dtype = octo::kFloat64}) + 0.2;
  for (const Shape& shape : {Shape{8, 5}, Shape{3, 5, 2, 3}}) {
    for (const char* red : {"none", "sum", "mean"}) {
      for (bool weighted : {false, true}) {
        INFO("shape " << octo::shape_str(shape) << " " << red << " weighted " << weighted);
        Tensor x = octo::randn(shape, {.dtype = octo::kFloat64}) * 3.0;
        Shape tshape = shape;
        tshape.erase(tshape.begin() + 1);
        Tensor y = octo::randint(0, 5, tshape);
        y.narrow(0, 0, 1).fill_(4);  // ignored
        F::CrossEntropyOptions o{.ignore_index = 4, .reduction = red};
        F::NLLLossOptions no{.ignore_index = 4, .reduction = red};
        if (weighted) o.weight = no.weight = w;
        check_close(F::cross_entropy(x, y, o), F::nll_loss(octo::log_softmax(x, 1), y, no), 1e-12,
                    "loss");
      }
    }
  }
}

TEST_CASE("cross_entropy_per_sample: shapes, empty batches, no-grad and errors") {
  // N = 0: an empty loss, and a backward that produces an empty gradient.
  Tensor x0 = leaf({0, 3});
  Tensor l0 = octo::cross_entropy_per_sample(x0, labels({}), {}, -100, 0.1);
  CHECK(l0.sizes() == Shape{0});
  octo::sum(l0).backward();
  CHECK(x0.grad().sizes() == Shape{0, 3});
  // Under NoGradGuard nothing is recorded.
  Tensor x = leaf({2, 3});
  {
    octo::NoGradGuard no_grad;
    CHECK(!octo::cross_entropy_per_sample(x, labels({0, 2})).requires_grad());
  }
  CHECK(octo::cross_entropy_per_sample(x, labels({0, 2})).requires_grad());

  auto error = [](auto&& fn) -> std::string {
    try {
      fn();
    } catch (const octo::Error& e) {
      return e.what();
    }
    return "no error";
  };
  CHECK_THROWS_AS(octo::cross_entropy_per_sample(x, labels({0, 3})), octo::IndexError);
  CHECK_THAT(error([&] {
               octo::cross_entropy_per_sample(x, labels({0, 3}));
             }),
             Catch::Contains("target 3 is out of bounds for 3 classes"));
  CHECK_THROWS_AS(octo::cross_entropy_per_sample(x.view({6}), labels({0})), octo::ValueError);
  CHECK_THAT(error([&] {
               octo::cross_entropy_per_sample(x, labels({0, 1, 2}));
             }),
             Catch::Contains("expected target of shape [2]"));
  CHECK_THAT(error([&] {
               octo::cross_entropy_per_sample(x, labels({0, 1}),
                                              octo::ones({3}, {.dtype = octo::kFloat32}));
             }),
             Catch::Contains("expected a weight of dtype float64"));
  CHECK_THAT(error([&] {
               octo::cross_entropy_per_sample(x, labels({0, 1}),
                                              octo::ones({2}, {.dtype = octo::kFloat64}));
             }),
             Catch::Contains("of shape [3], got [2]"));
  CHECK_THAT(error([&] {
               octo::cross_entropy_per_sample(x, labels({0, 1}), {}, -100, -0.1);
             }),
             Catch::Contains("label_smoothing must be in [0, 1]"));
  CHECK_THAT(
      error([&] { octo::cross_entropy_per_sample(x, octo::zeros({2}, {.dtype = octo::kInt32})); }),
      Catch::Contains("int64"));
  // Floating logits only; the error names the dtype found. (16-bit logits run on the CPU:
  // tests/kernels/test_half.cpp.)
  Tensor ints = octo::zeros({2, 3}, {.dtype = octo::kInt32});
  CHECK_THROWS_AS(octo::cross_entropy_per_sample(ints, labels({0, 1})), octo::ValueError);
  CHECK_THAT(error([&] {
               octo::cross_entropy_per_sample(ints, labels({0, 1}));
             }),
             Catch::Contains("got logits int32"));
  CHECK_THROWS_AS(F::cross_entropy(ints, labels({0, 1})), octo::ValueError);
}
