// Tests for the pool family (kernels layer): CPU max/avg pooling against naive loops.
#include <catch2/catch.hpp>

#include <octo/octo.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/backend.h"
#include "kernels/pool_math.h"

using octo::Shape;
using octo::Tensor;
using octo::kernels::Pool2dParams;

namespace {

Tensor random_tensor(const Shape& shape, octo::DType dtype, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<double> v(static_cast<size_t>(octo::detail::shape_numel(shape)));
  for (double& x : v) x = dist(gen);
  return octo::tensor(v, shape, {.dtype = dtype});
}

/// Random values in a channels-last layout, viewed as NCHW (non-contiguous).
Tensor random_nhwc(const Shape& s, octo::DType dtype, uint32_t seed) {
  return random_tensor({s[0], s[2], s[3], s[1]}, dtype, seed).permute({0, 3, 1, 2});
}

struct PoolConfig {
  int64_t N, C, H, W;
  int64_t kH, kW, sH, sW, pH, pW, dH, dW;
  bool ceil_mode;
  bool count_include_pad;
  Pool2dParams params() const {
    Pool2dParams p;
    p.kernel[0] = kH, p.kernel[1] = kW, p.stride[0] = sH, p.stride[1] = sW;
    p.padding[0] = pH, p.padding[1] = pW, p.dilation[0] = dH, p.dilation[1] = dW;
    p.ceil_mode = ceil_mode, p.count_include_pad = count_include_pad;
    return p;
  }
};

/// Output length along one dim. Windows start at o * s - p and span d * (k - 1) + 1. Without
/// ceil_mode a window must fit in the padded input; with it, windows continue until one has
/// reached the padded end, but a window may not start in the right padding (PyTorch's rule).
int64_t out_len(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  const int64_t span = d * (k - 1) + 1;
  int64_t n = 0;
  for (int64_t o = 0;; ++o) {
    const int64_t start = o * s - p;
    if (!ceil_mode && start + span > in + p) break;
    if (ceil_mode && o > 0 && start - s + span >= in + p)
      break;  // the previous one reached the end
    if (ceil_mode && start >= in) break;
    ++n;
  }
  return n;
}

const std::vector<PoolConfig> kConfigs = {
    // N  C  H  W kH kW sH sW pH pW dH dW ceil incl
    {2, 3, 6, 6, 2, 2, 2, 2, 0, 0, 1, 1, false, true},
    {1, 2, 7, 5, 3, 3, 2, 2, 1, 1, 1, 1, false, true},
    {1, 2, 7, 5, 3, 3, 2, 2, 1, 1, 1, 1, true, true},
    {2, 1, 7, 5, 3, 3, 2, 2, 1, 1, 1, 1, true, false},
    {1, 3, 5, 5, 2, 2, 2, 2, 1, 1, 1, 1, true, true},  // the ceil rule drops a window
    {3, 2, 9, 8, 3, 2, 1, 2, 1, 0, 1, 1, false, false},
    {1, 2, 10, 9, 3, 3, 2, 3, 1, 1, 2, 2, false, true},  // dilation (max only)
    {1, 2, 10, 9, 3, 3, 2, 3, 1, 1, 2, 2, true, true},
    {2, 2, 4, 4, 4, 4, 4, 4, 0, 0, 1, 1, false, true},  // global
    {1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, false, true},  // a single pixel
    {2, 4, 3, 11, 1, 3, 1, 3, 0, 1, 1, 1, true, false},
    {2, 4, 32, 32, 3, 3, 1, 1, 1, 1, 1, 1, false, true},  // enough work to split the planes
};

}  // namespace

TEST_CASE("pooling output length helper agrees with hand-computed sizes", "[pool][kernels]") {
  // Hand-derived with PyTorch's rules: in=5,k=2,s=2,p=1,ceil -> 3 (a 4th would start in the right
  // padding); in=5,k=2,s=2 ceil -> 3; floor -> 2; in=6,k=3,s=2,p=1 ceil -> 4, floor -> 3.
  REQUIRE(out_len(5, 2, 2, 1, 1, true) == 3);
  REQUIRE(out_len(5, 2, 2, 0, 1, true) == 3);
  REQUIRE(out_len(5, 2, 2, 0, 1, false) == 2);
  REQUIRE(out_len(6, 3, 2, 1, 1, true) == 4);
  REQUIRE(out_len(6, 3, 2, 1, 1, false) == 3);
  REQUIRE(out_len(10, 3, 2, 1, 2, false) == 4);  // span 5: windows start at -1, 1, 3, 5
}

namespace {

/// Positions in [start, start + len) that also lie in [lo, hi).
int64_t overlap(int64_t start, int64_t len, int64_t lo, int64_t hi) {
  return std::max<int64_t>(0, std::min(start + len, hi) - std::max(start, lo));
}

struct MaxRef {
  std::vector<double> out;
  std::vector<int64_t> idx;
};

/// Max pooling by brute force: the first largest element of each window in scan order.
MaxRef ref_max(const PoolConfig& c, const std::vector<double>& x) {
  const int64_t OH = out_len(c.H, c.kH, c.sH, c.pH, c.dH, c.ceil_mode);
  const int64_t OW = out_len(c.W, c.kW, c.sW, c.pW, c.dW, c.ceil_mode);
  MaxRef r;
  for (int64_t pl = 0; pl < c.N * c.C; ++pl)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        double best = 0;
        int64_t arg = -1;
        for (int64_t i = 0; i < c.kH; ++i)
          for (int64_t j = 0; j < c.kW; ++j) {
            const int64_t h = oh * c.sH - c.pH + i * c.dH, w = ow * c.sW - c.pW + j * c.dW;
            if (h < 0 || h >= c.H || w < 0 || w >= c.W) continue;
            const double v = x[static_cast<size_t>((pl * c.H + h) * c.W + w)];
            if (arg < 0 || v > best) best = v, arg = h * c.W + w;
          }
        REQUIRE(arg >= 0);  // every window sees the input
        r.out.push_back(best);
        r.idx.push_back(arg);
      }
  return r;
}

/// Average pooling by brute force; also returns each window's divisor.
std::vector<double> ref_avg(const PoolConfig& c, const std::vector<double>& x,
                            std::vector<double>* divisors = nullptr) {
  const int64_t OH = out_len(c.H, c.kH, c.sH, c.pH, 1, c.ceil_mode);
  const int64_t OW = out_len(c.W, c.kW, c.sW, c.pW, 1, c.ceil_mode);
  std::vector<double> out;
  for (int64_t pl = 0; pl < c.N * c.C; ++pl)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        const int64_t h0 = oh * c.sH - c.pH, w0 = ow * c.sW - c.pW;
        double sum = 0;
        for (int64_t h = std::max<int64_t>(h0, 0); h < std::min(h0 + c.kH, c.H); ++h)
          for (int64_t w = std::max<int64_t>(w0, 0); w < std::min(w0 + c.kW, c.W); ++w)
            sum += x[static_cast<size_t>((pl * c.H + h) * c.W + w)];
        const double div = c.count_include_pad
                               ? double(overlap(h0, c.kH, -c.pH, c.H + c.pH) *
                                        overlap(w0, c.kW, -c.pW, c.W + c.pW))
                               : double(overlap(h0, c.kH, 0, c.H) * overlap(w0, c.kW, 0, c.W));
        out.push_back(sum / div);
        if (divisors) divisors->push_back(div);
      }
  return out;
}

void check_close(const std::vector<double>& got, const std::vector<double>& want, double tol) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    REQUIRE(std::fabs(got[i] - want[i]) <= tol * (1.0 + std::fabs(want[i])));
  }
}

void check_pool_config(const PoolConfig& c, octo::DType dtype, bool strided) {
  INFO("N" << c.N << " C" << c.C << " " << c.H << "x" << c.W << " k" << c.kH << "x" << c.kW << " s"
           << c.sH << "," << c.sW << " p" << c.pH << "," << c.pW << " d" << c.dH << "," << c.dW
           << (c.ceil_mode ? " ceil" : "") << (c.count_include_pad ? " incl" : "") << " " << dtype
           << (strided ? " strided" : ""));
  auto& be = octo::kernels::cpu_backend();
  const double tol = dtype == octo::kFloat64 ? 1e-12 : 1e-6;
  const Shape xs{c.N, c.C, c.H, c.W};
  Tensor x = strided ? random_nhwc(xs, dtype, 1) : random_tensor(xs, dtype, 1);
  const auto xv = x.to_vector<double>();
  // Outputs start out as garbage: random values in a strided layout, or a constant.
  auto make = [&](const Shape& s, octo::DType dt, uint32_t seed) {
    return strided ? random_nhwc(s, dt, seed) : octo::full(s, 3, {.dtype = dt});
  };

  // max pooling
  {
    const Shape ys{c.N, c.C, out_len(c.H, c.kH, c.sH, c.pH, c.dH, c.ceil_mode),
                   out_len(c.W, c.kW, c.sW, c.pW, c.dW, c.ceil_mode)};
    MaxRef ref = ref_max(c, xv);
    Tensor y = make(ys, dtype, 2);
    Tensor idx =
        strided
            ? octo::zeros({c.N, ys[2], ys[3], c.C}, {.dtype = octo::kInt64}).permute({0, 3, 1, 2})
            : octo::zeros(ys, {.dtype = octo::kInt64});
    be.max_pool2d_forward(y.arg(), idx.arg(), x.arg(), c.params());
    check_close(y.to_vector<double>(), ref.out, tol);
    REQUIRE(idx.to_vector<int64_t>() == ref.idx);

    Tensor gy = strided ? random_nhwc(ys, dtype, 3) : random_tensor(ys, dtype, 3);
    const auto gyv = gy.to_vector<double>();
    std::vector<double> gx_ref(xv.size(), 0.0);
    for (size_t o = 0; o < gyv.size(); ++o) {
      const int64_t plane = static_cast<int64_t>(o) / (ys[2] * ys[3]);
      gx_ref[static_cast<size_t>(plane * c.H * c.W + ref.idx[o])] += gyv[o];
    }
    Tensor gx = make(xs, dtype, 4);
    be.max_pool2d_backward(gx.arg(), gy.arg(), idx.arg(), c.params());
    check_close(gx.to_vector<double>(), gx_ref, tol);
  }

  // average pooling (no dilation)
  if (c.dH == 1 && c.dW == 1) {
    const Shape ys{c.N, c.C, out_len(c.H, c.kH, c.sH, c.pH, 1, c.ceil_mode),
                   out_len(c.W, c.kW, c.sW, c.pW, 1, c.ceil_mode)};
    std::vector<double> divisors;
    const auto ref = ref_avg(c, xv, &divisors);
    Tensor y = make(ys, dtype, 5);
    be.avg_pool2d_forward(y.arg(), x.arg(), c.params());
    check_close(y.to_vector<double>(), ref, tol);

    Tensor gy = strided ? random_nhwc(ys, dtype, 6) : random_tensor(ys, dtype, 6);
    const auto gyv = gy.to_vector<double>();
    std::vector<double> gx_ref(xv.size(), 0.0);
    size_t o = 0;
    for (int64_t pl = 0; pl < c.N * c.C; ++pl)
      for (int64_t oh = 0; oh < ys[2]; ++oh)
        for (int64_t ow = 0; ow < ys[3]; ++ow, ++o)
          for (int64_t h = oh * c.sH - c.pH; h < oh * c.sH - c.pH + c.kH; ++h)
            for (int64_t w = ow * c.sW - c.pW; w < ow * c.sW - c.pW + c.kW; ++w)
              if (h >= 0 && h < c.H && w >= 0 && w < c.W)
                gx_ref[static_cast<size_t>((pl * c.H + h) * c.W + w)] += gyv[o] / divisors[o];
    Tensor gx = make(xs, dtype, 7);
    be.avg_pool2d_backward(gx.arg(), gy.arg(), c.params());
    check_close(gx.to_vector<double>(), gx_ref, tol);
  }
}

}  // namespace

TEST_CASE("pooling kernels match naive loops", "[pool][kernels]") {
  for (const PoolConfig& c : kConfigs) {
    check_pool_config(c, octo::kFloat64, false);
    check_pool_config(c, octo::kFloat32, false);
  }
}

TEST_CASE("pooling kernels accept non-contiguous inputs and outputs", "[pool][kernels]") {
  for (const PoolConfig& c : kConfigs) {
    check_pool_config(c, octo::kFloat64, true);
    check_pool_config(c, octo::kFloat32, true);
  }
}

TEST_CASE("max pooling picks the first maximum on ties and propagates NaN", "[pool][kernels]") {
  auto& be = octo::kernels::cpu_backend();
  PoolConfig c{1, 2, 6, 6, 3, 3, 2, 2, 1, 1, 1, 1, false, true};
  // Values from {0, 1, 2}: many ties.
  std::mt19937 gen(5);
  std::vector<double> v(72);
  for (double& x : v) x = static_cast<double>(gen() % 3);
  Tensor x = octo::tensor(v, {1, 2, 6, 6});
  MaxRef ref = ref_max(c, v);
  Tensor y = octo::empty({1, 2, 3, 3}), idx = octo::empty({1, 2, 3, 3}, {.dtype = octo::kInt64});
  be.max_pool2d_forward(y.arg(), idx.arg(), x.arg(), c.params());
  check_close(y.to_vector<double>(), ref.out, 0);
  REQUIRE(idx.to_vector<int64_t>() == ref.idx);

  // A NaN wins its windows, and its index points at it.
  v[7] = std::numeric_limits<double>::quiet_NaN();  // plane 0, h = 1, w = 1
  x = octo::tensor(v, {1, 2, 6, 6});
  be.max_pool2d_forward(y.arg(), idx.arg(), x.arg(), c.params());
  auto yv = y.to_vector<float>();
  auto iv = idx.to_vector<int64_t>();
  // Windows with rows covering h = 1 (start -1 or 1) and columns covering w = 1:
  // (0,0),(0,1),(1,0),(1,1)
  for (int64_t oh = 0; oh < 3; ++oh)
    for (int64_t ow = 0; ow < 3; ++ow) {
      const bool covers = oh <= 1 && ow <= 1;
      REQUIRE(std::isnan(yv[oh * 3 + ow]) == covers);
      if (covers) REQUIRE(iv[oh * 3 + ow] == 7);
    }
  // Negative infinity alone in a window is the max, with a valid index.
  Tensor ninf = octo::full({1, 1, 2, 2}, -std::numeric_limits<double>::infinity());
  Tensor y1 = octo::empty({1, 1, 1, 1}), i1 = octo::empty({1, 1, 1, 1}, {.dtype = octo::kInt64});
  PoolConfig g{1, 1, 2, 2, 2, 2, 2, 2, 0, 0, 1, 1, false, true};
  be.max_pool2d_forward(y1.arg(), i1.arg(), ninf.arg(), g.params());
  REQUIRE(std::isinf(y1.item<float>()));
  REQUIRE(i1.item<int64_t>() == 0);
}

TEST_CASE("average pooling divisors follow PyTorch on hand-computed rows", "[pool][kernels]") {
  auto& be = octo::kernels::cpu_backend();
  Tensor x = octo::tensor({1, 2, 3, 4, 5}, {.dtype = octo::kFloat64}).view({1, 1, 1, 5});
  auto run = [&](int64_t k, int64_t s, int64_t p, bool ceil, bool incl, int64_t out) {
    PoolConfig c{1, 1, 1, 5, 1, k, 1, s, 0, p, 1, 1, ceil, incl};
    Tensor y = octo::empty({1, 1, 1, out}, {.dtype = octo::kFloat64});
    be.avg_pool2d_forward(y.arg(), x.arg(), c.params());
    return y.to_vector<double>();
  };
  // k=2, s=2, ceil: [1,2], [3,4], [5] -> the last window is clipped to the input (divisor 1)
  REQUIRE(run(2, 2, 0, true, true, 3) == std::vector<double>{1.5, 3.5, 5.0});
  // k=3, s=2, p=1: windows [pad,1,2], [2,3,4], [4,5,pad]
  REQUIRE(run(3, 2, 1, false, true, 3) == std::vector<double>{1.0, 3.0, 3.0});
  REQUIRE(run(3, 2, 1, false, false, 3) == std::vector<double>{1.5, 3.0, 4.5});
}

TEST_CASE("pooling kernels reject integer inputs", "[pool][kernels]") {
  auto& be = octo::kernels::cpu_backend();
  PoolConfig c{1, 1, 2, 2, 2, 2, 2, 2, 0, 0, 1, 1, false, true};
  Tensor x = octo::zeros({1, 1, 2, 2}, {.dtype = octo::kInt64});
  Tensor y = octo::zeros({1, 1, 1, 1}, {.dtype = octo::kInt64});
  Tensor idx = octo::zeros({1, 1, 1, 1}, {.dtype = octo::kInt64});
  REQUIRE_THROWS_AS(be.max_pool2d_forward(y.arg(), idx.arg(), x.arg(), c.params()),
                    octo::ValueError);
  REQUIRE_THROWS_WITH(be.avg_pool2d_forward(y.arg(), x.arg(), c.params()),
                      Catch::Contains("avg_pool2d: unsupported dtype int64"));
}

TEST_CASE("covering_outputs lists exactly the windows that span a position", "[pool][kernels]") {
  // Brute force: output o's window spans [o * s - p, o * s - p + span).
  for (int64_t size : {1, 4, 7, 10})
    for (int64_t k : {1, 2, 3})
      for (int64_t s : {1, 2, 3})
        for (int64_t d : {1, 2})
          for (int64_t p = 0; p <= k / 2; ++p)
            for (bool ceil : {false, true}) {
              const int64_t span = d * (k - 1) + 1, out = out_len(size, k, s, p, d, ceil);
              for (int64_t x = 0; x < size; ++x) {
                INFO("size " << size << " k" << k << " s" << s << " d" << d << " p" << p
                             << (ceil ? " ceil" : "") << " x " << x);
                std::vector<int64_t> want, got;
                for (int64_t o = 0; o < out; ++o)
                  if (o * s - p <= x && x < o * s - p + span) want.push_back(o);
                const octo::kernels::pool::Range r =
                    octo::kernels::pool::covering_outputs(x, span, s, p, out);
                for (int64_t o = r.begin; o < r.end; ++o) got.push_back(o);
                REQUIRE(got == want);
              }
            }
}

namespace {

/// grad_input by the gather form of kernels/pool_math.h (what the CUDA kernels compute, one
/// element at a time), into an uninitialised tensor whose every element must get written.
template <typename T>
Tensor gather_backward(const Tensor& grad_out, const Tensor& indices, const Shape& in_shape,
                       const Pool2dParams& p) {
  namespace pool = octo::kernels::pool;
  Tensor gi = octo::empty(in_shape, {.dtype = grad_out.dtype()});
  const auto gia = gi.arg(), goa = grad_out.arg();
  const auto ia = indices.defined() ? indices.arg() : octo::kernels::TensorArg{};
  const int64_t H = in_shape[2], W = in_shape[3], OH = grad_out.size(2), OW = grad_out.size(3);
  for (int64_t n = 0; n < in_shape[0]; ++n)
    for (int64_t c = 0; c < in_shape[1]; ++c) {
      const auto go = pool::plane<const T>(goa, n, c);
      for (int64_t h = 0; h < H; ++h)
        for (int64_t w = 0; w < W; ++w)
          pool::plane<T>(gia, n, c).at(h, w) =
              indices.defined()
                  ? pool::max_grad_at(go, pool::plane<const int64_t>(ia, n, c), h, w, W, OH, OW, p)
                  : pool::avg_grad_at(go, h, w, H, W, OH, OW, p);
    }
  return gi;
}

template <typename T>
void check_gather_matches_scatter(const PoolConfig& c, bool with_nan) {
  const octo::DType dtype = octo::dtype_of<T>;
  INFO("N" << c.N << " C" << c.C << " " << c.H << "x" << c.W << " k" << c.kH << "x" << c.kW << " s"
           << c.sH << "," << c.sW << " p" << c.pH << "," << c.pW << " d" << c.dH << "," << c.dW
           << (c.ceil_mode ? " ceil" : "") << (c.count_include_pad ? " incl" : "") << " " << dtype
           << (with_nan ? " nan" : ""));
  auto& be = octo::kernels::cpu_backend();
  const Shape xs{c.N, c.C, c.H, c.W};
  auto xv = random_tensor(xs, octo::kFloat64, 11).to_vector<double>();
  if (with_nan)
    for (size_t i = 3; i < xv.size(); i += 7) xv[i] = std::numeric_limits<double>::quiet_NaN();
  const Tensor x = octo::tensor(xv, xs, {.dtype = dtype});
  // Bit for bit: the same values added in the same order (compared as doubles, exact for T).
  auto same_bits = [](const Tensor& a, const Tensor& b) {
    const auto av = a.to_vector<double>(), bv = b.to_vector<double>();
    REQUIRE(av.size() == bv.size());
    for (size_t i = 0; i < av.size(); ++i) {
      INFO("element " << i << ": " << av[i] << " vs " << bv[i]);
      REQUIRE((av[i] == bv[i] || (std::isnan(av[i]) && std::isnan(bv[i]))));
    }
  };

  const Shape ys{c.N, c.C, out_len(c.H, c.kH, c.sH, c.pH, c.dH, c.ceil_mode),
                 out_len(c.W, c.kW, c.sW, c.pW, c.dW, c.ceil_mode)};
  Tensor y = octo::empty(ys, {.dtype = dtype}), idx = octo::empty(ys, {.dtype = octo::kInt64});
  be.max_pool2d_forward(y.arg(), idx.arg(), x.arg(), c.params());
  const Tensor gy = random_nhwc(ys, dtype, 12);  // a strided grad_out
  Tensor gx = octo::empty(xs, {.dtype = dtype});
  be.max_pool2d_backward(gx.arg(), gy.arg(), idx.arg(), c.params());
  same_bits(gather_backward<T>(gy, idx, xs, c.params()), gx);

  if (c.dH == 1 && c.dW == 1) {
    const Shape as{c.N, c.C, out_len(c.H, c.kH, c.sH, c.pH, 1, c.ceil_mode),
                   out_len(c.W, c.kW, c.sW, c.pW, 1, c.ceil_mode)};
    const Tensor ga = random_nhwc(as, dtype, 13);
    Tensor gxa = octo::empty(xs, {.dtype = dtype});
    be.avg_pool2d_backward(gxa.arg(), ga.arg(), c.params());
    same_bits(gather_backward<T>(ga, Tensor(), xs, c.params()), gxa);
  }
}

}  // namespace

TEST_CASE("the gather form of pooling backward equals the cpu's scatter bit for bit",
          "[pool][kernels]") {
  for (const PoolConfig& c : kConfigs) {
    for (bool with_nan : {false, true}) {
      check_gather_matches_scatter<double>(c, with_nan);
      check_gather_matches_scatter<float>(c, with_nan);
    }
  }
}

TEST_CASE("pooling kernels accept an empty batch", "[pool][kernels]") {
  auto& be = octo::kernels::cpu_backend();
  PoolConfig c{0, 2, 5, 5, 2, 2, 2, 2, 0, 0, 1, 1, false, true};
  Tensor x = octo::zeros({0, 2, 5, 5}), y = octo::empty({0, 2, 2, 2});
  Tensor idx = octo::empty({0, 2, 2, 2}, {.dtype = octo::kInt64}), gx = octo::empty({0, 2, 5, 5});
  REQUIRE_NOTHROW(be.max_pool2d_forward(y.arg(), idx.arg(), x.arg(), c.params()));
  REQUIRE_NOTHROW(be.max_pool2d_backward(gx.arg(), y.arg(), idx.arg(), c.params()));
  REQUIRE_NOTHROW(be.avg_pool2d_forward(y.arg(), x.arg(), c.params()));
  REQUIRE_NOTHROW(be.avg_pool2d_backward(gx.arg(), y.arg(), c.params()));
  REQUIRE(gx.numel() == 0);
}

TEST_CASE("the 2x2 stride-2 max pooling path keeps the general rules: ties, NaN, -inf, odd sizes",
          "[pool][kernels]") {
  auto& be = octo::kernels::cpu_backend();
  for (bool ceil : {false, true}) {
    // 7 x 9: floor drops the last row and column; ceil_mode's partial windows take the
    // general path, which must agree too.
    PoolConfig c{2, 3, 7, 9, 2, 2, 2, 2, 0, 0, 1, 1, ceil, true};
    std::mt19937 gen(11);
    std::vector<double> v(static_cast<size_t>(c.N * c.C * c.H * c.W));
    for (double& x : v) x = static_cast<double>(gen() % 3);  // many ties
    const int64_t OH = out_len(c.H, 2, 2, 0, 1, ceil), OW = out_len(c.W, 2, 2, 0, 1, ceil);
    auto pool = [&](const Tensor& x) {
      Tensor y = octo::empty({c.N, c.C, OH, OW}, {.dtype = x.dtype()});
      Tensor idx = octo::empty({c.N, c.C, OH, OW}, {.dtype = octo::kInt64});
      be.max_pool2d_forward(y.arg(), idx.arg(), x.arg(), c.params());
      return std::make_pair(y.to_vector<double>(), idx.to_vector<int64_t>());
    };
    for (octo::DType dt : {octo::kFloat32, octo::kFloat64}) {
      INFO("ceil_mode " << ceil << ", " << dt);
      const MaxRef ref = ref_max(c, v);
      const auto [y, idx] = pool(octo::tensor(v, {c.N, c.C, c.H, c.W}).to(dt));
      check_close(y, ref.out, 0);
      REQUIRE(idx == ref.idx);
      // NaNs (two in one window: the later wins) and a window of -inf, against the general
      // path, which a tensor with non-unit column stride takes.
      std::vector<double> w = v;
      w[2] = w[12] = std::numeric_limits<double>::quiet_NaN();  // (0, 2) and (1, 3)
      w[40] = std::numeric_limits<double>::quiet_NaN();
      for (size_t i : {size_t(72), size_t(73), size_t(81), size_t(82)})
        w[i] = -std::numeric_limits<double>::infinity();
      const Tensor x = octo::tensor(w, {c.N, c.C, c.H, c.W}).to(dt);
      const Tensor strided = x.transpose(2, 3).contiguous().transpose(2, 3);
      REQUIRE(strided.strides()[3] != 1);
      const auto [yf, idf] = pool(x);
      const auto [yg, idg] = pool(strided);
      REQUIRE(idf == idg);
      for (size_t i = 0; i < yf.size(); ++i)
        REQUIRE((yf[i] == yg[i] || (std::isnan(yf[i]) && std::isnan(yg[i]))));
      REQUIRE(std::isnan(yf[1]));  // plane 0, oh 0, ow 1: its window holds both NaNs
      REQUIRE(idf[1] == 12);
    }
  }
}

TEST_CASE("the 2x2 max pooling path on rows wider than a vector and on 16-bit tensors",
          "[pool][kernels][half]") {
  // 39 columns: 19 outputs a row, one full vector of 16 and a tail of 3. The reference is the
  // general path in float64 (a non-unit column stride takes it); the values are small integers,
  // NaNs and -inf, exact in every dtype, so 16-bit results must match it exactly too.
  auto& be = octo::kernels::cpu_backend();
  PoolConfig c{2, 3, 6, 39, 2, 2, 2, 2, 0, 0, 1, 1, false, true};
  const int64_t OH = 3, OW = 19;
  std::mt19937 gen(5);
  std::vector<double> v(static_cast<size_t>(c.N * c.C * c.H * c.W));
  for (double& x : v) x = static_cast<double>(gen() % 5) - 2.0;  // ties, negatives
  for (int k = 0; k < 12; ++k) v[gen() % v.size()] = std::numeric_limits<double>::quiet_NaN();
  for (size_t i : {size_t(34), size_t(35), size_t(39 + 34), size_t(39 + 35)})
    v[i] = -std::numeric_limits<double>::infinity();  // plane 0, window (0, 17): all -inf
  const Tensor x64 = octo::tensor(v, {c.N, c.C, c.H, c.W}, {.dtype = octo::kFloat64});
  const Tensor general = x64.transpose(2, 3).contiguous().transpose(2, 3);
  REQUIRE(general.strides()[3] != 1);
  Tensor y_ref = octo::empty({c.N, c.C, OH, OW}, {.dtype = octo::kFloat64});
  Tensor i_ref = octo::empty({c.N, c.C, OH, OW}, {.dtype = octo::kInt64});
  be.max_pool2d_forward(y_ref.arg(), i_ref.arg(), general.arg(), c.params());
  const auto yr = y_ref.to_vector<double>();
  const auto ir = i_ref.to_vector<int64_t>();
  REQUIRE(yr[17] == -std::numeric_limits<double>::infinity());
  REQUIRE(ir[17] == 34);
  Tensor gy64 = octo::tensor(std::vector<double>(yr.size(), 0.0), {c.N, c.C, OH, OW},
                             {.dtype = octo::kFloat64});
  for (int64_t o = 0; o < gy64.numel(); ++o) gy64.data_ptr<double>()[o] = double(o % 7) - 3.0;
  Tensor gx_ref = octo::empty({c.N, c.C, c.H, c.W}, {.dtype = octo::kFloat64});
  be.max_pool2d_backward(gx_ref.arg(), gy64.arg(), i_ref.arg(), c.params());
  const auto gr = gx_ref.to_vector<double>();

  for (octo::DType dt : {octo::kFloat32, octo::kBFloat16, octo::kFloat16}) {
    INFO(dt);
    const Tensor x = x64.to(dt);
    Tensor y = octo::full({c.N, c.C, OH, OW}, 7, {.dtype = dt});
    Tensor idx = octo::zeros({c.N, c.C, OH, OW}, {.dtype = octo::kInt64});
    be.max_pool2d_forward(y.arg(), idx.arg(), x.arg(), c.params());
    const auto yv = y.to(octo::kFloat64).to_vector<double>();
    REQUIRE(idx.to_vector<int64_t>() == ir);
    for (size_t i = 0; i < yv.size(); ++i) {
      INFO("output " << i);
      REQUIRE((yv[i] == yr[i] || (std::isnan(yv[i]) && std::isnan(yr[i]))));
    }
    Tensor gx = octo::full({c.N, c.C, c.H, c.W}, 7, {.dtype = dt});
    be.max_pool2d_backward(gx.arg(), gy64.to(dt).arg(), idx.arg(), c.params());
    REQUIRE(gx.to(octo::kFloat64).to_vector<double>() == gr);
  }
}
