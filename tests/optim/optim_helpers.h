// Shared helpers for the optim tests: random parameters and gradients, value checks, error checks.
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

#include <octo/octo.h>

#define CHECK_ERROR(expr, Type, fragment)               \
  do {                                                  \
    CHECK_THROWS_AS(expr, Type);                        \
    CHECK_THROWS_WITH(expr, Catch::Contains(fragment)); \
  } while (0)

namespace optim_test {

using octo::Tensor;
using Vec = std::vector<double>;
namespace optim = octo::optim;

inline Vec random_vec(size_t n, unsigned seed, double scale = 1.0) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> dist(0.0, scale);
  Vec v(n);
  for (double& x : v) x = dist(gen);
  return v;
}

inline Tensor make_param(const Vec& v, const octo::Shape& shape, octo::DType dt = octo::kFloat64,
                         octo::Device dev = octo::kCPU) {
  Tensor t = octo::tensor(v, shape, {.dtype = dt, .device = dev});
  t.requires_grad_();
  return t;
}

inline Vec values(const Tensor& t) { return t.to(octo::kCPU).to_vector<double>(); }

/// Sets p's gradient; `transposed` stores it as a non-contiguous view (a [n, m] tensor's t()).
inline void give_grad(const Tensor& p, const Vec& g, bool transposed = false) {
  if (transposed && p.dim() == 2) {
    Tensor base =
        octo::tensor(g, {p.size(0), p.size(1)}, {.dtype = p.dtype(), .device = p.device()});
    // the same values, laid out column-major: build the transpose, then view it back
    Tensor tt = base.t().contiguous().t();
    REQUIRE_FALSE(tt.is_contiguous());
    p.set_grad(tt);
  } else {
    p.set_grad(octo::tensor(g, p.sizes(), {.dtype = p.dtype(), .device = p.device()}));
  }
}

inline void check_close(const Vec& got, const Vec& want, double rtol, double atol) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << ": got " << got[i] << ", want " << want[i]);
    CHECK(std::abs(got[i] - want[i]) <= atol + rtol * std::abs(want[i]));
  }
}

/// The gradient fed at step s to parameter k: varying in size so that amsgrad's max matters.
inline Vec grad_at(size_t n, int step, int k) {
  const double scale = (step % 2 == 0) ? 1.0 : 0.1 * (step + 1);
  return random_vec(n, 1000u + 37u * step + k, scale);
}

inline const std::vector<octo::Shape> kShapes = {{3, 4}, {5}, {1}, {2, 1, 3}};

inline std::vector<Vec> initial_values() {
  std::vector<Vec> out;
  for (size_t k = 0; k < kShapes.size(); ++k)
    out.push_back(random_vec(octo::detail::shape_numel(kShapes[k]), 7u + k));
  return out;
}

inline std::vector<Tensor> make_params(const std::vector<Vec>& vals,
                                       octo::DType dt = octo::kFloat64,
                                       octo::Device dev = octo::kCPU) {
  std::vector<Tensor> ps;
  for (size_t k = 0; k < vals.size(); ++k) ps.push_back(make_param(vals[k], kShapes[k], dt, dev));
  return ps;
}

}  // namespace optim_test
