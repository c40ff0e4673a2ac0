// Layers (Conv2d, pooling, BatchNorm, LayerNorm, Dropout, Embedding, activations): forward and
// backward vs references written here, train/eval modes, initialisation statistics, state_dict
// names, printing, clone(), and a small CNN trained with SGD.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numbers>
#include <random>
#include <set>
#include <sstream>

#include <octo/octo.h>

using octo::Shape;
using octo::Tensor;
using octo::autograd::TensorList;
namespace nn = octo::nn;

namespace {

using Vec = std::vector<double>;

Tensor rand_tensor(const Shape& shape, uint32_t seed, double lo = -2.0, double hi = 2.0) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  Vec v(static_cast<size_t>(octo::detail::shape_numel(shape)));
  for (double& x : v) x = dist(gen);
  return octo::tensor(v, shape, {.dtype = octo::kFloat64});
}

Tensor leaf(const Shape& shape, uint32_t seed) {
  Tensor t = rand_tensor(shape, seed);
  t.requires_grad_();
  return t;
}

Vec vals(const Tensor& t) { return t.to_vector<double>(); }

/// |got - want| <= tol + 1e-9 |want| elementwise (NaN never matches); reports the first miss.
void check_close(const std::vector<double>& got, const std::vector<double>& want,
                 double tol = 1e-9) {
  REQUIRE(got.size() == want.size());
  size_t bad = got.size();
  for (size_t i = 0; i < got.size() && bad == got.size(); ++i)
    if (!(std::abs(got[i] - want[i]) <= tol + 1e-9 * std::abs(want[i]))) bad = i;
  INFO("first mismatch at element " << bad << ": got " << (bad < got.size() ? got[bad] : 0.0)
                                    << ", want " << (bad < got.size() ? want[bad] : 0.0));
  CHECK(bad == got.size());
}

/// Backpropagates sum(out * g) (g random, fixed by seed) and returns g's values.
Vec backprop(const Tensor& out, uint32_t seed) {
  Tensor g = rand_tensor(out.sizes(), seed);
  octo::sum(out * g).backward();
  return vals(g);
}

std::string repr(const nn::Module& m) {
  std::ostringstream os;
  os << m;
  return os.str();
}

std::set<std::string> state_keys(const nn::Module& m) {
  std::set<std::string> keys;
  for (auto& [k, v] : m.state_dict()) keys.insert(k);
  return keys;
}

/// clone() gives a module with equal outputs and its own parameters.
void check_clone_equal(const nn::Module& m, const Tensor& x) {
  auto copy = m.clone();
  auto& orig = const_cast<nn::Module&>(m);
  check_close(vals(copy->forward(x)), vals(orig.forward(x)), 1e-12);
  auto p1 = m.parameters(), p2 = copy->parameters();
  REQUIRE(p1.size() == p2.size());
  for (size_t i = 0; i < p1.size(); ++i) CHECK_FALSE(p1[i].is_alias_of(p2[i]));
}

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

}  // namespace

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
  CHECK(repr(nn::Conv2d(4, 8, {3, 5},
                        {.stride = {2, 1}, .padding = {1, 2}, .dilation = 2, .groups = 2})) ==
        "Conv2d(4, 8, kernel_size=(3, 5), stride=(2, 1), padding=(1, 2), dilation=(2, 2), "
        "groups=2)");
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

// --- BatchNorm
// ------------------------------------------------------------------------------------

namespace {
/// Normalisation over groups of element indices (channels for batch norm, rows for layer norm)
/// with per-element gamma/beta: y, xhat, batch mean and biased variance per group, and for an
/// upstream gradient g: dx = invstd / M * (M gh - sum gh - xhat sum(gh xhat)), gh = g * gamma.
struct NormRef {
  Vec y, xhat, dx, mean, var;
};
NormRef ref_norm(const Vec& x, const std::vector<std::vector<size_t>>& groups, const Vec& gamma,
                 const Vec& beta, double eps, const Vec& g) {
  NormRef r;
  r.y.resize(x.size());
  r.xhat.resize(x.size());
  r.dx.resize(x.size());
  for (const auto& idx : groups) {
    const double M = static_cast<double>(idx.size());
    double mu = 0, var = 0;
    for (size_t i : idx) mu += x[i];
    mu /= M;
    for (size_t i : idx) var += (x[i] - mu) * (x[i] - mu);
    var /= M;
    r.mean.push_back(mu);
    r.var.push_back(var);
    const double invstd = 1.0 / std::sqrt(var + eps);
    double sg = 0, sgx = 0;
    for (size_t i : idx) {
      r.xhat[i] = (x[i] - mu) * invstd;
      r.y[i] = gamma[i] * r.xhat[i] + beta[i];
      sg += g[i] * gamma[i];
      sgx += g[i] * gamma[i] * r.xhat[i];
    }
    for (size_t i : idx) r.dx[i] = invstd / M * (M * g[i] * gamma[i] - sg - r.xhat[i] * sgx);
  }
  return r;
}

/// Channel c of [N, C, S] data: indices (n * C + c) * S + s.
std::vector<std::vector<size_t>> channel_groups(int64_t N, int64_t C, int64_t S) {
  std::vector<std::vector<size_t>> groups(static_cast<size_t>(C));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t s = 0; s < S; ++s)
        groups[static_cast<size_t>(c)].push_back(static_cast<size_t>((n * C + c) * S + s));
  return groups;
}

/// Per-element values of a per-channel vector over [N, C, S].
Vec per_channel(const Vec& v, int64_t N, int64_t C, int64_t S) {
  Vec out;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t s = 0; s < S; ++s) out.push_back(v[static_cast<size_t>(c)]);
  return out;
}

void set_values(Tensor& t, const Tensor& v) {
  octo::NoGradGuard no_grad;
  t.copy_(v);
}
}  // namespace

TEST_CASE("BatchNorm2d in training: batch statistics, running-stat update, backward") {
  const int64_t N = 3, C = 4, H = 3, W = 2, S = H * W;
  nn::BatchNorm2d bn(C);
  bn.to(octo::kFloat64);
  set_values(bn.weight, rand_tensor({C}, 1, 0.5, 1.5));
  set_values(bn.bias, rand_tensor({C}, 2));
  Vec rm(C, 0.0), rv(C, 1.0);
  for (int step = 1; step <= 2; ++step) {
    Tensor x = leaf({N, C, H, W}, 10 + step);
    bn.zero_grad();
    Tensor y = bn.forward(x);
    Vec g = backprop(y, 20 + step);
    NormRef r = ref_norm(vals(x), channel_groups(N, C, S), per_channel(vals(bn.weight), N, C, S),
                         per_channel(vals(bn.bias), N, C, S), 1e-5, g);
    check_close(vals(y), r.y);
    check_close(vals(x.grad()), r.dx, 1e-8);
    Vec gw(C, 0.0), gb(C, 0.0);
    auto groups = channel_groups(N, C, S);
    for (int64_t c = 0; c < C; ++c)
      for (size_t i : groups[static_cast<size_t>(c)]) {
        gw[static_cast<size_t>(c)] += g[i] * r.xhat[i];
        gb[static_cast<size_t>(c)] += g[i];
      }
    check_close(vals(bn.weight.grad()), gw, 1e-8);
    check_close(vals(bn.bias.grad()), gb, 1e-8);
    // running = 0.9 running + 0.1 batch, with the unbiased variance
    const double M = static_cast<double>(N * S);
    for (int64_t c = 0; c < C; ++c) {
      rm[c] = 0.9 * rm[c] + 0.1 * r.mean[c];
      rv[c] = 0.9 * rv[c] + 0.1 * r.var[c] * M / (M - 1);
    }
    check_close(vals(bn.running_mean), rm, 1e-12);
    check_close(vals(bn.running_var), rv, 1e-12);
    CHECK(bn.num_batches_tracked.item<int64_t>() == step);
  }
  CHECK(bn.num_batches_tracked.dtype() == octo::kInt64);
  CHECK(bn.num_batches_tracked.dim() == 0);
}

TEST_CASE("BatchNorm2d in eval uses the running statistics and leaves them alone") {
  const int64_t N = 2, C = 3, H = 2, W = 3;
  nn::BatchNorm2d bn(C);
  bn.to(octo::kFloat64);
  set_values(bn.weight, rand_tensor({C}, 3, 0.5, 1.5));
  set_values(bn.bias, rand_tensor({C}, 4));
  set_values(bn.running_mean, rand_tensor({C}, 5));
  set_values(bn.running_var, rand_tensor({C}, 6, 0.5, 2.0));
  bn.eval();
  Tensor x = leaf({N, C, H, W}, 7);
  Tensor y = bn.forward(x);
  Vec g = backprop(y, 8);
  Vec xv = vals(x), w = vals(bn.weight), b = vals(bn.bias), m = vals(bn.running_mean),
      v = vals(bn.running_var);
  Vec want, want_dx, gw(C, 0.0), gb(C, 0.0);
  for (int64_t i = 0; i < N * C * H * W; ++i) {
    const size_t c = static_cast<size_t>((i / (H * W)) % C);
    const double invstd = 1.0 / std::sqrt(v[c] + 1e-5);
    want.push_back((xv[i] - m[c]) * invstd * w[c] + b[c]);
    want_dx.push_back(g[i] * w[c] * invstd);
    gw[c] += g[i] * (xv[i] - m[c]) * invstd;
    gb[c] += g[i];
  }
  check_close(vals(y), want);
  check_close(vals(x.grad()), want_dx);
  check_close(vals(bn.weight.grad()), gw);
  check_close(vals(bn.bias.grad()), gb);
  check_close(vals(bn.running_mean), m, 0.0);
  check_close(vals(bn.running_var), v, 0.0);
  CHECK(bn.num_batches_tracked.item<int64_t>() == 0);
  check_clone_equal(bn, x.detach());
}

TEST_CASE("BatchNorm1d on [N, C] and [N, C, L]; momentum=None; no running stats; no affine") {
  for (const Shape& shape : {Shape{6, 3}, Shape{4, 3, 5}}) {
    const int64_t N = shape[0], C = shape[1], S = shape.size() == 3 ? shape[2] : 1;
    nn::BatchNorm1d bn(C);
    bn.to(octo::kFloat64);
    Tensor x = leaf(shape, 30 + static_cast<uint32_t>(S));
    Tensor y = bn.forward(x);
    Vec g = backprop(y, 40);
    NormRef r = ref_norm(vals(x), channel_groups(N, C, S), Vec(x.numel(), 1.0), Vec(x.numel(), 0.0),
                         1e-5, g);
    check_close(vals(y), r.y);
    check_close(vals(x.grad()), r.dx, 1e-8);
  }
  // momentum = None: the running statistics are the cumulative average of the batch stats
  nn::BatchNorm1d cma(2, {.momentum = std::nullopt});
  cma.to(octo::kFloat64);
  Tensor a = rand_tensor({5, 2}, 50), b = rand_tensor({5, 2}, 51);
  cma.forward(a);
  cma.forward(b);
  Vec ma = vals(octo::mean(a, {0})), mb = vals(octo::mean(b, {0}));
  check_close(vals(cma.running_mean), {(ma[0] + mb[0]) / 2, (ma[1] + mb[1]) / 2}, 1e-12);
  CHECK(repr(cma) ==
        "BatchNorm1d(2, eps=1e-05, momentum=None, affine=True, track_running_stats=True)");

  // track_running_stats = false: no buffers, batch statistics even in eval
  nn::BatchNorm1d nostats(2, {.track_running_stats = false});
  nostats.to(octo::kFloat64);
  CHECK(state_keys(nostats) == std::set<std::string>{"weight", "bias"});
  nostats.eval();
  NormRef r =
      ref_norm(vals(a), channel_groups(5, 2, 1), Vec(10, 1.0), Vec(10, 0.0), 1e-5, Vec(10, 0.0));
  check_close(vals(nostats.forward(a)), r.y);
  // affine = false: no parameters
  nn::BatchNorm2d plain(3, {.affine = false});
  CHECK(plain.parameters().empty());
  CHECK(state_keys(plain) ==
        std::set<std::string>{"running_mean", "running_var", "num_batches_tracked"});
}

TEST_CASE("BatchNorm: names, printing, init, clone, errors") {
  nn::BatchNorm2d bn(64);
  CHECK(state_keys(bn) == std::set<std::string>{"weight", "bias", "running_mean", "running_var",
                                                "num_batches_tracked"});
  check_close(vals(bn.weight), Vec(64, 1.0), 0.0);
  check_close(vals(bn.bias), Vec(64, 0.0), 0.0);
  check_close(vals(bn.running_mean), Vec(64, 0.0), 0.0);
  check_close(vals(bn.running_var), Vec(64, 1.0), 0.0);
  CHECK(bn.buffers().size() == 3);
  CHECK(repr(bn) ==
        "BatchNorm2d(64, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)");
  CHECK(repr(nn::BatchNorm1d(8, {.eps = 1e-3, .momentum = 0.01, .affine = false})) ==
        "BatchNorm1d(8, eps=0.001, momentum=0.01, affine=False, track_running_stats=True)");

  // clone in training mode: same output, same running-stat update, independent buffers
  nn::BatchNorm2d src(3);
  Tensor x = octo::randn({4, 3, 2, 2});
  src.forward(x);
  auto copy = std::dynamic_pointer_cast<nn::BatchNorm2d>(src.clone());
  REQUIRE(copy);
  CHECK(copy->is_training());
  check_close(vals(copy->forward(x)), vals(src.forward(x)), 1e-6);
  check_close(vals(copy->running_mean), vals(src.running_mean), 1e-7);
  CHECK(copy->num_batches_tracked.item<int64_t>() == 2);
  CHECK_FALSE(copy->running_mean.is_alias_of(src.running_mean));
  src.reset_running_stats();
  CHECK(src.num_batches_tracked.item<int64_t>() == 0);
  CHECK(copy->num_batches_tracked.item<int64_t>() == 2);

  check_throws<octo::ValueError>(
      [&] {
        bn.forward(octo::randn({2, 64, 3}));
      },
      "BatchNorm2d: expected 4D input (got 3D input");
  check_throws<octo::ValueError>(
      [] {
        nn::BatchNorm1d(3).forward(octo::randn({2, 3, 4, 4}));
      },
      "BatchNorm1d: expected 2D or 3D input (got 4D input");
  check_throws<octo::ValueError>(
      [&] {
        bn.forward(octo::randn({2, 3, 4, 4}));
      },
      "expected input with 64 channels");
  check_throws<octo::ValueError>(
      [] {
        nn::BatchNorm1d(3).forward(octo::randn({1, 3}));
      },
      "Expected more than 1 value per channel");
  check_throws<octo::ValueError>([] { nn::BatchNorm2d(0); }, "num_features must be positive");
}

// --- LayerNorm
// ------------------------------------------------------------------------------------

TEST_CASE("LayerNorm: forward, backward, names, printing, clone") {
  const int64_t R = 4, A = 2, B = 3, D = A * B;
  nn::LayerNorm ln({A, B}, {.eps = 1e-4});
  ln.to(octo::kFloat64);
  check_close(vals(ln.weight), Vec(D, 1.0), 0.0);
  check_close(vals(ln.bias), Vec(D, 0.0), 0.0);
  set_values(ln.weight, rand_tensor({A, B}, 60, 0.5, 1.5));
  set_values(ln.bias, rand_tensor({A, B}, 61));
  Tensor x = leaf({2, 2, A, B}, 62);
  Tensor y = ln.forward(x);
  Vec g = backprop(y, 63);
  std::vector<std::vector<size_t>> rows(R);
  Vec gamma, beta;
  Vec w = vals(ln.weight), b = vals(ln.bias);
  for (int64_t r = 0; r < R; ++r)
    for (int64_t j = 0; j < D; ++j) {
      rows[r].push_back(static_cast<size_t>(r * D + j));
      gamma.push_back(w[j]);
      beta.push_back(b[j]);
    }
  NormRef ref = ref_norm(vals(x), rows, gamma, beta, 1e-4, g);
  check_close(vals(y), ref.y);
  check_close(vals(x.grad()), ref.dx, 1e-8);
  Vec gw(D, 0.0), gb(D, 0.0);
  for (int64_t i = 0; i < R * D; ++i) {
    gw[i % D] += g[i] * ref.xhat[i];
    gb[i % D] += g[i];
  }
  check_close(vals(ln.weight.grad()), gw, 1e-8);
  check_close(vals(ln.bias.grad()), gb, 1e-8);

  CHECK(state_keys(ln) == std::set<std::string>{"weight", "bias"});
  CHECK(nn::LayerNorm({5}, {.elementwise_affine = false}).parameters().empty());
  CHECK(repr(nn::LayerNorm({10})) == "LayerNorm((10,), eps=1e-05, elementwise_affine=True)");
  CHECK(repr(ln) == "LayerNorm((2, 3), eps=0.0001, elementwise_affine=True)");
  check_clone_equal(ln, x.detach());
  check_throws<octo::ValueError>(
      [&] {
        ln.forward(octo::randn({2, 3, 2}, {.dtype = octo::kFloat64}));
      },
      "normalized_shape");
}

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
