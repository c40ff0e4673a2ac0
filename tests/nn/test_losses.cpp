// Losses (nn::functional and the loss modules): values vs references written here, gradchecks,
// reductions, ignore_index, class weights, label smoothing, and bad inputs.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <sstream>

#include <octo/octo.h>

using octo::Shape;
using octo::Tensor;
using octo::autograd::TensorList;
namespace nn = octo::nn;
namespace F = octo::nn::functional;

namespace {

std::vector<double> randvec(size_t n, uint32_t seed, double lo = -2.0, double hi = 2.0) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(n);
  for (double& x : v) x = dist(gen);
  return v;
}

Tensor rand_tensor(const Shape& shape, uint32_t seed, octo::DType dtype = octo::kFloat64,
                   double lo = -2.0, double hi = 2.0) {
  auto v = randvec(static_cast<size_t>(octo::detail::shape_numel(shape)), seed, lo, hi);
  return octo::tensor(v, shape, {.dtype = dtype});
}

Tensor leaf(const Shape& shape, uint32_t seed, double lo = -2.0, double hi = 2.0) {
  Tensor t = rand_tensor(shape, seed, octo::kFloat64, lo, hi);
  t.requires_grad_();
  return t;
}

Tensor labels(const std::vector<int64_t>& v, const Shape& shape) {
  return octo::from_vector<int64_t>(v, shape);
}

std::vector<double> vals(const Tensor& t) { return t.to_vector<double>(); }
double val(const Tensor& t) { return t.item<double>(); }

/// PyTorch's cross_entropy with class indices, written as plain loops over input [N, C, S]
/// (S = the product of the extra dims) and target [N, S]. Returns per-element losses and the
/// sum of the target weights of the non-ignored elements (the mean's divisor).
struct CeRef {
  std::vector<double> none;
  double sum = 0.0, weight_sum = 0.0;
  double mean() const { return sum / weight_sum; }
};
CeRef ref_cross_entropy(const std::vector<double>& x, int64_t N, int64_t C, int64_t S,
                        const std::vector<int64_t>& y, const std::vector<double>& w,
                        int64_t ignore_index, double eps, bool input_is_logp = false) {
  CeRef r;
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t s = 0; s < S; ++s) {
      auto at = [&](int64_t c) { return x[static_cast<size_t>((n * C + c) * S + s)]; };
      const int64_t t = y[static_cast<size_t>(n * S + s)];
      if (t == ignore_index) {
        r.none.push_back(0.0);
        continue;
      }
      double lse = 0.0;
      if (!input_is_logp) {
        double m = at(0);
        for (int64_t c = 1; c < C; ++c) m = std::max(m, at(c));
        double z = 0.0;
        for (int64_t c = 0; c < C; ++c) z += std::exp(at(c) - m);
        lse = m + std::log(z);
      }
      auto wc = [&](int64_t c) { return w.empty() ? 1.0 : w[static_cast<size_t>(c)]; };
      const double nll = -wc(t) * (at(t) - lse);
      double smooth = 0.0;
      for (int64_t c = 0; c < C; ++c) smooth -= wc(c) * (at(c) - lse);
      const double l = (1.0 - eps) * nll + eps / static_cast<double>(C) * smooth;
      r.none.push_back(l);
      r.sum += l;
      r.weight_sum += wc(t);
    }
  }
  return r;
}

/// |got - want| <= tol + 1e-9 |want| elementwise (NaN never matches); reports the first miss.
void check_close(const std::vector<double>& got, const std::vector<double>& want,
                 double tol = 1e-10) {
  REQUIRE(got.size() == want.size());
  size_t bad = got.size();
  for (size_t i = 0; i < got.size() && bad == got.size(); ++i)
    if (!(std::abs(got[i] - want[i]) <= tol + 1e-9 * std::abs(want[i]))) bad = i;
  INFO("first mismatch at element " << bad << ": got " << (bad < got.size() ? got[bad] : 0.0)
                                    << ", want " << (bad < got.size() ? want[bad] : 0.0));
  CHECK(bad == got.size());
}

}  // namespace

// --- cross_entropy / nll_loss values ------------------------------------------------------------

TEST_CASE("cross_entropy: hand-computed values") {
  CHECK(val(F::cross_entropy(octo::tensor({0.0, 0.0}).view({1, 2}), labels({0}, {1}))) ==
        Approx(std::log(2.0)));
  // logits [1, 2, 3], class 2: log(e + e^2 + e^3) - 3
  Tensor x = octo::tensor({1.0, 2.0, 3.0}, {.dtype = octo::kFloat64}).view({1, 3});
  const double lse = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  CHECK(val(F::cross_entropy(x, labels({2}, {1}))) == Approx(lse - 3.0));
  // label smoothing 0.3: 0.7 * nll + 0.3 / 3 * sum_c -(c - lse)
  const double smooth = (lse - 1) + (lse - 2) + (lse - 3);
  CHECK(val(F::cross_entropy(x, labels({2}, {1}), {.label_smoothing = 0.3})) ==
        Approx(0.7 * (lse - 3.0) + 0.1 * smooth));
  // unbatched [C] with a 0-d target
  CHECK(val(F::cross_entropy(x.view({3}),
                             octo::scalar_tensor(int64_t{2}, {.dtype = octo::kInt64}))) ==
        Approx(lse - 3.0));
  // nll_loss picks -input[i, y_i]
  Tensor lp = octo::tensor({-1.0, -2.0, -3.0, -4.0}, {.dtype = octo::kFloat64}).view({2, 2});
  CHECK(val(F::nll_loss(lp, labels({1, 0}, {2}))) == Approx((2.0 + 3.0) / 2));
  CHECK(val(F::nll_loss(lp, labels({1, 0}, {2}), {.reduction = "sum"})) == Approx(5.0));
  Tensor w = octo::tensor({1.0, 3.0}, {.dtype = octo::kFloat64});
  // weighted mean: (3 * 2 + 1 * 3) / (3 + 1)
  CHECK(val(F::nll_loss(lp, labels({1, 0}, {2}), {.weight = w})) == Approx(9.0 / 4.0));
}

TEST_CASE("cross_entropy matches the reference over weights, ignore_index, smoothing, reductions") {
  struct Case {
    Shape shape;  // [N, C, extra...]
    bool weighted;
    int64_t ignore_index;
    double eps;
  };
  const std::vector<Case> cases = {
      {{5, 4}, false, -100, 0.0},   {{5, 4}, true, -100, 0.0},   {{6, 3}, false, 1, 0.0},
      {{6, 3}, true, 2, 0.0},       {{5, 4}, false, -100, 0.25}, {{5, 4}, true, -100, 0.1},
      {{7, 5}, true, 0, 0.2},       {{2, 3, 4}, true, 1, 0.15},  {{2, 4, 3, 2}, false, -100, 0.0},
      {{3, 3, 2, 2}, true, 2, 0.3}, {{1, 1}, false, -100, 0.0},  {{4, 6}, false, 3, 0.5},
  };
  uint32_t seed = 1;
  for (const Case& c : cases) {
    const int64_t N = c.shape[0], C = c.shape[1];
    int64_t S = 1;
    Shape tshape{N};
    for (size_t d = 2; d < c.shape.size(); ++d) {
      S *= c.shape[d];
      tshape.push_back(c.shape[d]);
    }
    std::mt19937 gen(seed);
    std::vector<int64_t> y(static_cast<size_t>(N * S));
    for (auto& t : y) t = static_cast<int64_t>(gen() % static_cast<uint32_t>(C));
    if (c.ignore_index >= 0) y[0] = c.ignore_index;  // at least one ignored
    std::vector<double> w =
        c.weighted ? randvec(static_cast<size_t>(C), seed + 7, 0.2, 2.0) : std::vector<double>{};
    Tensor x = rand_tensor(c.shape, seed++);
    Tensor target = labels(y, tshape);
    F::CrossEntropyOptions o{.ignore_index = c.ignore_index, .label_smoothing = c.eps};
    if (c.weighted) o.weight = octo::tensor(w, {C}, {.dtype = octo::kFloat64});
    const CeRef ref = ref_cross_entropy(vals(x), N, C, S, y, w, c.ignore_index, c.eps);
    INFO("shape " << octo::shape_str(c.shape) << " weighted " << c.weighted << " ignore "
                  << c.ignore_index << " eps " << c.eps);
    o.reduction = "none";
    Tensor none = F::cross_entropy(x, target, o);
    CHECK(none.sizes() == tshape);
    check_close(vals(none), ref.none);
    o.reduction = "sum";
    CHECK(val(F::cross_entropy(x, target, o)) == Approx(ref.sum).epsilon(1e-12));
    o.reduction = "mean";
    CHECK(val(F::cross_entropy(x, target, o)) == Approx(ref.mean()).epsilon(1e-12));
    // float32 agrees with the float64 reference to float precision
    CHECK(F::cross_entropy(x.to(octo::kFloat32), target, o).item<float>() ==
          Approx(ref.mean()).epsilon(1e-5));
    // nll_loss on log_softmax equals cross_entropy without smoothing
    if (c.eps == 0.0) {
      F::NLLLossOptions no{.weight = o.weight, .ignore_index = c.ignore_index};
      CHECK(val(F::nll_loss(octo::log_softmax(x, 1), target, no)) == Approx(ref.mean()));
    }
  }
}

TEST_CASE("cross_entropy with class-probability targets") {
  const int64_t N = 4, C = 3;
  Tensor x = rand_tensor({N, C}, 11);
  Tensor p = octo::softmax(rand_tensor({N, C}, 12), 1);
  auto xv = vals(x), pv = vals(p);
  std::vector<double> w = {0.5, 1.0, 2.0};
  for (double eps : {0.0, 0.2}) {
    for (bool weighted : {false, true}) {
      std::vector<double> per(N, 0.0);
      double total = 0.0;
      for (int64_t n = 0; n < N; ++n) {
        double m = -1e300, z = 0.0;
        for (int64_t c = 0; c < C; ++c) m = std::max(m, xv[n * C + c]);
        for (int64_t c = 0; c < C; ++c) z += std::exp(xv[n * C + c] - m);
        for (int64_t c = 0; c < C; ++c) {
          const double t = pv[n * C + c] * (1 - eps) + eps / C;
          per[n] -= (weighted ? w[c] : 1.0) * t * (xv[n * C + c] - m - std::log(z));
        }
        total += per[n];
      }
      F::CrossEntropyOptions o{.label_smoothing = eps};
      if (weighted) o.weight = octo::tensor(w, {C}, {.dtype = octo::kFloat64});
      CHECK(val(F::cross_entropy(x, p, o)) == Approx(total / N));
      o.reduction = "sum";
      CHECK(val(F::cross_entropy(x, p, o)) == Approx(total));
      o.reduction = "none";
      check_close(vals(F::cross_entropy(x, p, o)), per);
    }
  }
  CHECK_THROWS_AS(F::cross_entropy(x, p, {.ignore_index = 0}), octo::ValueError);
  CHECK_THROWS_AS(F::cross_entropy(x, octo::zeros({N, C}, {.dtype = octo::kInt64})),
                  octo::ValueError);
}

TEST_CASE("cross_entropy: every target ignored gives NaN for the mean, 0 for the sum") {
  Tensor x = rand_tensor({3, 4}, 3);
  Tensor y = labels({-100, -100, -100}, {3});
  CHECK(std::isnan(val(F::cross_entropy(x, y))));
  CHECK(val(F::cross_entropy(x, y, {.reduction = "sum"})) == 0.0);
  check_close(vals(F::cross_entropy(x, y, {.reduction = "none"})), {0.0, 0.0, 0.0});
  // An ignored entry whose class-0 log-probability is -inf does not poison the result.
  Tensor lp = octo::tensor({-INFINITY, 0.0, -1.0, -2.0}, {.dtype = octo::kFloat64}).view({2, 2});
  CHECK(val(F::nll_loss(lp, labels({-100, 1}, {2}))) == Approx(2.0));
}

// --- gradchecks ---------------------------------------------------------------------------------

TEST_CASE("cross_entropy and nll_loss gradcheck (weights, ignore_index, smoothing, reductions)") {
  using octo::autograd::gradcheck;
  Tensor w = octo::tensor({0.5, 1.5, 1.0, 2.0}, {.dtype = octo::kFloat64});
  Tensor y = labels({0, 3, 1, 3, 2}, {5});
  Tensor y_ign = labels({0, 3, -1, 3, 2}, {5});
  uint32_t seed = 100;
  for (const char* red : {"mean", "sum", "none"}) {
    for (double eps : {0.0, 0.3}) {
      for (bool weighted : {false, true}) {
        for (bool ignore : {false, true}) {
          INFO(red << " eps " << eps << " weighted " << weighted << " ignore " << ignore);
          F::CrossEntropyOptions o{
              .ignore_index = ignore ? -1 : -100, .reduction = red, .label_smoothing = eps};
          if (weighted) o.weight = w;
          Tensor x = leaf({5, 4}, seed++);
          Tensor t = ignore ? y_ign : y;
          CHECK(
              gradcheck([&](const TensorList& in) { return F::cross_entropy(in[0], t, o); }, {x}));
          F::NLLLossOptions no{
              .weight = o.weight, .ignore_index = o.ignore_index, .reduction = red};
          CHECK(gradcheck([&](const TensorList& in) { return F::nll_loss(in[0], t, no); }, {x}));
        }
      }
    }
  }
  // K-dimensional input [N, C, H, W], non-contiguous (a permuted view)
  Tensor xk = leaf({2, 3, 4, 3}, 7);
  Tensor yk = octo::randint(0, 4, {2, 3, 3});
  CHECK(gradcheck(
      [&](const TensorList& in) {
        return F::cross_entropy(in[0].permute({0, 2, 1, 3}), yk,
                                {.weight = w, .ignore_index = 2, .label_smoothing = 0.1});
      },
      {xk}));
  // class-probability targets: the target is differentiable too
  Tensor xp = leaf({3, 4}, 8), tp = leaf({3, 4}, 9, 0.0, 1.0);
  CHECK(gradcheck(
      [&](const TensorList& in) {
        return F::cross_entropy(in[0], in[1], {.weight = w, .label_smoothing = 0.2});
      },
      {xp, tp}));
  // unbatched
  Tensor xu = leaf({4}, 10);
  CHECK(gradcheck(
      [&](const TensorList& in) {
        return F::cross_entropy(in[0], octo::scalar_tensor(int64_t{1}, {.dtype = octo::kInt64}),
                                {.label_smoothing = 0.1});
      },
      {xu}));
}

TEST_CASE("regression losses: values and gradchecks") {
  using octo::autograd::gradcheck;
  Tensor a = octo::tensor({1.0, 2.0, 3.0, -1.5}, {.dtype = octo::kFloat64});
  Tensor b = octo::tensor({1.0, 1.0, 1.0, 0.0}, {.dtype = octo::kFloat64});
  // differences 0, 1, 2, -1.5
  CHECK(val(F::mse_loss(a, b)) == Approx((0 + 1 + 4 + 2.25) / 4));
  CHECK(val(F::mse_loss(a, b, "sum")) == Approx(7.25));
  check_close(vals(F::mse_loss(a, b, "none")), {0, 1, 4, 2.25});
  CHECK(val(F::l1_loss(a, b)) == Approx(4.5 / 4));
  check_close(vals(F::l1_loss(a, b, "none")), {0, 1, 2, 1.5});
  // smooth L1 with beta 1: 0.5 d^2 for |d| < 1, |d| - 0.5 otherwise
  check_close(vals(F::smooth_l1_loss(a, b, "none")), {0, 0.5, 1.5, 1.0});
  check_close(vals(F::smooth_l1_loss(a, b, "none", 2.0)), {0, 0.25, 1.0, 0.5625});
  check_close(vals(F::smooth_l1_loss(a, b, "none", 0.0)), {0, 1, 2, 1.5});
  // Huber with delta 2: 0.5 d^2 for |d| < 2, 2 (|d| - 1) otherwise
  check_close(vals(F::huber_loss(a, b, "none", 2.0)), {0, 0.5, 2.0, 1.125});

  // gradchecks, incl. non-contiguous views; kept away from the kinks of |d|
  Tensor x = leaf({3, 4}, 21), t = leaf({4, 3}, 22);
  auto tt = [](const Tensor& v) { return v.transpose(0, 1); };
  for (const char* red : {"mean", "sum", "none"}) {
    CHECK(gradcheck([&](const TensorList& in) { return F::mse_loss(in[0], tt(in[1]), red); },
                    {x, t}));
    CHECK(
        gradcheck([&](const TensorList& in) { return F::l1_loss(in[0], tt(in[1]), red); }, {x, t}));
    CHECK(gradcheck(
        [&](const TensorList& in) { return F::smooth_l1_loss(in[0], tt(in[1]), red, 0.7); },
        {x, t}));
    CHECK(gradcheck([&](const TensorList& in) { return F::huber_loss(in[0], tt(in[1]), red, 0.7); },
                    {x, t}));
  }
}

TEST_CASE("binary cross entropy (probabilities and logits): values, stability, gradchecks") {
  using octo::autograd::gradcheck;
  const double ln2 = std::log(2.0);
  Tensor zero = octo::zeros({1}, {.dtype = octo::kFloat64});
  Tensor one = octo::ones({1}, {.dtype = octo::kFloat64});
  CHECK(val(F::binary_cross_entropy_with_logits(zero, one)) == Approx(ln2));
  CHECK(val(F::binary_cross_entropy_with_logits(zero, one, {.pos_weight = 3.0 * one})) ==
        Approx(3 * ln2));
  CHECK(val(F::binary_cross_entropy_with_logits(zero, zero, {.pos_weight = 3.0 * one})) ==
        Approx(ln2));
  // huge logits neither overflow nor lose the linear part
  Tensor big = octo::tensor({100.0, -100.0, 1000.0}, {.dtype = octo::kFloat32});
  Tensor tgt = octo::tensor({0.0, 1.0, 1.0}, {.dtype = octo::kFloat32});
  auto l = F::binary_cross_entropy_with_logits(big, tgt, {.reduction = "none"}).to_vector<float>();
  CHECK(l[0] == Approx(100.0f));
  CHECK(l[1] == Approx(100.0f));
  CHECK(l[2] == Approx(0.0f).margin(1e-6));

  // against the direct formula on moderate values, with weight and pos_weight
  Tensor x = rand_tensor({4, 3}, 31), t = rand_tensor({4, 3}, 32, octo::kFloat64, 0.0, 1.0);
  Tensor w = rand_tensor({3}, 33, octo::kFloat64, 0.5, 1.5);
  Tensor pw = rand_tensor({3}, 34, octo::kFloat64, 0.5, 3.0);
  auto xv = vals(x), tv = vals(t), wv = vals(w), pv = vals(pw);
  std::vector<double> want, want_bce;
  for (size_t i = 0; i < xv.size(); ++i) {
    const double s = 1.0 / (1.0 + std::exp(-xv[i]));
    want.push_back(-wv[i % 3] * (pv[i % 3] * tv[i] * std::log(s) + (1 - tv[i]) * std::log(1 - s)));
    want_bce.push_back(-wv[i % 3] * (tv[i] * std::log(s) + (1 - tv[i]) * std::log(1 - s)));
  }
  check_close(vals(F::binary_cross_entropy_with_logits(
                  x, t, {.weight = w, .reduction = "none", .pos_weight = pw})),
              want);
  check_close(
      vals(F::binary_cross_entropy(octo::sigmoid(x), t, {.weight = w, .reduction = "none"})),
      want_bce);
  // binary_cross_entropy clamps the logs at -100, and its gradient stays finite at 0 and 1
  Tensor p = octo::tensor({0.0, 1.0, 0.5}, {.dtype = octo::kFloat64});
  p.requires_grad_();
  Tensor y = octo::tensor({1.0, 0.0, 1.0}, {.dtype = octo::kFloat64});
  Tensor bl = F::binary_cross_entropy(p, y, {.reduction = "none"});
  check_close(vals(bl), {100.0, 100.0, ln2});
  octo::sum(bl).backward();
  for (double g : vals(p.grad())) CHECK(std::isfinite(g));

  Tensor xl = leaf({3, 4}, 35), tl = leaf({3, 4}, 36, 0.0, 1.0);
  Tensor wl = octo::tensor({0.5, 1.0, 1.5, 2.0}, {.dtype = octo::kFloat64});
  for (const char* red : {"mean", "sum", "none"}) {
    CHECK(gradcheck(
        [&](const TensorList& in) {
          return F::binary_cross_entropy_with_logits(
              in[0], in[1], {.weight = wl, .reduction = red, .pos_weight = wl});
        },
        {xl, tl}));
    CHECK(gradcheck(
        [&](const TensorList& in) {
          return F::binary_cross_entropy_with_logits(in[0].t(), in[1].t(), {.reduction = red});
        },
        {xl, tl}));
    Tensor pr = leaf({3, 4}, 37, 0.05, 0.95);
    CHECK(gradcheck(
        [&](const TensorList& in) {
          return F::binary_cross_entropy(in[0], in[1], {.weight = wl, .reduction = red});
        },
        {pr, tl}));
  }
}

// --- bad inputs ---------------------------------------------------------------------------------

template <typename E, typename Fn>
void check_throws(Fn&& fn, const std::string& fragment) {
  try {
    fn();
    FAIL("expected an exception containing \"" << fragment << "\"");
  } catch (const E& e) {
    INFO(e.what());
    CHECK(std::string(e.what()).find(fragment) != std::string::npos);
  }
}

TEST_CASE("losses reject bad targets, shapes, dtypes, reductions and devices") {
  Tensor x = rand_tensor({3, 4}, 41);
  check_throws<octo::IndexError>(
      [&] {
        F::cross_entropy(x, labels({0, 4, 1}, {3}));
      },
      "target 4 is out of bounds for 4 classes");
  check_throws<octo::IndexError>(
      [&] {
        F::cross_entropy(x, labels({0, -3, 1}, {3}));
      },
      "target -3 is out of bounds");
  check_throws<octo::IndexError>(
      [&] {
        F::nll_loss(x, labels({7, 0, 1}, {3}));
      },
      "nll_loss: target 7");
  // the ignored value itself is never range-checked
  CHECK_NOTHROW(F::cross_entropy(x, labels({0, 9, 1}, {3}), {.ignore_index = 9}));
  check_throws<octo::ValueError>(
      [&] { F::cross_entropy(x, octo::zeros({3}, {.dtype = octo::kInt32})); }, "int64");
  check_throws<octo::ValueError>([&] { F::cross_entropy(x, octo::zeros({3})); }, "int64");
  check_throws<octo::ValueError>(
      [&] {
        F::cross_entropy(x, labels({0, 1}, {2}));
      },
      "expected target of shape [3]");
  check_throws<octo::ValueError>(
      [&] {
        F::cross_entropy(rand_tensor({2, 3, 4}, 1), labels({0, 1, 2, 0, 1, 2}, {2, 3}));
      },
      "expected target of shape [2, 4]");
  check_throws<octo::ValueError>(
      [&] {
        F::cross_entropy(x, labels({0, 1, 2}, {3}), {.reduction = "avg"});
      },
      "reduction must be 'none', 'mean' or 'sum', got 'avg'");
  check_throws<octo::ValueError>(
      [&] {
        F::cross_entropy(x, labels({0, 1, 2}, {3}), {.label_smoothing = 1.5});
      },
      "label_smoothing");
  check_throws<octo::ValueError>(
      [&] {
        F::cross_entropy(x, labels({0, 1, 2}, {3}),
                         {.weight = octo::ones({3}, {.dtype = octo::kFloat64})});
      },
      "one value per class, of shape [4]");
  check_throws<octo::ValueError>(
      [&] {
        F::cross_entropy(octo::zeros({3, 4}, {.dtype = octo::kInt64}), labels({0, 1, 2}, {3}));
      },
      "floating point input");
  check_throws<octo::ValueError>(
      [&] {
        F::mse_loss(x, rand_tensor({4, 3}, 2));
      },
      "mse_loss: expected target of the input's shape [3, 4], got [4, 3]");
  check_throws<octo::ValueError>([&] { F::l1_loss(x, rand_tensor({3}, 2)); }, "l1_loss");
  check_throws<octo::ValueError>([&] { F::mse_loss(x, x, "total"); }, "got 'total'");
  check_throws<octo::ValueError>(
      [&] {
        F::binary_cross_entropy_with_logits(x, rand_tensor({3, 1}, 2));
      },
      "shape");
  check_throws<octo::ValueError>(
      [&] {
        F::binary_cross_entropy_with_logits(
            x, x, {.pos_weight = octo::ones({3}, {.dtype = octo::kFloat64})});
      },
      "pos_weight of shape [3] cannot be broadcast");
  check_throws<octo::ValueError>([&] { F::binary_cross_entropy(x, x); }, "between 0 and 1");
  // mixed devices
  Tensor x1 = x.to(octo::Device("cpu:1"));
  check_throws<octo::DeviceError>(
      [&] {
        F::cross_entropy(x1, labels({0, 1, 2}, {3}));
      },
      "Expected all tensors to be on the same device");
  check_throws<octo::DeviceError>([&] { F::binary_cross_entropy_with_logits(x1, x); },
                                  "same device");
  // the loss modules validate their options up front
  CHECK_THROWS_AS(nn::CrossEntropyLoss({.reduction = "avg"}), octo::ValueError);
  CHECK_THROWS_AS(nn::MSELoss("avg"), octo::ValueError);
  CHECK_THROWS_AS(nn::SmoothL1Loss("mean", -1.0), octo::ValueError);
}

TEST_CASE("losses run on another virtual device") {
  const octo::Device dev("cpu:1");
  Tensor x = rand_tensor({3, 4}, 51).to(dev);
  Tensor y = labels({0, 3, 1}, {3}).to(dev);
  Tensor l = F::cross_entropy(x, y,
                              {.weight = octo::ones({4}, {.dtype = octo::kFloat64}).to(dev),
                               .ignore_index = 3,
                               .label_smoothing = 0.1});
  CHECK(l.device() == dev);
  CHECK(val(l) == Approx(val(F::cross_entropy(x.cpu(), y.cpu(),
                                              {.weight = octo::ones({4}, {.dtype = octo::kFloat64}),
                                               .ignore_index = 3,
                                               .label_smoothing = 0.1}))));
}

// --- loss modules
// ---------------------------------------------------------------------------------

TEST_CASE("loss modules match the functions, hold weights as buffers, print and clone") {
  Tensor x = rand_tensor({5, 3}, 61);
  Tensor y = labels({0, 2, 1, 1, 2}, {5});
  Tensor w = octo::tensor({1.0, 2.0, 0.5}, {.dtype = octo::kFloat64});

  nn::CrossEntropyLoss ce({.weight = w, .ignore_index = 1, .label_smoothing = 0.2});
  CHECK(val(ce(x, y)) == Approx(val(F::cross_entropy(
                             x, y, {.weight = w, .ignore_index = 1, .label_smoothing = 0.2}))));
  REQUIRE(ce.state_dict().size() == 1);
  CHECK(ce.state_dict()[0].first == "weight");
  CHECK_FALSE(ce.weight.is_alias_of(w));  // the module owns a copy
  std::ostringstream os;
  os << ce;
  CHECK(os.str() == "CrossEntropyLoss()");
  auto ce2 = std::dynamic_pointer_cast<nn::CrossEntropyLoss>(ce.clone());
  REQUIRE(ce2);
  CHECK(val((*ce2)(x, y)) == Approx(val(ce(x, y))));
  CHECK(nn::CrossEntropyLoss().state_dict().empty());
  // forward_values: the DataParallel entry point, two tensors in
  CHECK(val(ce.forward_values({x, y}).tensor()) == Approx(val(ce(x, y))));
  CHECK_THROWS_AS(ce.forward_values({x}), octo::ValueError);

  nn::NLLLoss nll({.weight = w, .reduction = "sum"});
  CHECK(val(nll(octo::log_softmax(x, 1), y)) ==
        Approx(val(F::cross_entropy(x, y, {.weight = w, .reduction = "sum"}))));

  Tensor t = rand_tensor({5, 3}, 62);
  Tensor p = rand_tensor({5, 3}, 63, octo::kFloat64, 0.0, 1.0);
  CHECK(val(nn::MSELoss()(x, t)) == Approx(val(F::mse_loss(x, t))));
  CHECK(val(nn::MSELoss("sum")(x, t)) == Approx(val(F::mse_loss(x, t, "sum"))));
  CHECK(val(nn::L1Loss()(x, t)) == Approx(val(F::l1_loss(x, t))));
  CHECK(val(nn::SmoothL1Loss("mean", 0.5)(x, t)) ==
        Approx(val(F::smooth_l1_loss(x, t, "mean", 0.5))));
  CHECK(val(nn::HuberLoss("sum", 0.5)(x, t)) == Approx(val(F::huber_loss(x, t, "sum", 0.5))));
  CHECK(val(nn::BCELoss({.weight = w})(octo::sigmoid(x), p)) ==
        Approx(val(F::binary_cross_entropy(octo::sigmoid(x), p, {.weight = w}))));

  nn::BCEWithLogitsLoss bce({.weight = w, .pos_weight = 2.0 * w});
  CHECK(val(bce(x, p)) == Approx(val(F::binary_cross_entropy_with_logits(
                              x, p, {.weight = w, .pos_weight = 2.0 * w}))));
  std::vector<std::string> keys;
  for (auto& [k, v] : bce.state_dict()) keys.push_back(k);
  CHECK(keys == std::vector<std::string>{"weight", "pos_weight"});
  // Module::to converts the registered weights, which the forward then uses
  bce.to(octo::kFloat32);
  CHECK(bce.weight.dtype() == octo::kFloat32);
  CHECK(bce(x.to(octo::kFloat32), p.to(octo::kFloat32)).item<float>() ==
        Approx(val(F::binary_cross_entropy_with_logits(x, p, {.weight = w, .pos_weight = 2.0 * w})))
            .epsilon(1e-5));

  // gradients flow through a module just as through the function
  Tensor xl = leaf({5, 3}, 64);
  CHECK(octo::autograd::gradcheck([&](const TensorList& in) { return ce(in[0], y); }, {xl}));
}
