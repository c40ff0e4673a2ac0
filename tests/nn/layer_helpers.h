// Shared helpers for the nn layer tests: random tensors, closeness and exception checks, printing.
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <octo/octo.h>

namespace layer_test {

using octo::Shape;
using octo::Tensor;
namespace nn = octo::nn;
using Vec = std::vector<double>;

inline Tensor rand_tensor(const Shape& shape, uint32_t seed, double lo = -2.0, double hi = 2.0) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  Vec v(static_cast<size_t>(octo::detail::shape_numel(shape)));
  for (double& x : v) x = dist(gen);
  return octo::tensor(v, shape, {.dtype = octo::kFloat64});
}

inline Tensor leaf(const Shape& shape, uint32_t seed) {
  Tensor t = rand_tensor(shape, seed);
  t.requires_grad_();
  return t;
}

inline Vec vals(const Tensor& t) { return t.to_vector<double>(); }

/// |got - want| <= tol + 1e-9 |want| elementwise (NaN never matches); reports the first miss.
inline void check_close(const std::vector<double>& got, const std::vector<double>& want,
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
inline Vec backprop(const Tensor& out, uint32_t seed) {
  Tensor g = rand_tensor(out.sizes(), seed);
  octo::sum(out * g).backward();
  return vals(g);
}

inline std::string repr(const nn::Module& m) {
  std::ostringstream os;
  os << m;
  return os.str();
}

inline std::set<std::string> state_keys(const nn::Module& m) {
  std::set<std::string> keys;
  for (auto& [k, v] : m.state_dict()) keys.insert(k);
  return keys;
}

/// clone() gives a module with equal outputs and its own parameters.
inline void check_clone_equal(const nn::Module& m, const Tensor& x) {
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

}  // namespace layer_test
