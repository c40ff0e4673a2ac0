// softmax / log_softmax kernels and their backward against reference loops.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include <octo/octo.h>

#include "kernels/backend.h"

using octo::Shape;
using octo::Tensor;

namespace {

/// Applies f to every line along `dim` of a row-major `data` of `shape` (in place).
template <typename F>
void for_each_line(std::vector<double>& data, const Shape& shape, int64_t dim, F f) {
  int64_t len = shape.empty() ? 1 : shape[dim], inner = 1, outer = 1;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    if (d < dim) outer *= shape[d];
    if (d > dim) inner *= shape[d];
  }
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      std::vector<double*> line;
      for (int64_t k = 0; k < len; ++k) line.push_back(&data[(o * len + k) * inner + i]);
      f(line);
    }
  }
}

std::vector<double> ref_softmax(std::vector<double> data, const Shape& shape, int64_t dim,
                                bool log) {
  for_each_line(data, shape, dim, [log](std::vector<double*>& line) {
    double m = -std::numeric_limits<double>::infinity(), s = 0;
    for (double* p : line) m = std::max(m, *p);
    for (double* p : line) s += std::exp(*p - m);
    for (double* p : line) *p = log ? *p - m - std::log(s) : std::exp(*p - m) / s;
  });
  return data;
}

void check_close(const Tensor& got, const std::vector<double>& want, double tol) {
  std::vector<double> g = got.contiguous().to(octo::kFloat64).to_vector<double>();
  REQUIRE(g.size() == want.size());
  for (size_t i = 0; i < g.size(); ++i) {
    INFO("element " << i << ": got " << g[i] << ", want " << want[i]);
    CHECK(std::fabs(g[i] - want[i]) <= tol * (1.0 + std::fabs(want[i])));
  }
}

/// Contiguous (0), transposed (1) or strided-slice (2) random input of `shape`.
Tensor make_input(const Shape& shape, octo::DType dtype, int layout, double scale = 3.0) {
  if (layout == 1 && shape.size() >= 2) {
    Shape rev(shape.rbegin(), shape.rend()), perm;
    for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) perm.push_back(d);
    return (octo::randn(rev, {.dtype = dtype}) * scale).permute(perm);
  }
  if (layout == 2 && !shape.empty()) {
    Shape big = shape;
    big.front() *= 2;
    return (octo::randn(big, {.dtype = dtype}) * scale).slice(0, 0, std::nullopt, 2);
  }
  return octo::randn(shape, {.dtype = dtype}) * scale;
}

const std::vector<Shape> kShapes = {{},        {1},          {7},    {2, 3}, {4, 1, 5},
                                    {3, 5, 2}, {2, 3, 4, 5}, {0, 3}, {3, 0}, {64, 33}};

}  // namespace

TEST_CASE("softmax and log_softmax match reference loops") {
  for (octo::DType dtype : {octo::kFloat32, octo::kFloat64}) {
    double tol = dtype == octo::kFloat32 ? 2e-6 : 1e-13;
    for (const Shape& shape : kShapes) {
      for (int layout = 0; layout < 3; ++layout) {
        Tensor x = make_input(shape, dtype, layout);
        std::vector<double> data = x.contiguous().to(octo::kFloat64).to_vector<double>();
        int64_t nd = std::max<int64_t>(1, static_cast<int64_t>(shape.size()));
        for (int64_t dim = -nd; dim < nd; ++dim) {
          INFO("dtype " << dtype << " shape " << octo::shape_str(shape) << " layout " << layout
                        << " dim " << dim);
          int64_t d = dim < 0 ? dim + nd : dim;
          Tensor s = octo::softmax(x, dim);
          Tensor l = x.log_softmax(dim);
          CHECK(s.sizes() == shape);
          CHECK(s.dtype() == dtype);
          check_close(s, ref_softmax(data, shape, d, false), tol);
          check_close(l, ref_softmax(data, shape, d, true), tol);
        }
      }
    }
  }
}

TEST_CASE("softmax is stable for large inputs and rows of -inf") {
  double inf = std::numeric_limits<double>::infinity();
  Tensor x =
      octo::tensor({1000, 1001, 1002, -1000, -1001, -inf}, {.dtype = octo::kFloat32}).view({2, 3});
  std::vector<double> data = x.to(octo::kFloat64).to_vector<double>();
  check_close(octo::softmax(x, 1), ref_softmax(data, {2, 3}, 1, false), 1e-6);
  check_close(octo::log_softmax(x, 1).slice(1, 0, 2),
              {-2.40760596, -1.40760596, -0.31326169, -1.31326169}, 1e-6);
  CHECK(octo::log_softmax(x, 1).to_vector<float>()[5] == -inf);
  // A row of only -inf has no distribution: NaN, like torch.
  Tensor all_inf = octo::full({3}, -inf, {.dtype = octo::kFloat64});
  for (double v : octo::softmax(all_inf, 0).to_vector<double>()) CHECK(std::isnan(v));
  // NaN in a row poisons the row only.
  Tensor n = octo::tensor({1, std::nan(""), 2, 3}, {.dtype = octo::kFloat64}).view({2, 2});
  std::vector<double> sn = octo::softmax(n, 1).to_vector<double>();
  CHECK(std::isnan(sn[0]));
  CHECK(std::isnan(sn[1]));
  CHECK(sn[2] + sn[3] == Approx(1.0));
}

TEST_CASE("softmax_backward kernel matches the closed forms on strided tensors") {
  auto& b = octo::kernels::cpu_backend();
  for (octo::DType dtype : {octo::kFloat32, octo::kFloat64}) {
    double tol = dtype == octo::kFloat32 ? 1e-5 : 1e-12;
    for (bool log : {false, true}) {
      for (int64_t dim : {0, 1, 2}) {
        Shape shape{3, 4, 5};
        Tensor y = log ? octo::log_softmax(make_input(shape, dtype, 1), dim)
                       : octo::softmax(make_input(shape, dtype, 2), dim);
        Tensor g = make_input(shape, dtype, 1);
        Tensor gi = octo::empty({5, 4, 3}, {.dtype = dtype}).permute({2, 1, 0});  // strided out
        b.softmax_backward(gi.arg(), g.arg(), y.arg(), static_cast<int>(dim), log);
        std::vector<double> yv = y.contiguous().to(octo::kFloat64).to_vector<double>();
        std::vector<double> gv = g.contiguous().to(octo::kFloat64).to_vector<double>();
        std::vector<double> want(yv.size());
        // Index lines of y and g together by running the same walk over an index vector.
        std::vector<double> pos(yv.size());
        for (size_t i = 0; i < pos.size(); ++i) pos[i] = static_cast<double>(i);
        for_each_line(pos, shape, dim, [&](std::vector<double*>& line) {
          double s = 0;
          for (double* p : line) {
            size_t i = static_cast<size_t>(*p);
            s += log ? gv[i] : gv[i] * yv[i];
          }
          for (double* p : line) {
            size_t i = static_cast<size_t>(*p);
            want[i] = log ? gv[i] - std::exp(yv[i]) * s : yv[i] * (gv[i] - s);
          }
        });
        INFO("dtype " << dtype << " log " << log << " dim " << dim);
        check_close(gi, want, tol);
      }
    }
  }
}

TEST_CASE("softmax rejects bad dims and integer inputs") {
  Tensor x = octo::randn({2, 3});
  CHECK_THROWS_AS(octo::softmax(x, 2), octo::IndexError);
  CHECK_THROWS_WITH(octo::softmax(x, 2),
                    Catch::Contains("softmax") && Catch::Contains("out of range"));
  CHECK_THROWS_AS(octo::log_softmax(x, -3), octo::IndexError);
  Tensor i = octo::randint(0, 4, {2, 3});
  CHECK_THROWS_AS(octo::softmax(i, 1), octo::ValueError);
  CHECK_THROWS_WITH(octo::log_softmax(i, 1),
                    Catch::Contains("log_softmax") && Catch::Contains("int64"));
  Tensor c = octo::randn({2, 3}, {.device = octo::Device("cpu:1")});
  CHECK(octo::softmax(c, 1).device() == octo::Device("cpu:1"));
}
