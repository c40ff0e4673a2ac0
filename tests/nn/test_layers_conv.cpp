// Conv2d layer: forward/backward vs a naive convolution, init, state_dict, printing, errors.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <octo/octo.h>

#include "nn/layer_helpers.h"

using octo::Shape;
using octo::Tensor;
namespace nn = octo::nn;
using namespace layer_test;

// --- Conv2d
// ---------------------------------------------------------------------------------------

namespace {
struct ConvCfg {
  int64_t N, C, H, W, K, kh, kw, sh, sw, ph, pw, dh, dw, groups;
  bool bias;
};

/// Naive convolution and its gradients for upstream gradient g: the same loop accumulates
/// out += x * w and, backwards, gx += g * w, gw += g * x, gb += g.
struct ConvRef {
  Vec out, gx, gw, gb;
  int64_t OH, OW;
};
ConvRef ref_conv(const ConvCfg& c, const Vec& x, const Vec& w, const Vec& b, const Vec* g) {
  ConvRef r;
  r.OH = (c.H + 2 * c.ph - c.dh * (c.kh - 1) - 1) / c.sh + 1;
  r.OW = (c.W + 2 * c.pw - c.dw * (c.kw - 1) - 1) / c.sw + 1;
  const int64_t cpg = c.C / c.groups, kpg = c.K / c.groups;
  r.out.assign(static_cast<size_t>(c.N * c.K * r.OH * r.OW), 0.0);
  r.gx.assign(x.size(), 0.0);
  r.gw.assign(w.size(), 0.0);
  r.gb.assign(static_cast<size_t>(c.K), 0.0);
  for (int64_t n = 0; n < c.N; ++n)
    for (int64_t k = 0; k < c.K; ++k)
      for (int64_t oh = 0; oh < r.OH; ++oh)
        for (int64_t ow = 0; ow < r.OW; ++ow) {
          const size_t oi = static_cast<size_t>(((n * c.K + k) * r.OH + oh) * r.OW + ow);
          const double go = g ? (*g)[oi] : 0.0;
          double acc = c.bias ? b[static_cast<size_t>(k)] : 0.0;
          r.gb[static_cast<size_t>(k)] += go;
          const int64_t grp = k / kpg;
          for (int64_t ci = 0; ci < cpg; ++ci)
            for (int64_t i = 0; i < c.kh; ++i)
              for (int64_t j = 0; j < c.kw; ++j) {
                const int64_t ih = oh * c.sh - c.ph + i * c.dh, iw = ow * c.sw - c.pw + j * c.dw;
                if (ih < 0 || ih >= c.H || iw < 0 || iw >= c.W) continue;
                const size_t xi =
                    static_cast<size_t>(((n * c.C + grp * cpg + ci) * c.H + ih) * c.W + iw);
                const size_t wi = static_cast<size_t>(((k * cpg + ci) * c.kh + i) * c.kw + j);
                acc += x[xi] * w[wi];
                r.gx[xi] += go * w[wi];
                r.gw[wi] += go * x[xi];
              }
          r.out[oi] = acc;
        }
  return r;
}
}  // namespace

TEST_CASE("Conv2d forward and backward match a naive convolution") {
  const std::vector<ConvCfg> cfgs = {
      {2, 3, 6, 5, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, true},
      {2, 4, 7, 8, 6, 3, 2, 2, 1, 1, 0, 1, 2, 2, true},
      {1, 2, 5, 5, 2, 1, 1, 1, 1, 0, 0, 1, 1, 1, false},
      {3, 6, 9, 7, 6, 3, 3, 2, 3, 2, 1, 2, 1, 3, false},
      {1, 1, 4, 4, 1, 4, 4, 1, 1, 0, 0, 1, 1, 1, true},  // kernel covers the whole image
  };
  uint32_t seed = 1;
  for (const ConvCfg& c : cfgs) {
    INFO("C " << c.C << " K " << c.K << " kernel " << c.kh << "x" << c.kw << " groups "
              << c.groups);
    nn::Conv2d conv(c.C, c.K, {c.kh, c.kw},
                    {.stride = {c.sh, c.sw},
                     .padding = {c.ph, c.pw},
                     .dilation = {c.dh, c.dw},
                     .groups = c.groups,
                     .bias = c.bias});
    conv.to(octo::kFloat64);
    CHECK(conv.weight.sizes() == Shape{c.K, c.C / c.groups, c.kh, c.kw});
    CHECK(conv.bias.defined() == c.bias);
    Tensor x = leaf({c.N, c.C, c.H, c.W}, seed++);
    Tensor out = conv.forward(x);
    Vec g = backprop(out, seed++);
    ConvRef r = ref_conv(c, vals(x), vals(conv.weight), c.bias ? vals(conv.bias) : Vec{}, &g);
    CHECK(out.sizes() == Shape{c.N, c.K, r.OH, r.OW});
    check_close(vals(out), r.out);
    check_close(vals(x.grad()), r.gx);
    check_close(vals(conv.weight.grad()), r.gw);
    if (c.bias) check_close(vals(conv.bias.grad()), r.gb);
  }
  // float32 agrees with the float64 reference to float precision
  {
    const ConvCfg& c = cfgs[1];
    nn::Conv2d conv(c.C, c.K, {c.kh, c.kw},
                    {.stride = {c.sh, c.sw},
                     .padding = {c.ph, c.pw},
                     .dilation = {c.dh, c.dw},
                     .groups = c.groups});
    Tensor x = rand_tensor({c.N, c.C, c.H, c.W}, 97).to(octo::kFloat32);
    ConvRef r = ref_conv(c, vals(x), vals(conv.weight), vals(conv.bias), nullptr);
    check_close(vals(conv.forward(x)), r.out, 1e-4);
  }
  // unbatched [C, H, W] input, non-contiguous input
  nn::Conv2d conv(2, 3, 3, {.padding = 1});
  conv.to(octo::kFloat64);
  Tensor x = rand_tensor({2, 5, 4}, 99);
  check_close(vals(conv.forward(x)), vals(conv.forward(x.unsqueeze(0)).squeeze(0)), 1e-12);
  Tensor xt = rand_tensor({1, 2, 4, 5}, 98).transpose(2, 3);
  check_close(vals(conv.forward(xt)), vals(conv.forward(xt.contiguous())), 1e-12);
}

TEST_CASE("Conv2d: default initialisation, state_dict, printing, clone, errors") {
  octo::manual_seed(1);
  nn::Conv2d conv(16, 32, 3);
  // kaiming_uniform_(a = sqrt(5)) gives bound = gain * sqrt(3 / fan_in) = 1 / sqrt(fan_in)
  const double bound = 1.0 / std::sqrt(16.0 * 9.0);
  Vec w = vals(conv.weight), b = vals(conv.bias);
  double mx = 0, mean = 0, var = 0;
  for (double v : w) {
    mx = std::max(mx, std::abs(v));
    mean += v;
  }
  mean /= static_cast<double>(w.size());
  for (double v : w) var += (v - mean) * (v - mean);
  var /= static_cast<double>(w.size());
  CHECK(mx <= bound);
  CHECK(mx > 0.97 * bound);
  CHECK(std::abs(mean) < 0.005);
  CHECK(var == Approx(bound * bound / 3).epsilon(0.08));
  for (double v : b) CHECK(std::abs(v) <= bound);
  CHECK(*std::max_element(b.begin(), b.end()) - *std::min_element(b.begin(), b.end()) > bound);
  // many biases reach close to their bound 1 / sqrt(fan_in) with fan_in = 4 * 2 * 3
  nn::Conv2d wide(4, 1000, {2, 3});
  const double bbound = 1.0 / std::sqrt(24.0);
  double bmax = 0;
  for (double v : vals(wide.bias)) bmax = std::max(bmax, std::abs(v));
  CHECK(bmax <= bbound);
  CHECK(bmax > 0.97 * bbound);
  // groups and a rectangular kernel: fan_in = C_in / groups * kH * kW
  nn::Conv2d gconv(6, 8, {3, 5}, {.groups = 2});
  const double gbound = 1.0 / std::sqrt(3.0 * 15.0);
  for (double v : vals(gconv.weight)) CHECK(std::abs(v) <= gbound);
  for (double v : vals(gconv.bias)) CHECK(std::abs(v) <= gbound);

  CHECK(state_keys(conv) == std::set<std::string>{"weight", "bias"});
  CHECK(state_keys(nn::Conv2d(3, 4, 3, {.bias = false})) == std::set<std::string>{"weight"});
  CHECK(repr(nn::Conv2d(3, 64, 3, {.stride = 1, .padding = 1, .bias = false})) ==
        "Conv2d(3, 64, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), bias=False)");
  CHECK(repr(nn::Conv2d(3, 64, 7, {.stride = 2})) ==
        "Conv2d(3, 64, kernel_size=(7, 7), stride=(2, 2))");
  CHECK(
      repr(nn::Conv2d(4, 8, {3, 5},
                      {.stride = {2, 1}, .padding = {1, 2}, .dilation = 2, .groups = 2})) ==
      "Conv2d(4, 8, kernel_size=(3, 5), stride=(2, 1), padding=(1, 2), dilation=(2, 2), groups=2)");
  check_clone_equal(conv, octo::randn({2, 16, 5, 5}));

  check_throws<octo::ValueError>([] { nn::Conv2d(3, 4, 3, {.groups = 2}); },
                                 "in_channels must be divisible by groups");
  check_throws<octo::ValueError>([] { nn::Conv2d(4, 3, 3, {.groups = 2}); },
                                 "out_channels must be divisible by groups");
  check_throws<octo::ValueError>([] { nn::Conv2d(3, 4, 0); }, "kernel_size must be positive");
  check_throws<octo::ValueError>([] { nn::Conv2d(3, 4, 3, {.stride = 0}); }, "stride");
  check_throws<octo::ValueError>([&] { conv.forward(octo::randn({1, 3, 5, 5})); }, "conv2d");
  check_throws<octo::DeviceError>(
      [&] {
        conv.forward(octo::randn({1, 16, 5, 5}, {.device = octo::Device("cpu:1")}));
      },
      "same device");
}
