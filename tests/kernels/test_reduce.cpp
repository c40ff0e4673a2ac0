// Reduction kernels (via sum, mean, prod, max, min, argmax, argmin, var) against reference loops.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <random>

#include <octo/octo.h>

#include "kernels/backend.h"

using octo::Shape;
using octo::Tensor;

namespace {

using Fold = std::function<double(const std::vector<double>&)>;

/// Reference: groups the elements of a row-major `data` of `shape` by output (the masked dims
/// collapsed), in row-major order within each group, and folds each group.
std::vector<double> ref_reduce(const std::vector<double>& data, const Shape& shape,
                               const std::vector<bool>& mask, const Fold& fold) {
  Shape keep = shape;
  for (size_t d = 0; d < shape.size(); ++d)
    if (mask[d]) keep[d] = 1;
  const int64_t n_out = octo::detail::shape_numel(keep);
  std::vector<std::vector<double>> groups(static_cast<size_t>(n_out));
  for (int64_t i = 0; i < static_cast<int64_t>(data.size()); ++i) {
    int64_t rem = i, o = 0, mul = 1;
    for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
      int64_t idx = rem % shape[d];
      rem /= shape[d];
      if (!mask[d]) o += idx * mul;
      mul *= keep[d];
    }
    groups[o].push_back(data[i]);
  }
  std::vector<double> out;
  for (auto& g : groups) out.push_back(fold(g));
  return out;
}

const Fold kSum = [](const std::vector<double>& v) {
  return std::accumulate(v.begin(), v.end(), 0.0);
};
const Fold kMean = [](const std::vector<double>& v) {
  return kSum(v) / static_cast<double>(v.size());
};
const Fold kProd = [](const std::vector<double>& v) {
  return std::accumulate(v.begin(), v.end(), 1.0, std::multiplies<double>());
};
const Fold kMax = [](const std::vector<double>& v) {
  return *std::max_element(v.begin(), v.end());
};
const Fold kMin = [](const std::vector<double>& v) {
  return *std::min_element(v.begin(), v.end());
};
const Fold kArgMax = [](const std::vector<double>& v) {
  return static_cast<double>(std::max_element(v.begin(), v.end()) - v.begin());  // first on ties
};
const Fold kArgMin = [](const std::vector<double>& v) {
  return static_cast<double>(std::min_element(v.begin(), v.end()) - v.begin());
};
Fold var_fold(int64_t correction) {
  return [correction](const std::vector<double>& v) {
    double m = kMean(v), s = 0;
    for (double x : v) s += (x - m) * (x - m);
    return s /
           std::max<double>(0.0, static_cast<double>(v.size()) - static_cast<double>(correction));
  };
}

Shape dims_of(const std::vector<bool>& mask) {
  Shape dims;
  for (size_t d = 0; d < mask.size(); ++d)
    if (mask[d]) dims.push_back(static_cast<int64_t>(d));
  return dims;
}

Shape result_shape(const Shape& shape, const std::vector<bool>& mask, bool keepdim) {
  Shape s;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (!mask[d])
      s.push_back(shape[d]);
    else if (keepdim)
      s.push_back(1);
  }
  return s;
}

void check_close(const Tensor& got, const std::vector<double>& want, double tol) {
  std::vector<double> g = got.contiguous().to(octo::kFloat64).to_vector<double>();
  REQUIRE(g.size() == want.size());
  for (size_t i = 0; i < g.size(); ++i) {
    INFO("element " << i << ": got " << g[i] << ", want " << want[i]);
    if (std::isnan(want[i])) {
      CHECK(std::isnan(g[i]));
    } else if (std::isinf(want[i])) {
      CHECK(g[i] == want[i]);
    } else {
      CHECK(std::fabs(g[i] - want[i]) <= tol * (1.0 + std::fabs(want[i])));
    }
  }
}

/// A random tensor of `shape` that is, by `layout`, contiguous (0), a transposed copy (1) or a
/// strided slice of a larger tensor (2).
Tensor make_input(const Shape& shape, octo::DType dtype, int layout) {
  auto rnd = [&](const Shape& s) {
    if (dtype == octo::kInt64) return octo::randint(-20, 20, s);
    return octo::randn(s, {.dtype = dtype});
  };
  if (layout == 1 && shape.size() >= 2) {
    Shape rev(shape.rbegin(), shape.rend());
    Shape perm;
    for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) perm.push_back(d);
    return rnd(rev).permute(perm);
  }
  if (layout == 2 && !shape.empty()) {
    Shape big = shape;
    big.back() = shape.back() * 2;
    return rnd(big).slice(-1, 0, std::nullopt, 2);
  }
  return rnd(shape);
}

std::vector<Shape> test_shapes() {
  std::vector<Shape> shapes = {{},        {1},       {7},         {0},          {3, 0},
                               {2, 3},    {5, 1, 4}, {3, 4, 5},   {2, 3, 1, 6}, {1, 1, 1},
                               {300, 70}, {70, 300}, {4, 3, 2, 5}};
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> nd(1, 4), sz(1, 7);
  for (int i = 0; i < 6; ++i) {
    Shape s;
    int n = nd(rng);
    for (int d = 0; d < n; ++d) s.push_back(sz(rng));
    shapes.push_back(s);
  }
  return shapes;
}

/// All masks for small ndim, plus "all dims".
std::vector<std::vector<bool>> masks_for(size_t ndim) {
  std::vector<std::vector<bool>> masks;
  for (unsigned bits = 0; bits < (1u << ndim); ++bits) {
    std::vector<bool> m(ndim);
    for (size_t d = 0; d < ndim; ++d) m[d] = (bits >> d) & 1u;
    masks.push_back(m);
  }
  return masks;
}

}  // namespace

TEST_CASE("sum and mean match reference loops over every dim subset") {
  for (octo::DType dtype : {octo::kFloat32, octo::kFloat64, octo::kInt64}) {
    for (const Shape& shape : test_shapes()) {
      for (int layout = 0; layout < 3; ++layout) {
        Tensor x = make_input(shape, dtype, layout);
        std::vector<double> data = x.contiguous().to(octo::kFloat64).to_vector<double>();
        for (const auto& mask : masks_for(shape.size())) {
          if (dims_of(mask).empty() && !shape.empty()) continue;  // empty list means "all"
          for (bool keepdim : {false, true}) {
            INFO("dtype " << dtype << " shape " << octo::shape_str(shape) << " layout " << layout
                          << " dims " << octo::shape_str(dims_of(mask)) << " keepdim " << keepdim);
            double tol = dtype == octo::kFloat32 ? 1e-5 : 1e-12;
            Tensor s = octo::sum(x, dims_of(mask), keepdim);
            CHECK(s.sizes() == result_shape(shape, mask, keepdim));
            CHECK(s.dtype() == dtype);
            check_close(s, ref_reduce(data, shape, mask, kSum), dtype == octo::kInt64 ? 0 : tol);
            if (dtype != octo::kInt64) {
              Tensor m = octo::mean(x, dims_of(mask), keepdim);
              CHECK(m.sizes() == result_shape(shape, mask, keepdim));
              check_close(m, ref_reduce(data, shape, mask, kMean), tol);
            }
          }
        }
      }
    }
  }
}

TEST_CASE("full sum: empty dims list, member form, integers and bools") {
  Tensor x = octo::randn({4, 5}, {.dtype = octo::kFloat64});
  std::vector<double> v = x.to_vector<double>();
  double want = std::accumulate(v.begin(), v.end(), 0.0);
  CHECK(x.sum().dim() == 0);
  CHECK(x.sum().item<double>() == Approx(want).epsilon(1e-12));
  CHECK(octo::sum(x, {}, true).sizes() == Shape{1, 1});
  CHECK(x.mean().item<double>() == Approx(want / 20).epsilon(1e-12));
  Tensor i32 = octo::tensor({1, 2, 3, 4}, {.dtype = octo::kInt32});
  CHECK(i32.sum().dtype() == octo::kInt64);  // integer sums promote to int64, like torch
  CHECK(i32.sum().item<int64_t>() == 10);
  Tensor b = octo::tensor({1, 0, 1, 1}, {.dtype = octo::kBool});
  CHECK(b.sum().dtype() == octo::kInt64);
  CHECK(b.sum().item<int64_t>() == 3);
  // int64 sums are exact beyond 2^53.
  Tensor big = octo::full({3}, int64_t{1} << 60, {.dtype = octo::kInt64});
  CHECK(big.sum().item<int64_t>() == 3 * (int64_t{1} << 60));
}

// Note [Integer lanes and GCC 12]: every run length from 0 to 67 (each lane count and tail),
// contiguous and strided, for each integer input type; then sums that wrap past int64.
TEST_CASE("integer sums are exact for every run length and wrap past int64") {
  for (octo::DType dtype : {octo::kInt64, octo::kInt32, octo::kUInt8}) {
    for (int64_t n = 0; n <= 67; ++n) {
      Tensor x = octo::arange(2 * n, {.dtype = dtype});  // at most 133: fits uint8
      std::vector<int64_t> v = x.to(octo::kInt64).to_vector<int64_t>();
      int64_t all = 0, even = 0;
      for (int64_t i = 0; i < 2 * n; ++i) {
        all += v[static_cast<size_t>(i)];
        if (i % 2 == 0) even += v[static_cast<size_t>(i)];
      }
      INFO(octo::dtype_name(dtype) << " n = " << n);
      CHECK(x.sum().item<int64_t>() == all);
      CHECK(x.slice(0, 0, 2 * n, 2).sum().item<int64_t>() == even);  // stride 2
      CHECK(octo::sum(x.view({2, n}), {1}).to_vector<int64_t>()[0] ==
            std::accumulate(v.begin(), v.begin() + n, int64_t{0}));
    }
  }
  const int64_t big = std::numeric_limits<int64_t>::max();
  for (int64_t n : {2, 5, 9, 33}) {
    Tensor x = octo::full({n}, big, {.dtype = octo::kInt64});
    // n copies of 2^63 - 1 wrap to 2^63 - n modulo 2^64 when n is odd, to -n when n is even.
    uint64_t want = static_cast<uint64_t>(n) * static_cast<uint64_t>(big);
    INFO("n = " << n);
    CHECK(x.sum().item<int64_t>() == static_cast<int64_t>(want));
  }
}

TEST_CASE("large reductions are accurate and independent of the thread count") {
  const int saved = octo::get_num_threads();
  Tensor x = octo::rand({1009 * 991}, {.dtype = octo::kFloat32});
  std::vector<double> v = x.to(octo::kFloat64).to_vector<double>();
  double want = std::accumulate(v.begin(), v.end(), 0.0);
  octo::set_num_threads(1);
  Tensor s1 = x.sum(), m1 = x.max(), v1 = octo::var(x, {}), a1 = octo::argmax(x, 0);
  Tensor c1 = octo::sum(x.view({1009, 991}), {0});  // column strategy
  Tensor r1 = octo::sum(x.view({1009, 991}), {1});  // row strategy
  octo::set_num_threads(2);
  Tensor s2 = x.sum(), m2 = x.max(), v2 = octo::var(x, {}), a2 = octo::argmax(x, 0);
  Tensor c2 = octo::sum(x.view({1009, 991}), {0});
  Tensor r2 = octo::sum(x.view({1009, 991}), {1});
  octo::set_num_threads(saved);
  CHECK(s1.item<float>() == s2.item<float>());
  CHECK(m1.item<float>() == m2.item<float>());
  CHECK(v1.item<float>() == v2.item<float>());
  CHECK(a1.item<int64_t>() == a2.item<int64_t>());
  CHECK(c1.to_vector<float>() == c2.to_vector<float>());
  CHECK(r1.to_vector<float>() == r2.to_vector<float>());
  // Accumulating in double keeps a float32 sum of 10^6 uniforms at float32 rounding.
  CHECK(s1.item<float>() == Approx(want).epsilon(1e-6));
  CHECK(m1.item<float>() == static_cast<float>(*std::max_element(v.begin(), v.end())));
  CHECK(a1.item<int64_t>() == std::max_element(v.begin(), v.end()) - v.begin());
  double mean = want / static_cast<double>(v.size()), ss = 0;
  for (double e : v) ss += (e - mean) * (e - mean);
  CHECK(v1.item<float>() == Approx(ss / static_cast<double>(v.size() - 1)).epsilon(1e-5));
  check_close(c1, ref_reduce(v, {1009, 991}, {true, false}, kSum), 1e-5);
  check_close(r1, ref_reduce(v, {1009, 991}, {false, true}, kSum), 1e-5);
}

TEST_CASE("prod, max, min, argmax, argmin and var along one dim match reference loops") {
  for (octo::DType dtype : {octo::kFloat32, octo::kFloat64, octo::kInt64}) {
    for (const Shape& shape : test_shapes()) {
      if (octo::detail::shape_numel(shape) == 0 || shape.empty()) continue;
      for (int layout = 0; layout < 3; ++layout) {
        Tensor x = make_input(shape, dtype, layout);
        std::vector<double> data = x.contiguous().to(octo::kFloat64).to_vector<double>();
        for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
          std::vector<bool> mask(shape.size(), false);
          mask[d] = true;
          for (bool keepdim : {false, true}) {
            INFO("dtype " << dtype << " shape " << octo::shape_str(shape) << " layout " << layout
                          << " dim " << d << " keepdim " << keepdim);
            double tol = dtype == octo::kFloat32 ? 1e-5 : 1e-12;
            Shape want_shape = result_shape(shape, mask, keepdim);
            if (shape[d] <= 12) {  // keep products of normals in range
              Tensor p = octo::prod(x, d, keepdim);
              CHECK(p.sizes() == want_shape);
              check_close(p, ref_reduce(data, shape, mask, kProd), dtype == octo::kInt64 ? 0 : tol);
            }
            auto [mx, imx] = octo::max(x, d, keepdim);
            auto [mn, imn] = octo::min(x, d, keepdim);
            CHECK(mx.sizes() == want_shape);
            CHECK(imx.dtype() == octo::kInt64);
            check_close(mx, ref_reduce(data, shape, mask, kMax), 0);
            check_close(mn, ref_reduce(data, shape, mask, kMin), 0);
            check_close(imx, ref_reduce(data, shape, mask, kArgMax), 0);
            check_close(imn, ref_reduce(data, shape, mask, kArgMin), 0);
            check_close(octo::argmax(x, d, keepdim), ref_reduce(data, shape, mask, kArgMax), 0);
            check_close(octo::argmin(x, d - static_cast<int64_t>(shape.size()), keepdim),
                        ref_reduce(data, shape, mask, kArgMin), 0);
            if (dtype != octo::kInt64) {
              for (int64_t c : {0, 1, 2}) {
                Tensor v = octo::var(x, {d}, c, keepdim);
                CHECK(v.sizes() == want_shape);
                check_close(v, ref_reduce(data, shape, mask, var_fold(c)), tol * 10);
              }
            }
          }
        }
      }
    }
  }
}

TEST_CASE("var over several dims, full max and min") {
  for (int layout = 0; layout < 3; ++layout) {
    Tensor x = make_input({3, 4, 5}, octo::kFloat64, layout);
    std::vector<double> data = x.contiguous().to_vector<double>();
    for (const auto& mask : masks_for(3)) {
      if (dims_of(mask).empty()) continue;
      check_close(octo::var(x, dims_of(mask), 1, true),
                  ref_reduce(data, {3, 4, 5}, mask, var_fold(1)), 1e-12);
    }
    CHECK(octo::var(x, {}, 0).item<double>() ==
          Approx(ref_reduce(data, {3, 4, 5}, {true, true, true}, var_fold(0))[0]).epsilon(1e-12));
    CHECK(x.max().item<double>() == *std::max_element(data.begin(), data.end()));
    CHECK(x.min().item<double>() == *std::min_element(data.begin(), data.end()));
  }
  Tensor i = octo::tensor({3, -7, 9, 2}, {.dtype = octo::kInt64});
  CHECK(i.max().item<int64_t>() == 9);
  CHECK(i.min().item<int64_t>() == -7);
  CHECK(i.max().dtype() == octo::kInt64);
}

TEST_CASE("ties, NaN, empty reductions and 0-d inputs") {
  Tensor t = octo::tensor({1, 5, 5, 2, -3, -3}, {.dtype = octo::kFloat64}).view({2, 3});
  CHECK(octo::argmax(t.view({6}), 0).item<int64_t>() == 1);  // first of the tied maxima
  CHECK(octo::argmin(t.view({6}), 0).item<int64_t>() == 4);
  double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor n = octo::tensor({1, nan, 3, nan}, {.dtype = octo::kFloat64});
  CHECK(std::isnan(n.max().item<double>()));
  CHECK(std::isnan(n.min().item<double>()));
  CHECK(octo::argmax(n, 0).item<int64_t>() == 1);  // NaN counts as the extreme, like torch
  CHECK(std::isnan(n.sum().item<double>()));
  // Reducing an empty dim: sum 0, prod 1, mean / var NaN; max and arg* have no identity.
  Tensor e = octo::zeros({3, 0}, {.dtype = octo::kFloat32});
  CHECK(octo::sum(e, {1}).to_vector<float>() == std::vector<float>{0, 0, 0});
  CHECK(octo::prod(e, 1).to_vector<float>() == std::vector<float>{1, 1, 1});
  CHECK(std::isnan(octo::mean(e, {1}).to_vector<float>()[0]));
  CHECK(std::isnan(octo::var(e, {1}).to_vector<float>()[0]));
  CHECK(octo::sum(e, {0}).sizes() == Shape{0});
  CHECK(octo::max(e, 0).first.sizes() == Shape{0});  // nothing to reduce into: fine
  CHECK_THROWS_AS(octo::max(e, 1), octo::IndexError);
  CHECK_THROWS_WITH(octo::max(e, 1), Catch::Contains("to have non-zero size"));
  CHECK_THROWS_AS(e.max(), octo::IndexError);
  CHECK_THROWS_AS(octo::argmin(e, 1), octo::IndexError);
  CHECK(e.sum().item<float>() == 0.0f);
  // 0-d tensors reduce over "dim 0" to themselves.
  Tensor s = octo::scalar_tensor(2.5, {.dtype = octo::kFloat64});
  CHECK(octo::sum(s, {0}).item<double>() == 2.5);
  CHECK(octo::max(s, 0).first.item<double>() == 2.5);
  CHECK(octo::argmax(s, -1).item<int64_t>() == 0);
  CHECK(octo::var(s, {}, 0).item<double>() == 0.0);
}

TEST_CASE("reductions keep the input's device") {
  Tensor x = octo::randn({4, 6}, {.dtype = octo::kFloat32, .device = octo::Device("cpu:1")});
  CHECK(x.sum().device() == octo::Device("cpu:1"));
  CHECK(octo::argmax(x, 1).device() == octo::Device("cpu:1"));
  CHECK(octo::var(x, {0}).device() == octo::Device("cpu:1"));
  std::vector<double> data = x.to(octo::kFloat64).to_vector<double>();
  check_close(octo::sum(x, {1}), ref_reduce(data, {4, 6}, {false, true}, kSum), 1e-5);
}

TEST_CASE("bad dims and dtypes raise clear errors") {
  Tensor x = octo::randn({2, 3});
  CHECK_THROWS_AS(octo::sum(x, {2}), octo::IndexError);
  CHECK_THROWS_WITH(octo::sum(x, {2}), Catch::Contains("sum") && Catch::Contains("out of range"));
  CHECK_THROWS_AS(octo::mean(x, {-3}), octo::IndexError);
  CHECK_THROWS_AS(octo::argmax(x, 5), octo::IndexError);
  CHECK_THROWS_WITH(octo::argmax(x, 5), Catch::Contains("argmax"));
  CHECK_THROWS_AS(octo::max(x, -3), octo::IndexError);
  CHECK_THROWS_AS(octo::var(x, {0, 2}), octo::IndexError);
  CHECK_THROWS_AS(octo::prod(x, 2), octo::IndexError);
  CHECK_THROWS_AS(octo::sum(x, {0, -2}), octo::ValueError);
  CHECK_THROWS_WITH(octo::sum(x, {0, -2}), Catch::Contains("appears multiple times"));
  Tensor i = octo::randint(0, 5, {2, 3});
  CHECK_THROWS_AS(octo::mean(i), octo::ValueError);
  CHECK_THROWS_WITH(octo::mean(i), Catch::Contains("mean") && Catch::Contains("int64"));
  CHECK_THROWS_AS(octo::var(i, {0}), octo::ValueError);
  CHECK_THROWS_AS(octo::sum_to(x, {4, 3}), octo::ValueError);
  CHECK_THROWS_WITH(octo::sum_to(x, {4, 3}), Catch::Contains("sum_to"));
  CHECK_THROWS_AS(octo::sum_to(x, {1, 2, 3}), octo::ValueError);
}

TEST_CASE("sum_to undoes broadcasting") {
  Tensor x = octo::randn({2, 3, 4}, {.dtype = octo::kFloat64});
  std::vector<double> data = x.to_vector<double>();
  CHECK(octo::sum_to(x, {2, 3, 4}).is_alias_of(x));  // nothing to do: the input itself
  check_close(octo::sum_to(x, {4}), ref_reduce(data, {2, 3, 4}, {true, true, false}, kSum), 1e-12);
  check_close(octo::sum_to(x, {3, 1}), ref_reduce(data, {2, 3, 4}, {true, false, true}, kSum),
              1e-12);
  check_close(octo::sum_to(x, {2, 1, 4}), ref_reduce(data, {2, 3, 4}, {false, true, false}, kSum),
              1e-12);
  CHECK(octo::sum_to(x, {3, 1}).sizes() == Shape{3, 1});
  CHECK(octo::sum_to(x, {}).sizes() == Shape{});
  CHECK(octo::sum_to(x, {}).item<double>() == Approx(kSum(data)).epsilon(1e-12));
}

TEST_CASE("the backend reduce kernel accepts any reduced-dim set and strided outputs") {
  auto& b = octo::kernels::cpu_backend();
  Tensor x = octo::randn({4, 3, 5}, {.dtype = octo::kFloat64});
  std::vector<double> data = x.to_vector<double>();
  // Product over dims 0 and 2 into a strided out: a column of a [3, 2] buffer.
  Tensor buf = octo::zeros({1, 3, 2}, {.dtype = octo::kFloat64});
  Tensor out = buf.slice(2, 0, 1);  // [1, 3, 1], strides (6, 2, 1)
  b.reduce(octo::kernels::ReduceOp::Prod, out.arg(), x.arg(), {});
  check_close(out, ref_reduce(data, {4, 3, 5}, {true, false, true}, kProd), 1e-12);
  CHECK(buf.to_vector<double>()[1] == 0.0);  // the other column is untouched
  // ArgMax over two dims reports the row-major index within the reduced block.
  Tensor idx = octo::zeros({1, 3, 1}, {.dtype = octo::kInt64});
  b.reduce(octo::kernels::ReduceOp::ArgMax, idx.arg(), x.arg(), {});
  check_close(idx, ref_reduce(data, {4, 3, 5}, {true, false, true}, kArgMax), 0);
}
