// Pooling, Dropout, Embedding, activation layers vs references; whole models; float printing.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <numbers>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <octo/octo.h>

#include "nn/layer_helpers.h"

using octo::Shape;
using octo::Tensor;
namespace nn = octo::nn;
using namespace layer_test;

// --- pooling
// --------------------------------------------------------------------------------------

namespace {
/// Naive 2-d pooling over [N*C planes, H, W] with padding; mode "max" or "avg".
struct PoolRef {
  Vec out, gx;
};
PoolRef ref_pool(const Vec& x, int64_t P, int64_t H, int64_t W, int64_t kh, int64_t kw, int64_t sh,
                 int64_t sw, int64_t ph, int64_t pw, bool is_max, bool count_include_pad,
                 const Vec& g) {
  const int64_t OH = (H + 2 * ph - kh) / sh + 1, OW = (W + 2 * pw - kw) / sw + 1;
  PoolRef r;
  r.gx.assign(x.size(), 0.0);
  for (int64_t p = 0; p < P; ++p)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        const size_t oi = static_cast<size_t>((p * OH + oh) * OW + ow);
        double best = -std::numeric_limits<double>::infinity(), total = 0;
        size_t arg = 0;
        int64_t count = 0;
        std::vector<size_t> window;
        for (int64_t i = 0; i < kh; ++i)
          for (int64_t j = 0; j < kw; ++j) {
            const int64_t ih = oh * sh - ph + i, iw = ow * sw - pw + j;
            if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
            const size_t xi = static_cast<size_t>((p * H + ih) * W + iw);
            window.push_back(xi);
            total += x[xi];
            ++count;
            if (x[xi] > best) {
              best = x[xi];
              arg = xi;
            }
          }
        if (is_max) {
          r.out.push_back(best);
          r.gx[arg] += g[oi];
        } else {
          const double div = count_include_pad ? static_cast<double>(kh * kw) : count;
          r.out.push_back(total / div);
          for (size_t xi : window) r.gx[xi] += g[oi] / div;
        }
      }
  return r;
}
}  // namespace

TEST_CASE("MaxPool2d and AvgPool2d match naive pooling, forward and backward") {
  struct Cfg {
    int64_t N, C, H, W, kh, kw, sh, sw, ph, pw;
  };
  const std::vector<Cfg> cfgs = {{2, 3, 6, 6, 2, 2, 2, 2, 0, 0},
                                 {1, 2, 7, 5, 3, 3, 2, 2, 1, 1},
                                 {2, 1, 5, 8, 3, 2, 1, 2, 1, 0},
                                 {1, 1, 1, 1, 1, 1, 1, 1, 0, 0}};
  uint32_t seed = 70;
  for (const Cfg& c : cfgs) {
    INFO("kernel " << c.kh << "x" << c.kw << " stride " << c.sh << "x" << c.sw << " pad " << c.ph
                   << "x" << c.pw);
    const bool default_stride = c.sh == c.kh && c.sw == c.kw;
    for (int mode = 0; mode < 3; ++mode) {  // max, avg counting padding, avg not counting it
      std::shared_ptr<nn::Module> pool;
      if (mode == 0) {
        pool =
            default_stride
                ? std::make_shared<nn::MaxPool2d>(nn::Size2{c.kh, c.kw},
                                                  nn::MaxPool2dOptions{.padding = {c.ph, c.pw}})
                : std::make_shared<nn::MaxPool2d>(
                      nn::Size2{c.kh, c.kw}, nn::MaxPool2dOptions{.stride = nn::Size2{c.sh, c.sw},
                                                                  .padding = {c.ph, c.pw}});
      } else {
        pool = std::make_shared<nn::AvgPool2d>(
            nn::Size2{c.kh, c.kw}, nn::AvgPool2dOptions{.stride = nn::Size2{c.sh, c.sw},
                                                        .padding = {c.ph, c.pw},
                                                        .count_include_pad = mode == 1});
      }
      Tensor x = leaf({c.N, c.C, c.H, c.W}, seed++);
      Tensor y = pool->forward(x);
      Vec g = backprop(y, seed++);
      PoolRef r = ref_pool(vals(x), c.N * c.C, c.H, c.W, c.kh, c.kw, c.sh, c.sw, c.ph, c.pw,
                           mode == 0, mode == 1, g);
      check_close(vals(y), r.out);
      check_close(vals(x.grad()), r.gx);
    }
  }
}

TEST_CASE("AdaptiveAvgPool2d matches torch's window rule; pooling printing and errors") {
  const int64_t N = 2, C = 2, H = 7, W = 5, OH = 3, OW = 2;
  nn::AdaptiveAvgPool2d pool({OH, OW});
  Tensor x = leaf({N, C, H, W}, 80);
  Tensor y = pool.forward(x);
  Vec g = backprop(y, 81);
  Vec xv = vals(x), want, gx(xv.size(), 0.0);
  for (int64_t p = 0; p < N * C; ++p)
    for (int64_t i = 0; i < OH; ++i)
      for (int64_t j = 0; j < OW; ++j) {
        const int64_t h0 = i * H / OH, h1 = ((i + 1) * H + OH - 1) / OH;
        const int64_t w0 = j * W / OW, w1 = ((j + 1) * W + OW - 1) / OW;
        const double cnt = static_cast<double>((h1 - h0) * (w1 - w0));
        double s = 0;
        for (int64_t h = h0; h < h1; ++h)
          for (int64_t w = w0; w < w1; ++w) s += xv[(p * H + h) * W + w];
        want.push_back(s / cnt);
        for (int64_t h = h0; h < h1; ++h)
          for (int64_t w = w0; w < w1; ++w)
            gx[(p * H + h) * W + w] += g[(p * OH + i) * OW + j] / cnt;
      }
  check_close(vals(y), want);
  check_close(vals(x.grad()), gx);
  // global average pooling, unbatched input
  Tensor u = rand_tensor({3, 4, 4}, 82);
  check_close(vals(nn::AdaptiveAvgPool2d(1).forward(u)), vals(octo::mean(u, {1, 2}, true)));

  CHECK(repr(nn::MaxPool2d(2)) ==
        "MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)");
  CHECK(repr(nn::MaxPool2d({3, 2}, {.stride = 1, .padding = {1, 0}})) ==
        "MaxPool2d(kernel_size=(3, 2), stride=1, padding=(1, 0), dilation=1, ceil_mode=False)");
  CHECK(repr(nn::AvgPool2d(2)) == "AvgPool2d(kernel_size=2, stride=2, padding=0)");
  CHECK(repr(nn::AdaptiveAvgPool2d({1, 1})) == "AdaptiveAvgPool2d(output_size=(1, 1))");
  CHECK(repr(nn::AdaptiveAvgPool2d(7)) == "AdaptiveAvgPool2d(output_size=7)");
  CHECK(nn::MaxPool2d(2).parameters().empty());
  check_clone_equal(nn::MaxPool2d(3, {.stride = 2, .padding = 1}), rand_tensor({1, 2, 6, 6}, 83));
  check_clone_equal(nn::AvgPool2d(2), rand_tensor({1, 2, 6, 6}, 84));
  check_clone_equal(pool, x.detach());

  check_throws<octo::ValueError>([] { nn::MaxPool2d(2, {.padding = 2}); },
                                 "at most half of kernel size");
  check_throws<octo::ValueError>([] { nn::AvgPool2d(0); }, "kernel_size must be positive");
  check_throws<octo::ValueError>(
      [] {
        nn::MaxPool2d(2).forward(octo::randn({2, 3}));
      },
      "max_pool2d");
}

// --- Dropout
// --------------------------------------------------------------------------------------

TEST_CASE("Dropout: zero fraction, scaling, backward, eval identity, printing") {
  octo::manual_seed(7);
  const double p = 0.3;
  nn::Dropout drop(p);
  Tensor x = octo::ones({200, 500}, {.dtype = octo::kFloat64});
  x.requires_grad_();
  Tensor y = drop.forward(x);
  Vec yv = vals(y);
  int64_t zeros = 0, scaled = 0;
  for (double v : yv) {
    zeros += v == 0.0;
    scaled += std::abs(v - 1.0 / (1.0 - p)) < 1e-12;
  }
  CHECK(zeros + scaled == static_cast<int64_t>(yv.size()));  // nothing else
  CHECK(static_cast<double>(zeros) / yv.size() == Approx(p).margin(0.01));
  // the gradient is the same mask: 0 where dropped, 1 / (1 - p) elsewhere
  octo::sum(y).backward();
  check_close(vals(x.grad()), yv, 0.0);

  drop.eval();
  Tensor xe = rand_tensor({3, 4}, 90);
  check_close(vals(drop.forward(xe)), vals(xe), 0.0);
  drop.train();
  check_close(vals(nn::Dropout(0.0).forward(xe)), vals(xe), 0.0);
  check_close(vals(nn::Dropout(1.0).forward(xe)), Vec(12, 0.0), 0.0);

  // a clone draws the same mask from the same generator state
  auto copy = drop.clone();
  octo::manual_seed(3);
  Vec a = vals(drop.forward(xe));
  octo::manual_seed(3);
  check_close(vals(copy->forward(xe)), a, 0.0);

  CHECK(repr(nn::Dropout()) == "Dropout(p=0.5, inplace=False)");
  CHECK(repr(nn::Dropout(0.1)) == "Dropout(p=0.1, inplace=False)");
  check_throws<octo::ValueError>([] { nn::Dropout(1.5); }, "between 0 and 1");
}

// --- Embedding
// ------------------------------------------------------------------------------------

TEST_CASE("Embedding: lookup, gradient, padding_idx, N(0, 1) init, printing, from_pretrained") {
  octo::manual_seed(11);
  nn::Embedding big(1000, 100);
  Vec w = vals(big.weight);
  double mean = 0, var = 0;
  for (double v : w) mean += v;
  mean /= static_cast<double>(w.size());
  for (double v : w) var += (v - mean) * (v - mean);
  var /= static_cast<double>(w.size());
  CHECK(std::abs(mean) < 0.02);
  CHECK(std::sqrt(var) == Approx(1.0).margin(0.02));

  nn::Embedding emb(6, 3, {.padding_idx = -2});  // -2 means row 4
  emb.to(octo::kFloat64);
  REQUIRE(emb.padding_idx.has_value());
  CHECK(*emb.padding_idx == 4);
  check_close(vals(emb.weight.select(0, 4)), Vec(3, 0.0), 0.0);
  CHECK(repr(emb) == "Embedding(6, 3, padding_idx=4)");
  CHECK(repr(nn::Embedding(10, 3)) == "Embedding(10, 3)");
  CHECK(state_keys(emb) == std::set<std::string>{"weight"});

  const std::vector<int64_t> idx = {1, 4, 1, 0, 5, 4};
  Tensor ids = octo::from_vector<int64_t>(idx, {2, 3});
  Tensor y = emb.forward(ids);
  CHECK(y.sizes() == Shape{2, 3, 3});
  Vec wv = vals(emb.weight), want;
  for (int64_t i : idx)
    for (int64_t d = 0; d < 3; ++d) want.push_back(wv[i * 3 + d]);
  check_close(vals(y), want, 0.0);
  Vec g = backprop(y, 91);
  Vec gw(18, 0.0);
  for (size_t k = 0; k < idx.size(); ++k)
    for (int64_t d = 0; d < 3; ++d)
      if (idx[k] != 4) gw[idx[k] * 3 + d] += g[k * 3 + d];  // the padding row gets nothing
  check_close(vals(emb.weight.grad()), gw);
  check_clone_equal(emb, ids);

  Tensor table = rand_tensor({4, 2}, 92);
  auto frozen = nn::Embedding::from_pretrained(table);
  check_close(vals(frozen->weight), vals(table), 0.0);
  CHECK_FALSE(frozen->weight.requires_grad());
  CHECK_FALSE(frozen->weight.is_alias_of(table));
  CHECK(nn::Embedding::from_pretrained(table, false)->weight.requires_grad());

  check_throws<octo::IndexError>([&] { emb.forward(octo::from_vector<int64_t>({6}, {1})); },
                                 "embedding");
  check_throws<octo::IndexError>([] { nn::Embedding(5, 2, {.padding_idx = 5}); },
                                 "padding_idx must be within num_embeddings");
  check_throws<octo::ValueError>([&] { emb.forward(octo::zeros({2})); }, "embedding");
}

// --- activations
// ----------------------------------------------------------------------------------

TEST_CASE("activation layers: forward and backward vs formulas, printing") {
  using Fn = std::function<double(double)>;
  const double k = std::sqrt(2.0 / std::numbers::pi);
  auto phi = [](double x) { return 0.5 * (1 + std::erf(x / std::sqrt(2.0))); };
  auto sig = [](double x) { return 1 / (1 + std::exp(-x)); };
  struct Case {
    std::shared_ptr<nn::Module> m;
    Fn f, df;
    std::string repr;
  };
  const std::vector<Case> cases = {
      {std::make_shared<nn::ReLU>(), [](double x) { return std::max(x, 0.0); },
       [](double x) { return x > 0 ? 1.0 : 0.0; }, "ReLU()"},
      {std::make_shared<nn::LeakyReLU>(0.2), [](double x) { return x > 0 ? x : 0.2 * x; },
       [](double x) { return x > 0 ? 1.0 : 0.2; }, "LeakyReLU(negative_slope=0.2)"},
      {std::make_shared<nn::GELU>(), [&](double x) { return x * phi(x); },
       [&](double x) {
         return phi(x) + x * std::exp(-x * x / 2) / std::sqrt(2 * std::numbers::pi);
       },
       "GELU(approximate='none')"},
      {std::make_shared<nn::GELU>("tanh"),
       [&](double x) { return 0.5 * x * (1 + std::tanh(k * (x + 0.044715 * x * x * x))); },
       [&](double x) {
         const double t = std::tanh(k * (x + 0.044715 * x * x * x));
         return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x);
       },
       "GELU(approximate='tanh')"},
      {std::make_shared<nn::SiLU>(), [&](double x) { return x * sig(x); },
       [&](double x) { return sig(x) * (1 + x * (1 - sig(x))); }, "SiLU()"},
      {std::make_shared<nn::Tanh>(), [](double x) { return std::tanh(x); },
       [](double x) { return 1 - std::tanh(x) * std::tanh(x); }, "Tanh()"},
      {std::make_shared<nn::Sigmoid>(), sig, [&](double x) { return sig(x) * (1 - sig(x)); },
       "Sigmoid()"},
  };
  uint32_t seed = 100;
  for (const Case& c : cases) {
    INFO(c.repr);
    Tensor x = leaf({3, 5}, seed++);
    Tensor y = c.m->forward(x);
    Vec g = backprop(y, seed++), xv = vals(x), want, want_dx;
    for (size_t i = 0; i < xv.size(); ++i) {
      want.push_back(c.f(xv[i]));
      want_dx.push_back(g[i] * c.df(xv[i]));
    }
    check_close(vals(y), want, 1e-12);
    check_close(vals(x.grad()), want_dx, 1e-12);
    CHECK(repr(*c.m) == c.repr);
    CHECK(c.m->parameters().empty());
    check_clone_equal(*c.m, x.detach());
  }
  CHECK(repr(nn::LeakyReLU()) == "LeakyReLU(negative_slope=0.01)");
  check_throws<octo::ValueError>([] { nn::GELU("fast"); }, "approximate must be");

  // Softmax / LogSoftmax along dim 1 of [3, 4]
  for (bool log : {false, true}) {
    std::shared_ptr<nn::Module> m =
        log ? std::shared_ptr<nn::Module>(std::make_shared<nn::LogSoftmax>(1))
            : std::make_shared<nn::Softmax>(1);
    Tensor x = leaf({3, 4}, 120);
    Tensor y = m->forward(x);
    Vec g = backprop(y, 121), xv = vals(x), want, want_dx;
    for (int r = 0; r < 3; ++r) {
      double z = 0, gs = 0, gsum = 0;
      Vec s(4);
      for (int j = 0; j < 4; ++j) z += std::exp(xv[r * 4 + j]);
      for (int j = 0; j < 4; ++j) {
        s[j] = std::exp(xv[r * 4 + j]) / z;
        gs += g[r * 4 + j] * s[j];
        gsum += g[r * 4 + j];
      }
      for (int j = 0; j < 4; ++j) {
        want.push_back(log ? std::log(s[j]) : s[j]);
        want_dx.push_back(log ? g[r * 4 + j] - s[j] * gsum : s[j] * (g[r * 4 + j] - gs));
      }
    }
    check_close(vals(y), want, 1e-12);
    check_close(vals(x.grad()), want_dx, 1e-12);
  }
  CHECK(repr(nn::Softmax(1)) == "Softmax(dim=1)");
  CHECK(repr(nn::LogSoftmax(-1)) == "LogSoftmax(dim=-1)");
}

// --- putting it together
// --------------------------------------------------------------------------

TEST_CASE("a model of these layers prints and names its state like PyTorch") {
  auto model = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Conv2d>(1, 4, 3, nn::Conv2dOptions{.padding = 1}),
      std::make_shared<nn::BatchNorm2d>(4), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::MaxPool2d>(2), std::make_shared<nn::Flatten>(),
      std::make_shared<nn::Dropout>(0.25), std::make_shared<nn::Linear>(16, 2)});
  CHECK(repr(*model) ==
        "Sequential(\n"
        "  (0): Conv2d(1, 4, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))\n"
        "  (1): BatchNorm2d(4, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)\n"
        "  (2): ReLU()\n"
        "  (3): MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)\n"
        "  (4): Flatten(start_dim=1, end_dim=-1)\n"
        "  (5): Dropout(p=0.25, inplace=False)\n"
        "  (6): Linear(in_features=16, out_features=2, bias=True)\n"
        ")");
  CHECK(state_keys(*model) == std::set<std::string>{"0.weight", "0.bias", "1.weight", "1.bias",
                                                    "1.running_mean", "1.running_var",
                                                    "1.num_batches_tracked", "6.weight", "6.bias"});
  // float64 conversion keeps num_batches_tracked int64; a round trip through state_dict works
  model->to(octo::kFloat64);
  auto bn = std::dynamic_pointer_cast<nn::BatchNorm2d>((*model)[1]);
  CHECK(bn->running_mean.dtype() == octo::kFloat64);
  CHECK(bn->num_batches_tracked.dtype() == octo::kInt64);
  model->eval();
  Tensor x = rand_tensor({2, 1, 4, 4}, 130);
  auto copy = model->clone();
  check_close(vals(copy->forward(x)), vals(model->forward(x)), 1e-12);
}

TEST_CASE("a small CNN trained with plain SGD separates synthetic images") {
  // Vertical bars (class 0) vs horizontal bars (class 1) at random positions, with noise.
  octo::manual_seed(0);
  std::mt19937 gen(5);
  std::normal_distribution<double> noise(0.0, 0.3);
  const int64_t N = 96, S = 8;
  Vec images;
  std::vector<int64_t> ys;
  for (int64_t n = 0; n < N; ++n) {
    const int64_t cls = n % 2, pos = static_cast<int64_t>(gen() % S);
    for (int64_t h = 0; h < S; ++h)
      for (int64_t w = 0; w < S; ++w)
        images.push_back(((cls ? h : w) == pos ? 1.0 : 0.0) + noise(gen));
    ys.push_back(cls);
  }
  Tensor X = octo::tensor(images, {N, 1, S, S});
  Tensor Y = octo::from_vector<int64_t>(ys, {N});

  auto model = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Conv2d>(1, 6, 3, nn::Conv2dOptions{.padding = 1}),
      std::make_shared<nn::BatchNorm2d>(6), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::MaxPool2d>(2),
      std::make_shared<nn::Conv2d>(6, 8, 3, nn::Conv2dOptions{.padding = 1}),
      std::make_shared<nn::BatchNorm2d>(8), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::MaxPool2d>(2), std::make_shared<nn::Flatten>(),
      std::make_shared<nn::Linear>(8 * 2 * 2, 2)});
  nn::CrossEntropyLoss criterion;
  const double lr = 0.1;
  const int64_t batch = 16;
  double first_loss = 0, last_loss = 0;
  for (int epoch = 0; epoch < 15; ++epoch) {
    Tensor perm = octo::randperm(N);
    for (int64_t b = 0; b < N; b += batch) {
      Tensor idx = perm.slice(0, b, b + batch).contiguous();
      Tensor loss =
          criterion(model->forward(octo::index_select(X, 0, idx)), octo::index_select(Y, 0, idx));
      if (epoch == 0 && b == 0) first_loss = loss.item<double>();
      last_loss = loss.item<double>();
      model->zero_grad();
      loss.backward();
      octo::NoGradGuard no_grad;
      for (Tensor& p : model->parameters()) p.add_(p.grad(), -lr);
    }
  }
  model->eval();
  Tensor pred = octo::argmax(model->forward(X), 1);
  auto pv = pred.to_vector<int64_t>();
  int64_t correct = 0;
  for (int64_t n = 0; n < N; ++n) correct += pv[n] == ys[n];
  INFO("first loss " << first_loss << ", last loss " << last_loss);
  CHECK(static_cast<double>(correct) / N >= 0.99);
  CHECK(last_loss < first_loss);
}

TEST_CASE("reprs print floats as Python does") {
  using nn::detail::py_float;
  CHECK(py_float(1e-5) == "1e-05");
  CHECK(py_float(0.0001) == "0.0001");
  CHECK(py_float(0.1) == "0.1");
  CHECK(py_float(1.0) == "1.0");
  CHECK(py_float(0.0) == "0.0");
  CHECK(py_float(123.456) == "123.456");
  CHECK(py_float(-2.5e-7) == "-2.5e-07");
  CHECK(py_float(1e15) == "1000000000000000.0");
  CHECK(py_float(1e16) == "1e+16");
  CHECK(py_float(1.5e300) == "1.5e+300");
}
