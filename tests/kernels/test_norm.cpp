// Tests for the CPU batch-norm kernels against double-precision reference loops written here.
#include <catch2/catch.hpp>

#include <octo/octo.h>

#include <cmath>
#include <random>

#include "kernels/backend.h"

using octo::Shape;
using octo::Tensor;
using octo::kernels::TensorArg;

namespace {

std::vector<double> random_values(int64_t n, uint32_t seed, double mean = 0.0, double std = 1.0) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> dist(mean, std);
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) x = dist(gen);
  return v;
}

Tensor random_tensor(const Shape& shape, octo::DType dtype, uint32_t seed, double mean = 0.0,
                     double std = 1.0) {
  return octo::tensor(random_values(octo::detail::shape_numel(shape), seed, mean, std), shape,
                      {.dtype = dtype});
}

std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

int64_t spatial_of(const Shape& s) {
  int64_t n = 1;
  for (size_t d = 2; d < s.size(); ++d) n *= s[d];
  return n;
}

/// Reference batch norm in double over row-major [N, C, S] data.
struct RefForward {
  std::vector<double> y, mean, invstd, running_mean, running_var;
};

RefForward ref_forward(const std::vector<double>& x, const Shape& shape,
                       const std::vector<double>* w, const std::vector<double>* b,
                       std::vector<double> rm, std::vector<double> rv, bool training,
                       double momentum, double eps) {
  const int64_t N = shape[0], C = shape[1], S = spatial_of(shape);
  RefForward r;
  r.y.resize(x.size());
  r.mean.assign(static_cast<size_t>(C), 0.0);
  r.invstd.assign(static_cast<size_t>(C), 0.0);
  for (int64_t c = 0; c < C; ++c) {
    double mean, var;
    if (training) {
      double sum = 0;
      for (int64_t n = 0; n < N; ++n)
        for (int64_t s = 0; s < S; ++s) sum += x[(n * C + c) * S + s];
      mean = sum / (N * S);
      double sq = 0;
      for (int64_t n = 0; n < N; ++n)
        for (int64_t s = 0; s < S; ++s) sq += std::pow(x[(n * C + c) * S + s] - mean, 2);
      var = sq / (N * S);
      if (!rm.empty()) {
        rm[c] = (1 - momentum) * rm[c] + momentum * mean;
        rv[c] = (1 - momentum) * rv[c] + momentum * sq / (N * S - 1);
      }
    } else {
      mean = rm[c];
      var = rv[c];
    }
    r.mean[c] = mean;
    r.invstd[c] = 1 / std::sqrt(var + eps);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t s = 0; s < S; ++s) {
        const size_t i = static_cast<size_t>((n * C + c) * S + s);
        r.y[i] = (x[i] - mean) * r.invstd[c] * (w ? (*w)[c] : 1.0) + (b ? (*b)[c] : 0.0);
      }
  }
  r.running_mean = rm;
  r.running_var = rv;
  return r;
}

void require_close(const std::vector<double>& got, const std::vector<double>& want, double tol) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    REQUIRE(got[i] == Approx(want[i]).margin(tol).epsilon(tol));
  }
}

double tol_for(octo::DType dt) { return dt == octo::kFloat32 ? 2e-5 : 1e-11; }

TensorArg undefined() { return TensorArg{}; }

}  // namespace

TEST_CASE("batch_norm_forward kernel: training matches the reference", "[norm][kernel]") {
  auto& be = octo::kernels::cpu_backend();
  const std::vector<Shape> shapes = {{5, 3},    {4, 3, 7},    {2, 3, 4, 5},
                                     {7, 5, 3}, {3, 1, 2, 2}, {2, 4, 1, 1, 3}};
  uint32_t seed = 1;
  for (octo::DType dt : {octo::kFloat32, octo::kFloat64})
    for (const Shape& shape : shapes)
      for (bool affine : {false, true})
        for (bool running : {false, true}) {
          INFO("shape " << octo::shape_str(shape) << " dtype " << dt << " affine " << affine
                        << " running " << running);
          const int64_t C = shape[1];
          Tensor x = random_tensor(shape, dt, ++seed, 0.5, 2.0);
          Tensor w = random_tensor({C}, dt, ++seed), b = random_tensor({C}, dt, ++seed);
          Tensor rm = random_tensor({C}, dt, ++seed), rv = random_tensor({C}, dt, ++seed, 2.0, 0.3);
          const std::vector<double> wv = values(w), bv = values(b);
          const auto ref =
              ref_forward(values(x), shape, affine ? &wv : nullptr, affine ? &bv : nullptr,
                          running ? values(rm) : std::vector<double>{},
                          running ? values(rv) : std::vector<double>{}, true, 0.1, 1e-5);
          const std::vector<double> rm0 = values(rm), rv0 = values(rv);
          Tensor out = octo::empty(shape, {.dtype = dt});
          Tensor sm = octo::empty({C}, {.dtype = dt}), si = octo::empty({C}, {.dtype = dt});
          be.batch_norm_forward(out.arg(), sm.arg(), si.arg(), x.arg(),
                                affine ? w.arg() : undefined(), affine ? b.arg() : undefined(),
                                running ? rm.arg() : undefined(), running ? rv.arg() : undefined(),
                                true, 0.1, 1e-5);
          const double tol = tol_for(dt);
          require_close(values(out), ref.y, tol);
          require_close(values(sm), ref.mean, tol);
          require_close(values(si), ref.invstd, tol);
          if (running) {
            require_close(values(rm), ref.running_mean, tol);
            require_close(values(rv), ref.running_var, tol);
          } else {
            REQUIRE(values(rm) == rm0);  // untouched when not passed
            REQUIRE(values(rv) == rv0);
          }
        }
}

TEST_CASE("batch_norm_forward kernel: momentum update is exactly PyTorch's rule",
          "[norm][kernel]") {
  auto& be = octo::kernels::cpu_backend();
  for (octo::DType dt : {octo::kFloat32, octo::kFloat64}) {
    // Channel 0 holds {1, 3}: mean 2, biased var 1, unbiased var 2. Channel 1 holds {-2, 2, ...}.
    Tensor x = octo::tensor({1, -2, 3, 2}, {2, 2}, {.dtype = dt});
    Tensor rm = octo::tensor({0.5, 1.0}, {.dtype = dt});
    Tensor rv = octo::tensor({4.0, 0.5}, {.dtype = dt});
    Tensor out = octo::empty({2, 2}, {.dtype = dt});
    Tensor sm = octo::empty({2}, {.dtype = dt}), si = octo::empty({2}, {.dtype = dt});
    const double m = 0.25;
    be.batch_norm_forward(out.arg(), sm.arg(), si.arg(), x.arg(), undefined(), undefined(),
                          rm.arg(), rv.arg(), true, m, 0.0);
    // running = (1 - m) * running + m * stat; the variance is the unbiased one (n / (n - 1)).
    REQUIRE(values(rm) == std::vector<double>{(1 - m) * 0.5 + m * 2.0, (1 - m) * 1.0 + m * 0.0});
    REQUIRE(values(rv) == std::vector<double>{(1 - m) * 4.0 + m * 2.0, (1 - m) * 0.5 + m * 8.0});
    REQUIRE(values(sm) == std::vector<double>{2.0, 0.0});
    REQUIRE(values(si) == std::vector<double>{1.0, 0.5});  // 1 / sqrt(biased var)
    REQUIRE(values(out) == std::vector<double>{-1, -1, 1, 1});
  }
}

TEST_CASE("batch_norm_forward kernel: eval uses the running statistics", "[norm][kernel]") {
  auto& be = octo::kernels::cpu_backend();
  uint32_t seed = 100;
  for (octo::DType dt : {octo::kFloat32, octo::kFloat64})
    for (const Shape& shape : std::vector<Shape>{{1, 3}, {4, 2, 5}, {2, 3, 3, 2}})
      for (bool affine : {false, true}) {
        INFO("shape " << octo::shape_str(shape) << " dtype " << dt << " affine " << affine);
        const int64_t C = shape[1];
        Tensor x = random_tensor(shape, dt, ++seed);
        Tensor w = random_tensor({C}, dt, ++seed), b = random_tensor({C}, dt, ++seed);
        Tensor rm = random_tensor({C}, dt, ++seed), rv = random_tensor({C}, dt, ++seed, 1.5, 0.2);
        const std::vector<double> wv = values(w), bv = values(b), rm0 = values(rm),
                                  rv0 = values(rv);
        const auto ref = ref_forward(values(x), shape, affine ? &wv : nullptr,
                                     affine ? &bv : nullptr, rm0, rv0, false, 0.1, 1e-3);
        Tensor out = octo::empty(shape, {.dtype = dt});
        Tensor sm = octo::full({C}, 7.0, {.dtype = dt}), si = octo::full({C}, 7.0, {.dtype = dt});
        be.batch_norm_forward(out.arg(), sm.arg(), si.arg(), x.arg(),
                              affine ? w.arg() : undefined(), affine ? b.arg() : undefined(),
                              rm.arg(), rv.arg(), false, 0.1, 1e-3);
        require_close(values(out), ref.y, tol_for(dt));
        REQUIRE(values(rm) == rm0);  // eval never updates the running statistics
        REQUIRE(values(rv) == rv0);
        REQUIRE(values(sm) == std::vector<double>(C, 7.0));  // save_* untouched
        REQUIRE(values(si) == std::vector<double>(C, 7.0));
      }
}

TEST_CASE("batch_norm_forward kernel: non-contiguous input, output and parameters",
          "[norm][kernel]") {
  auto& be = octo::kernels::cpu_backend();
  for (octo::DType dt : {octo::kFloat32, octo::kFloat64}) {
    // Input [N=3, C=4, H=5, W=2] as a permutation of a [H, C, W, N] tensor.
    Tensor base = random_tensor({5, 4, 2, 3}, dt, 7);
    Tensor x = base.permute({3, 1, 0, 2});
    REQUIRE(!x.is_contiguous());
    const Shape shape = x.sizes();
    // Output written through a transposed view; parameters with stride 2 and a slice offset.
    Tensor out_base = octo::zeros({3, 4, 2, 5}, {.dtype = dt});
    Tensor out = out_base.transpose(2, 3);
    Tensor wb = random_tensor({8}, dt, 8), bb = random_tensor({9}, dt, 9);
    Tensor w = wb.slice(0, 0, 8, 2), b = bb.slice(0, 1, 9, 2);
    Tensor rmb = random_tensor({8}, dt, 10), rvb = random_tensor({8}, dt, 11, 2.0, 0.1);
    Tensor rm = rmb.slice(0, 1, 8, 2), rv = rvb.slice(0, 0, 8, 2);
    const std::vector<double> wv = values(w), bv = values(b);
    const auto ref =
        ref_forward(values(x), shape, &wv, &bv, values(rm), values(rv), true, 0.3, 1e-5);
    Tensor smb = octo::zeros({8}, {.dtype = dt}), sib = octo::zeros({8}, {.dtype = dt});
    Tensor sm = smb.slice(0, 0, 8, 2), si = sib.slice(0, 0, 8, 2);
    be.batch_norm_forward(out.arg(), sm.arg(), si.arg(), x.arg(), w.arg(), b.arg(), rm.arg(),
                          rv.arg(), true, 0.3, 1e-5);
    const double tol = tol_for(dt);
    require_close(values(out), ref.y, tol);
    require_close(values(sm), ref.mean, tol);
    require_close(values(si), ref.invstd, tol);
    require_close(values(rm), ref.running_mean, tol);
    require_close(values(rv), ref.running_var, tol);
    // The odd elements of the strided buffers were not written.
    const auto smv = values(smb);
    for (size_t i = 1; i < smv.size(); i += 2) REQUIRE(smv[i] == 0.0);
  }
}

TEST_CASE("batch_norm_forward kernel: edge sizes", "[norm][kernel]") {
  auto& be = octo::kernels::cpu_backend();
  // Empty batch: nothing to normalise, running statistics stay.
  Tensor x = octo::empty({0, 3, 2});
  Tensor rm = octo::tensor({1, 2, 3}), rv = octo::tensor({4, 5, 6});
  Tensor out = octo::empty({0, 3, 2});
  Tensor sm = octo::empty({3}), si = octo::empty({3});
  be.batch_norm_forward(out.arg(), sm.arg(), si.arg(), x.arg(), undefined(), undefined(), rm.arg(),
                        rv.arg(), true, 0.1, 1e-5);
  REQUIRE(values(rm) == std::vector<double>{1, 2, 3});
  REQUIRE(values(rv) == std::vector<double>{4, 5, 6});
  // No channels: nothing happens.
  Tensor x0 = octo::empty({4, 0}), out0 = octo::empty({4, 0});
  Tensor e0 = octo::empty({0}), e1 = octo::empty({0});
  REQUIRE_NOTHROW(be.batch_norm_forward(out0.arg(), e0.arg(), e1.arg(), x0.arg(), undefined(),
                                        undefined(), undefined(), undefined(), true, 0.1, 1e-5));
  // A constant channel: variance 0, so the output is exactly the bias.
  Tensor xc = octo::full({6, 2}, 3.5, {.dtype = octo::kFloat64});
  Tensor b = octo::tensor({0.25, -1.0}, {.dtype = octo::kFloat64});
  Tensor outc = octo::empty({6, 2}, {.dtype = octo::kFloat64});
  Tensor smc = octo::empty({2}, {.dtype = octo::kFloat64}),
         sic = octo::empty({2}, {.dtype = octo::kFloat64});
  be.batch_norm_forward(outc.arg(), smc.arg(), sic.arg(), xc.arg(), undefined(), b.arg(),
                        undefined(), undefined(), true, 0.1, 1e-5);
  for (int i = 0; i < 6; ++i) {
    REQUIRE(values(outc)[2 * i] == 0.25);
    REQUIRE(values(outc)[2 * i + 1] == -1.0);
  }
  REQUIRE(values(sic)[0] == Approx(1 / std::sqrt(1e-5)));
}

TEST_CASE("batch_norm kernels: integer dtypes are rejected", "[norm][kernel]") {
  auto& be = octo::kernels::cpu_backend();
  Tensor x = octo::zeros({2, 3}, {.dtype = octo::kInt64});
  Tensor out = octo::zeros({2, 3}, {.dtype = octo::kInt64});
  Tensor sm = octo::zeros({3}, {.dtype = octo::kInt64}),
         si = octo::zeros({3}, {.dtype = octo::kInt64});
  REQUIRE_THROWS_AS(be.batch_norm_forward(out.arg(), sm.arg(), si.arg(), x.arg(), undefined(),
                                          undefined(), undefined(), undefined(), true, 0.1, 1e-5),
                    octo::ValueError);
  REQUIRE_THROWS_WITH(
      be.batch_norm_backward(out.arg(), undefined(), undefined(), out.arg(), x.arg(), undefined(),
                             sm.arg(), si.arg()),
      Catch::Contains("batch_norm_backward") && Catch::Contains("unsupported dtype"));
}

namespace {

/// Reference gradients: gi = invstd * w * (g - mean(g) - xhat * mean(g * xhat)),
/// gw = sum(g * xhat), gb = sum(g), per channel over [N, C, S].
void ref_backward(const std::vector<double>& x, const std::vector<double>& g, const Shape& shape,
                  const std::vector<double>* w, std::vector<double>& gi, std::vector<double>& gw,
                  std::vector<double>& gb) {
  const int64_t N = shape[0], C = shape[1], S = spatial_of(shape);
  const auto fwd = ref_forward(x, shape, nullptr, nullptr, {}, {}, true, 0.1, 1e-5);
  gi.assign(x.size(), 0.0);
  gw.assign(static_cast<size_t>(C), 0.0);
  gb.assign(static_cast<size_t>(C), 0.0);
  for (int64_t c = 0; c < C; ++c) {
    double sg = 0, sgx = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t s = 0; s < S; ++s) {
        const size_t i = static_cast<size_t>((n * C + c) * S + s);
        sg += g[i];
        sgx += g[i] * fwd.y[i];  // fwd.y is xhat (no affine)
      }
    gw[c] = sgx;
    gb[c] = sg;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t s = 0; s < S; ++s) {
        const size_t i = static_cast<size_t>((n * C + c) * S + s);
        gi[i] =
            fwd.invstd[c] * (w ? (*w)[c] : 1.0) * (g[i] - sg / (N * S) - fwd.y[i] * sgx / (N * S));
      }
  }
}

}  // namespace

TEST_CASE("batch_norm_backward kernel matches the reference", "[norm][kernel]") {
  auto& be = octo::kernels::cpu_backend();
  const std::vector<Shape> shapes = {{5, 3}, {4, 3, 7}, {2, 3, 4, 5}, {3, 1, 2, 2}, {2, 5}};
  uint32_t seed = 500;
  for (octo::DType dt : {octo::kFloat32, octo::kFloat64})
    for (const Shape& shape : shapes)
      for (bool affine : {false, true}) {
        INFO("shape " << octo::shape_str(shape) << " dtype " << dt << " affine " << affine);
        const int64_t C = shape[1];
        Tensor x = random_tensor(shape, dt, ++seed, 1.0, 3.0);
        Tensor g = random_tensor(shape, dt, ++seed);
        Tensor w = random_tensor({C}, dt, ++seed);
        // Saved statistics from the forward kernel.
        Tensor out = octo::empty(shape, {.dtype = dt});
        Tensor sm = octo::empty({C}, {.dtype = dt}), si = octo::empty({C}, {.dtype = dt});
        be.batch_norm_forward(out.arg(), sm.arg(), si.arg(), x.arg(), undefined(), undefined(),
                              undefined(), undefined(), true, 0.1, 1e-5);
        const std::vector<double> wv = values(w);
        std::vector<double> rgi, rgw, rgb;
        ref_backward(values(x), values(g), shape, affine ? &wv : nullptr, rgi, rgw, rgb);
        Tensor gi = octo::empty(shape, {.dtype = dt});
        Tensor gw = octo::empty({C}, {.dtype = dt}), gb = octo::empty({C}, {.dtype = dt});
        be.batch_norm_backward(gi.arg(), gw.arg(), gb.arg(), g.arg(), x.arg(),
                               affine ? w.arg() : undefined(), sm.arg(), si.arg());
        const double tol = dt == octo::kFloat32 ? 1e-4 : 1e-10;
        require_close(values(gi), rgi, tol);
        require_close(values(gw), rgw, tol);
        require_close(values(gb), rgb, tol);
        // Any of the gradient outputs may be skipped.
        Tensor gi2 = octo::empty(shape, {.dtype = dt});
        be.batch_norm_backward(gi2.arg(), undefined(), undefined(), g.arg(), x.arg(),
                               affine ? w.arg() : undefined(), sm.arg(), si.arg());
        require_close(values(gi2), rgi, tol);
        Tensor gb2 = octo::empty({C}, {.dtype = dt});
        be.batch_norm_backward(undefined(), undefined(), gb2.arg(), g.arg(), x.arg(),
                               affine ? w.arg() : undefined(), sm.arg(), si.arg());
        require_close(values(gb2), rgb, tol);
      }
}

TEST_CASE("batch_norm_backward kernel: non-contiguous and expanded gradients", "[norm][kernel]") {
  auto& be = octo::kernels::cpu_backend();
  for (octo::DType dt : {octo::kFloat32, octo::kFloat64}) {
    const double tol = dt == octo::kFloat32 ? 1e-4 : 1e-10;
    Tensor x = random_tensor({3, 2, 4, 5}, dt, 31).transpose(0, 1);  // [2, 3, 4, 5] view
    const Shape shape = x.sizes();
    Tensor sm = octo::empty({3}, {.dtype = dt}), si = octo::empty({3}, {.dtype = dt});
    Tensor out = octo::empty(shape, {.dtype = dt});
    be.batch_norm_forward(out.arg(), sm.arg(), si.arg(), x.arg(), undefined(), undefined(),
                          undefined(), undefined(), true, 0.1, 1e-5);
    Tensor w = random_tensor({6}, dt, 32).slice(0, 0, 6, 2);
    const std::vector<double> wv = values(w);
    // grad_out as a permuted view, grad_input written through a transposed view.
    Tensor g = random_tensor({5, 3, 2, 4}, dt, 33).permute({2, 1, 3, 0});
    REQUIRE(g.sizes() == shape);
    std::vector<double> rgi, rgw, rgb;
    ref_backward(values(x), values(g), shape, &wv, rgi, rgw, rgb);
    Tensor gi = octo::empty({2, 3, 5, 4}, {.dtype = dt}).transpose(2, 3);
    Tensor gw = octo::empty({3}, {.dtype = dt}), gb = octo::empty({3}, {.dtype = dt});
    be.batch_norm_backward(gi.arg(), gw.arg(), gb.arg(), g.arg(), x.arg(), w.arg(), sm.arg(),
                           si.arg());
    require_close(values(gi), rgi, tol);
    require_close(values(gw), rgw, tol);
    require_close(values(gb), rgb, tol);
    // An expanded gradient (all strides 0), as the backward of sum() produces: d/dx of
    // sum(batch_norm(x)) is 0 because each normalised channel sums to 0 for any input.
    Tensor ones = octo::ones({1}, {.dtype = dt}).expand(shape);
    Tensor gi3 = octo::empty(shape, {.dtype = dt});
    be.batch_norm_backward(gi3.arg(), gw.arg(), gb.arg(), ones.arg(), x.arg(), w.arg(), sm.arg(),
                           si.arg());
    ref_backward(values(x), values(ones), shape, &wv, rgi, rgw, rgb);
    require_close(values(gi3), rgi, tol);
    for (double v : values(gi3)) REQUIRE(std::fabs(v) < tol);
    require_close(values(gb), std::vector<double>(3, 40.0), tol);
  }
}
