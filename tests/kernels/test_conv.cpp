// Tests for the conv family (kernels layer): the CPU conv2d primitives against naive loops.
#include <catch2/catch.hpp>

#include <octo/octo.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/backend.h"

using octo::Shape;
using octo::Tensor;
using octo::kernels::Conv2dParams;
using octo::kernels::TensorArg;

namespace {

Tensor random_tensor(const Shape& shape, octo::DType dtype, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<double> v(static_cast<size_t>(octo::detail::shape_numel(shape)));
  for (double& x : v) x = dist(gen);
  return octo::tensor(v, shape, {.dtype = dtype});
}

/// A tensor of `shape` whose memory is laid out in the order `perm` (so it is not contiguous),
/// filled with random values: the permuted view of a contiguous tensor.
Tensor random_strided(const Shape& shape, const Shape& perm, octo::DType dtype, uint32_t seed) {
  Shape base(shape.size());
  Shape inverse(shape.size());
  for (size_t i = 0; i < perm.size(); ++i) base[i] = shape[perm[i]];
  for (size_t i = 0; i < perm.size(); ++i) inverse[perm[i]] = static_cast<int64_t>(i);
  Tensor t = random_tensor(base, dtype, seed).permute(inverse);
  REQUIRE(t.sizes() == shape);
  return t;
}

struct Config {
  int64_t N, C, H, W, K, kH, kW;
  int64_t sH, sW, pH, pW, dH, dW, groups;
  int64_t OH() const { return (H + 2 * pH - dH * (kH - 1) - 1) / sH + 1; }
  int64_t OW() const { return (W + 2 * pW - dW * (kW - 1) - 1) / sW + 1; }
  Conv2dParams params() const {
    Conv2dParams p;
    p.stride[0] = sH, p.stride[1] = sW, p.padding[0] = pH, p.padding[1] = pW;
    p.dilation[0] = dH, p.dilation[1] = dW, p.groups = groups;
    return p;
  }
};

const std::vector<Config> kConfigs = {
    // N  C  H   W  K kH kW sH sW pH pW dH dW g
    {1, 1, 5, 5, 1, 3, 3, 1, 1, 0, 0, 1, 1, 1},     // plain
    {3, 3, 7, 6, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1},     // stride 2, padding 1, odd sizes
    {2, 4, 9, 8, 6, 3, 2, 1, 2, 2, 1, 2, 1, 2},     // mixed stride/padding/dilation, groups 2
    {2, 4, 6, 7, 4, 3, 3, 1, 1, 1, 1, 1, 1, 4},     // depthwise
    {1, 3, 5, 5, 6, 3, 3, 1, 1, 1, 1, 1, 1, 3},     // depthwise with multiplier 2
    {3, 8, 5, 4, 5, 1, 1, 1, 1, 0, 0, 1, 1, 1},     // pointwise 1x1 (no im2col)
    {2, 4, 4, 6, 4, 1, 1, 1, 1, 0, 0, 1, 1, 2},     // pointwise, groups 2
    {2, 4, 7, 7, 3, 1, 1, 2, 2, 0, 0, 1, 1, 1},     // 1x1 stride 2
    {1, 2, 3, 3, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1},     // 1x1 with padding
    {2, 3, 5, 5, 2, 5, 5, 1, 1, 0, 0, 1, 1, 1},     // kernel covers the input
    {3, 2, 11, 9, 3, 3, 3, 2, 2, 2, 2, 2, 2, 1},    // dilation 2, padding 2, stride 2
    {1, 2, 8, 8, 3, 2, 2, 3, 3, 0, 0, 1, 1, 1},     // stride larger than kernel
    {5, 1, 12, 12, 6, 5, 5, 1, 1, 0, 0, 1, 1, 1},   // LeNet-like, batch >= threads
    {4, 6, 1, 9, 4, 1, 3, 1, 2, 0, 1, 1, 3, 2},     // a single row, dilation 3 in W
    {4, 8, 16, 16, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1},  // enough work to split the batch
};

// Naive reference loops in double, on row-major vectors.
std::vector<double> ref_forward(const Config& c, const std::vector<double>& x,
                                const std::vector<double>& w, const std::vector<double>* b) {
  const int64_t OH = c.OH(), OW = c.OW(), Cg = c.C / c.groups, Kg = c.K / c.groups;
  std::vector<double> y(static_cast<size_t>(c.N * c.K * OH * OW), 0.0);
  for (int64_t n = 0; n < c.N; ++n)
    for (int64_t k = 0; k < c.K; ++k)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double acc = b ? (*b)[k] : 0.0;
          const int64_t g = k / Kg;
          for (int64_t ci = 0; ci < Cg; ++ci)
            for (int64_t i = 0; i < c.kH; ++i)
              for (int64_t j = 0; j < c.kW; ++j) {
                const int64_t h = oh * c.sH - c.pH + i * c.dH, ww = ow * c.sW - c.pW + j * c.dW;
                if (h < 0 || h >= c.H || ww < 0 || ww >= c.W) continue;
                acc += x[((n * c.C + g * Cg + ci) * c.H + h) * c.W + ww] *
                       w[((k * Cg + ci) * c.kH + i) * c.kW + j];
              }
          y[((n * c.K + k) * OH + oh) * OW + ow] = acc;
        }
  return y;
}

/// dL/dx and dL/dw for L = sum(y * gy), by the same loops with the products scattered.
void ref_backward(const Config& c, const std::vector<double>& x, const std::vector<double>& w,
                  const std::vector<double>& gy, std::vector<double>& gx, std::vector<double>& gw) {
  const int64_t OH = c.OH(), OW = c.OW(), Cg = c.C / c.groups, Kg = c.K / c.groups;
  gx.assign(x.size(), 0.0);
  gw.assign(w.size(), 0.0);
  for (int64_t n = 0; n < c.N; ++n)
    for (int64_t k = 0; k < c.K; ++k)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          const double g_out = gy[((n * c.K + k) * OH + oh) * OW + ow];
          const int64_t g = k / Kg;
          for (int64_t ci = 0; ci < Cg; ++ci)
            for (int64_t i = 0; i < c.kH; ++i)
              for (int64_t j = 0; j < c.kW; ++j) {
                const int64_t h = oh * c.sH - c.pH + i * c.dH, ww = ow * c.sW - c.pW + j * c.dW;
                if (h < 0 || h >= c.H || ww < 0 || ww >= c.W) continue;
                const size_t xi =
                    static_cast<size_t>(((n * c.C + g * Cg + ci) * c.H + h) * c.W + ww);
                const size_t wi = static_cast<size_t>(((k * Cg + ci) * c.kH + i) * c.kW + j);
                gx[xi] += g_out * w[wi];
                gw[wi] += g_out * x[xi];
              }
        }
}

void check_close(const std::vector<double>& got, const std::vector<double>& want, double tol) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    REQUIRE(std::fabs(got[i] - want[i]) <= tol * (1.0 + std::fabs(want[i])));
  }
}

std::string describe(const Config& c) {
  std::ostringstream os;
  os << "N" << c.N << " C" << c.C << " " << c.H << "x" << c.W << " K" << c.K << " k" << c.kH << "x"
     << c.kW << " s" << c.sH << "," << c.sW << " p" << c.pH << "," << c.pW << " d" << c.dH << ","
     << c.dW << " g" << c.groups;
  return os.str();
}

/// Runs forward and both backward kernels for a config and compares them with the reference;
/// `strided` makes every input and output a non-contiguous view.
void check_config(const Config& c, octo::DType dtype, bool strided, bool with_bias) {
  INFO(describe(c) << " dtype " << dtype << (strided ? " strided" : "")
                   << (with_bias ? " bias" : ""));
  const double tol = dtype == octo::kFloat64 ? 1e-11 : 2e-5;
  auto& be = octo::kernels::cpu_backend();
  const Shape xs{c.N, c.C, c.H, c.W}, ws{c.K, c.C / c.groups, c.kH, c.kW},
      ys{c.N, c.K, c.OH(), c.OW()};
  const Shape perm{0, 2, 3, 1};  // channels-last memory: non-contiguous as NCHW
  Tensor x = strided ? random_strided(xs, perm, dtype, 1) : random_tensor(xs, dtype, 1);
  Tensor w = strided ? random_strided(ws, {2, 3, 1, 0}, dtype, 2) : random_tensor(ws, dtype, 2);
  Tensor b = random_tensor({c.K}, dtype, 3);
  if (strided) b = random_tensor({c.K, 2}, dtype, 3).select(1, 1);  // stride 2
  Tensor gy = strided ? random_strided(ys, perm, dtype, 4) : random_tensor(ys, dtype, 4);
  auto make_out = [&](const Shape& s) {
    return strided ? random_strided(s, {3, 2, 1, 0}, dtype, 9)
                   : octo::full(s, 7.0, {.dtype = dtype});
  };
  if (strided && c.C > 1) REQUIRE_FALSE(x.is_contiguous());

  const auto xv = x.to_vector<double>(), wv = w.to_vector<double>(), bv = b.to_vector<double>(),
             gyv = gy.to_vector<double>();

  Tensor y = make_out(ys);
  be.conv2d_forward(y.arg(), x.arg(), w.arg(), with_bias ? b.arg() : TensorArg{}, c.params());
  check_close(y.to_vector<double>(), ref_forward(c, xv, wv, with_bias ? &bv : nullptr), tol);

  std::vector<double> gx_ref, gw_ref;
  ref_backward(c, xv, wv, gyv, gx_ref, gw_ref);
  Tensor gx = make_out(xs);
  be.conv2d_backward_input(gx.arg(), gy.arg(), w.arg(), c.params());
  check_close(gx.to_vector<double>(), gx_ref, tol);
  Tensor gw = make_out(ws);
  be.conv2d_backward_weight(gw.arg(), gy.arg(), x.arg(), c.params());
  check_close(gw.to_vector<double>(), gw_ref, tol);
}

}  // namespace

TEST_CASE("conv2d kernels match naive loops", "[conv][kernels]") {
  for (const Config& c : kConfigs) {
    check_config(c, octo::kFloat64, false, false);
    check_config(c, octo::kFloat64, false, true);
    check_config(c, octo::kFloat32, false, true);
  }
}

TEST_CASE("conv2d kernels accept non-contiguous inputs and outputs", "[conv][kernels]") {
  for (const Config& c : kConfigs) {
    check_config(c, octo::kFloat64, true, true);
    check_config(c, octo::kFloat32, true, false);
  }
}

TEST_CASE("conv2d kernels give the same results for any thread count", "[conv][kernels]") {
  // Batch 4 with ~1.2M multiply-adds: split across samples with 2 or 3 threads, run sample by
  // sample (Eigen-parallel products) with 1 or 8; a small call always runs sample by sample.
  const Config big{4, 8, 16, 16, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1};
  const Config small{6, 4, 9, 9, 6, 3, 3, 1, 1, 1, 1, 1, 1, 2};
  for (int threads : {1, 2, 3, 8}) {
    octo::ThreadLimitGuard guard(threads);
    INFO("threads " << threads);
    for (const Config& c : {big, small}) {
      check_config(c, octo::kFloat64, false, true);
      check_config(c, octo::kFloat32, true, true);
    }
  }
}

TEST_CASE("conv2d kernels are deterministic", "[conv][kernels]") {
  auto& be = octo::kernels::cpu_backend();
  const Config c{7, 16, 16, 16, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1};  // batch-parallel with 2+ threads
  Tensor x = random_tensor({c.N, c.C, c.H, c.W}, octo::kFloat32, 11);
  Tensor gy = random_tensor({c.N, c.K, c.OH(), c.OW()}, octo::kFloat32, 12);
  for (int threads : {1, 2, 3}) {
    octo::ThreadLimitGuard guard(threads);
    Tensor gw1 = octo::empty({c.K, c.C, c.kH, c.kW});
    Tensor gw2 = octo::empty({c.K, c.C, c.kH, c.kW});
    be.conv2d_backward_weight(gw1.arg(), gy.arg(), x.arg(), c.params());
    be.conv2d_backward_weight(gw2.arg(), gy.arg(), x.arg(), c.params());
    REQUIRE(gw1.to_vector<float>() == gw2.to_vector<float>());
  }
}

TEST_CASE("conv2d kernels handle empty batches and channels", "[conv][kernels]") {
  auto& be = octo::kernels::cpu_backend();
  Config c{0, 2, 5, 5, 3, 3, 3, 1, 1, 0, 0, 1, 1, 1};
  Tensor x = octo::empty({0, 2, 5, 5}, {.dtype = octo::kFloat64});
  Tensor w = random_tensor({3, 2, 3, 3}, octo::kFloat64, 1);
  Tensor y = octo::empty({0, 3, 3, 3}, {.dtype = octo::kFloat64});
  be.conv2d_forward(y.arg(), x.arg(), w.arg(), TensorArg{}, c.params());
  Tensor gw = octo::full({3, 2, 3, 3}, 5.0, {.dtype = octo::kFloat64});
  be.conv2d_backward_weight(gw.arg(), y.arg(), x.arg(), c.params());
  for (double v : gw.to_vector<double>()) REQUIRE(v == 0.0);  // an empty sum

  // No output channels: the input gradient is zero.
  Tensor x2 = random_tensor({2, 2, 4, 4}, octo::kFloat64, 2);
  Tensor w2 = octo::empty({0, 2, 3, 3}, {.dtype = octo::kFloat64});
  Tensor gy2 = octo::empty({2, 0, 2, 2}, {.dtype = octo::kFloat64});
  Tensor gx2 = octo::full({2, 2, 4, 4}, 5.0, {.dtype = octo::kFloat64});
  be.conv2d_backward_input(gx2.arg(), gy2.arg(), w2.arg(), c.params());
  for (double v : gx2.to_vector<double>()) REQUIRE(v == 0.0);
}

TEST_CASE("conv2d kernels reject integer dtypes", "[conv][kernels]") {
  auto& be = octo::kernels::cpu_backend();
  Config c{1, 1, 3, 3, 1, 2, 2, 1, 1, 0, 0, 1, 1, 1};
  Tensor x = octo::zeros({1, 1, 3, 3}, {.dtype = octo::kInt64});
  Tensor w = octo::zeros({1, 1, 2, 2}, {.dtype = octo::kInt64});
  Tensor y = octo::zeros({1, 1, 2, 2}, {.dtype = octo::kInt64});
  REQUIRE_THROWS_AS(be.conv2d_forward(y.arg(), x.arg(), w.arg(), TensorArg{}, c.params()),
                    octo::ValueError);
  REQUIRE_THROWS_WITH(be.conv2d_forward(y.arg(), x.arg(), w.arg(), TensorArg{}, c.params()),
                      Catch::Contains("unsupported dtype int64"));
}
