// The fused cross-entropy kernels (CPU backend) against straightforward loops written here.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <octo/octo.h>

#include "kernels/backend.h"

using octo::DType;
using octo::Shape;
using octo::Tensor;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

std::vector<double> values(const Tensor& t) {
  return t.contiguous().to(octo::kFloat64).to_vector<double>();
}

/// One sample's loss, logsumexp and gradient (times g) by the textbook formulas, in double.
struct RefRow {
  double loss = 0, lse = 0;
  std::vector<double> grad;
};

RefRow ref_row(const std::vector<double>& x, int64_t y, const std::vector<double>& w,
               int64_t ignore_index, double e, double g) {
  const size_t C = x.size();
  auto wc = [&](size_t c) { return w.empty() ? 1.0 : w[c]; };
  RefRow r;
  double m = -kInf;
  for (double v : x) m = std::max(m, v);
  double z = 0;
  for (double v : x) z += std::exp(v - m);
  r.lse = m + std::log(z);
  r.grad.assign(C, 0.0);
  if (y == ignore_index) return r;
  const auto t = static_cast<size_t>(y);
  r.loss = -(1 - e) * wc(t) * (x[t] - r.lse);
  double coef_sum = (1 - e) * wc(t);
  if (e > 0) {
    for (size_t c = 0; c < C; ++c) {
      r.loss -= e / static_cast<double>(C) * wc(c) * (x[c] - r.lse);
      coef_sum += e / static_cast<double>(C) * wc(c);
    }
  }
  for (size_t c = 0; c < C; ++c) {
    double coef = (c == t ? (1 - e) * wc(t) : 0.0) + e / static_cast<double>(C) * wc(c);
    r.grad[c] = g * (std::exp(x[c] - r.lse) * coef_sum - coef);
  }
  return r;
}

/// |got - want| <= tol * (1 + |want|) elementwise.
void check_close(const std::vector<double>& got, const std::vector<double>& want, double tol,
                 const char* what) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO(what << " element " << i << ": got " << got[i] << ", want " << want[i]);
    CHECK(std::fabs(got[i] - want[i]) <= tol * (1.0 + std::fabs(want[i])));
  }
}

/// Logits [N, C]: contiguous (0), a transpose of [C, N] (1), or every other column of [N, 2C] (2).
Tensor make_logits(int64_t N, int64_t C, DType dtype, int layout) {
  if (layout == 1) return (octo::randn({C, N}, {.dtype = dtype}) * 3.0).t();
  if (layout == 2) return (octo::randn({N, 2 * C}, {.dtype = dtype}) * 3.0).slice(1, 0, 2 * C, 2);
  return octo::randn({N, C}, {.dtype = dtype}) * 3.0;
}

struct Outputs {
  Tensor loss, lse, grad;
};

/// Forward and backward through the CPU primitive; grad_loss is a strided view.
Outputs run(const Tensor& x, const Tensor& y, const Tensor& w, const Tensor& g,
            const octo::kernels::CrossEntropyParams& p) {
  auto& b = octo::kernels::cpu_backend();
  const int64_t N = x.size(0), C = x.size(1);
  Outputs o;
  o.loss = octo::full({N}, 7.0, {.dtype = x.dtype()});
  o.lse = octo::full({N}, 7.0, {.dtype = x.dtype()});
  b.cross_entropy_forward(o.loss.arg(), o.lse.arg(), x.arg(), y.arg(), w.arg(), p);
  o.grad = octo::full({C, N}, 7.0, {.dtype = x.dtype()}).t();  // a strided output
  b.cross_entropy_backward(o.grad.arg(), g.arg(), x.arg(), o.lse.arg(), y.arg(), w.arg(), p);
  return o;
}

}  // namespace

TEST_CASE("cross_entropy kernels match reference loops") {
  struct Case {
    int64_t N, C;
    bool weighted;
    int64_t ignore_index;
    double e;
  };
  const std::vector<Case> cases = {
      {6, 5, false, -100, 0.0}, {6, 5, true, -100, 0.0},  {7, 4, false, 2, 0.0},
      {7, 4, true, 0, 0.0},     {5, 6, false, -100, 0.2}, {5, 6, true, -100, 0.3},
      {8, 3, true, 1, 0.1},     {4, 1, false, -100, 0.0}, {4, 1, true, -100, 0.4},
      {0, 3, true, -100, 0.1},  {3, 300, true, 7, 0.25},  {9, 5, false, 4, 1.0},
  };
  int64_t seed = 1;
  for (DType dtype : {octo::kFloat32, octo::kFloat64}) {
    const double tol = dtype == octo::kFloat32 ? 2e-5 : 1e-12;
    for (const Case& c : cases) {
      for (int layout = 0; layout < 3; ++layout) {
        INFO("dtype " << dtype << " N " << c.N << " C " << c.C << " weighted " << c.weighted
                      << " ignore " << c.ignore_index << " e " << c.e << " layout " << layout);
        octo::manual_seed(static_cast<uint64_t>(seed++));
        Tensor x = make_logits(c.N, c.C, dtype, layout);
        Tensor y = octo::randint(0, c.C, {c.N});
        if (c.ignore_index >= 0 && c.N > 1) {
          y.narrow(0, 0, 1).fill_(c.ignore_index);  // at least one ignored row
        }
        Tensor w;  // every other element of a [2C] tensor: a strided weight
        if (c.weighted) w = (octo::rand({2 * c.C}, {.dtype = dtype}) + 0.2).slice(0, 0, 2 * c.C, 2);
        Tensor g = octo::randn({c.N, 2}, {.dtype = dtype}).select(1, 1);  // strided grad_loss
        const Outputs out =
            run(x, y, w, g, {.ignore_index = c.ignore_index, .label_smoothing = c.e});

        const std::vector<double> xv = values(x),
                                  wv = c.weighted ? values(w) : std::vector<double>{},
                                  gv = values(g);
        const std::vector<int64_t> yv = y.to_vector<int64_t>();
        std::vector<double> want_loss, want_lse, want_grad;
        for (int64_t i = 0; i < c.N; ++i) {
          std::vector<double> row(xv.begin() + i * c.C, xv.begin() + (i + 1) * c.C);
          RefRow r = ref_row(row, yv[static_cast<size_t>(i)], wv, c.ignore_index, c.e,
                             gv[static_cast<size_t>(i)]);
          want_loss.push_back(r.loss);
          want_lse.push_back(r.lse);
          want_grad.insert(want_grad.end(), r.grad.begin(), r.grad.end());
        }
        check_close(values(out.loss), want_loss, tol, "loss");
        check_close(values(out.lse), want_lse, tol, "lse");
        check_close(values(out.grad), want_grad, tol, "grad");
      }
    }
  }
}

TEST_CASE("cross_entropy kernels: -inf and NaN logits behave like log_softmax") {
  auto& b = octo::kernels::cpu_backend();
  const double nan = std::nan("");
  // row 0: target logit -inf -> loss inf; row 1: another class -inf, no smoothing -> finite;
  // row 2: all -inf -> NaN (as log_softmax); row 3: a NaN -> NaN; row 4: -inf, but ignored -> 0.
  Tensor x = octo::tensor({-kInf, 1.0, 2.0, 0.5, -kInf, 1.5, -kInf, -kInf, -kInf, 1.0, nan, 0.0,
                           -kInf, 0.0, 0.0},
                          {.dtype = octo::kFloat64})
                 .view({5, 3});
  Tensor y = octo::from_vector<int64_t>({0, 0, 1, 2, 0}, {5});
  y.narrow(0, 4, 1).fill_(-100);
  Tensor loss = octo::empty({5}, {.dtype = octo::kFloat64});
  Tensor lse = octo::empty({5}, {.dtype = octo::kFloat64});
  b.cross_entropy_forward(loss.arg(), lse.arg(), x.arg(), y.arg(), Tensor().arg(), {});
  std::vector<double> l = values(loss);
  CHECK(l[0] == kInf);
  CHECK(l[1] == Approx(std::log(std::exp(0.5) + std::exp(1.5)) - 0.5));
  CHECK(std::isnan(l[2]));
  CHECK(std::isnan(l[3]));
  CHECK(l[4] == 0.0);
  // The same rows through log_softmax + picking the target agree (NaN where it is NaN).
  std::vector<double> lp = values(octo::log_softmax(x, 1));
  const std::vector<int64_t> t = {0, 0, 1, 2};
  for (size_t i = 0; i < t.size(); ++i) {
    const double want = -lp[i * 3 + static_cast<size_t>(t[i])];
    INFO("row " << i);
    CHECK((std::isnan(want) ? std::isnan(l[i]) : l[i] == Approx(want)));
  }
  // With smoothing a -inf logit of any class makes the loss inf.
  b.cross_entropy_forward(loss.arg(), lse.arg(), x.arg(), y.arg(), Tensor().arg(),
                          {.label_smoothing = 0.1});
  CHECK(values(loss)[1] == kInf);
  // Backward: a -inf logit gets gradient -coef (its softmax is 0); NaN rows stay NaN; the
  // ignored row gets 0.
  Tensor g = octo::ones({5}, {.dtype = octo::kFloat64});
  Tensor gi = octo::empty({5, 3}, {.dtype = octo::kFloat64});
  b.cross_entropy_forward(loss.arg(), lse.arg(), x.arg(), y.arg(), Tensor().arg(), {});
  b.cross_entropy_backward(gi.arg(), g.arg(), x.arg(), lse.arg(), y.arg(), Tensor().arg(), {});
  std::vector<double> gv = values(gi);
  CHECK(gv[0] == -1.0);
  CHECK(gv[3] == Approx(std::exp(0.5) / (std::exp(0.5) + std::exp(1.5)) - 1.0));
  CHECK(gv[4] == 0.0);
  CHECK(std::isnan(gv[9]));
  for (int c = 12; c < 15; ++c) CHECK(gv[static_cast<size_t>(c)] == 0.0);
}

TEST_CASE("cross_entropy kernels reject bad targets and dtypes") {
  auto& b = octo::kernels::cpu_backend();
  Tensor x = octo::randn({3, 4}, {.dtype = octo::kFloat64});
  Tensor loss = octo::empty({3}, {.dtype = octo::kFloat64});
  Tensor lse = octo::empty({3}, {.dtype = octo::kFloat64});
  auto forward = [&](const std::vector<int64_t>& t, int64_t ignore_index) {
    Tensor y = octo::from_vector<int64_t>(t, {3});
    b.cross_entropy_forward(loss.arg(), lse.arg(), x.arg(), y.arg(), Tensor().arg(),
                            {.ignore_index = ignore_index});
  };
  auto message = [&](const std::vector<int64_t>& t, int64_t ignore_index) -> std::string {
    try {
      forward(t, ignore_index);
    } catch (const octo::IndexError& e) {
      return e.what();
    }
    return "no IndexError";
  };
  CHECK_THAT(message({0, 4, 1}, -100),
             Catch::Contains("cross_entropy: target 4 is out of bounds for 4 classes"));
  CHECK_THAT(message({-1, 5, 1}, -100), Catch::Contains("target -1 is out of bounds"));
  CHECK_THAT(message({0, 1, 9}, 3), Catch::Contains("or ignore_index = 3"));
  CHECK_NOTHROW(forward({0, 9, 3}, 9));
  CHECK_NOTHROW(forward({-100, -100, -100}, -100));
  // The backward checks the targets as well.
  Tensor gi = octo::empty({3, 4}, {.dtype = octo::kFloat64});
  Tensor g = octo::ones({3}, {.dtype = octo::kFloat64});
  Tensor bad = octo::from_vector<int64_t>({0, 4, 1}, {3});
  CHECK_THROWS_AS(b.cross_entropy_backward(gi.arg(), g.arg(), x.arg(), lse.arg(), bad.arg(),
                                           Tensor().arg(), {}),
                  octo::IndexError);
  // Only float32 and float64 logits.
  Tensor xi = octo::zeros({3, 4}, {.dtype = octo::kInt64});
  Tensor li = octo::empty({3}, {.dtype = octo::kInt64});
  Tensor y = octo::from_vector<int64_t>({0, 1, 2}, {3});
  try {
    b.cross_entropy_forward(li.arg(), li.arg(), xi.arg(), y.arg(), Tensor().arg(), {});
    FAIL("expected NotImplementedError");
  } catch (const octo::NotImplementedError& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("int64"));
  }
}
