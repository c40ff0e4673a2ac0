// The 16-bit kernel cases (Note [16-bit kernels]) both test suites run: tests/kernels/test_half.cpp
// on the CPU, tests/gpu/test_half.cpp on CUDA, so the GPU's 16-bit kernels are held to the same
// checks as the CPU's. Every case runs an op on bfloat16 / float16 tensors on the device under
// test and the same op in float32 on the CPU on the same (exactly widened) values, forward and
// backward, and compares.
//
// A 16-bit kernel computes in float32 (or double) and rounds each result once, so its result is
// within one rounding (u = 2^-8 for bfloat16, 2^-11 for float16, relative) of the float32 one;
// results that pass through two 16-bit ops (a mean of 16-bit losses) are allowed two roundings.
// `slack` (relative to the largest reference value) covers what differs between the float32
// kernels themselves: nothing on the CPU, where the staged kernel is the float32 kernel, and on
// CUDA the device math library and other summation orders (cuDNN, block reductions).
//
// Note [Bias rounds twice on CUDA]: the CPU adds a bias (linear, conv2d) before its one rounding.
// On CUDA, cuDNN writes the 16-bit convolution and octo's add puts the bias on it, and cuBLAS,
// accumulating linear's product onto the bias copied into the output (beta 1), rounded twice on an
// H200 (Note [Half GEMM tolerance] in tests/gpu/test_gemm.cpp); PyTorch's cuDNN convolution adds
// its bias the same way. Where the product and the bias nearly cancel, that first rounding is far
// larger than one rounding of the result, so those forwards allow one more rounding of the
// terms' size, u (1 + u) (|product| + |bias|): under one ulp of the terms, far below what a
// layout error or a sum kept in 16 bits gives.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include <octo/octo.h>

namespace half_cases {

using octo::Device;
using octo::DType;
using octo::Tensor;

/// Where the 16-bit ops run, and the float32 differences to allow there (see above).
struct Target {
  Device device;
  double slack;
  bool bias_rounds_twice = false;  // Note [Bias rounds twice on CUDA]
};

/// Unit roundoff of a 16-bit type: half the distance from 1 to the next value.
inline double unit_roundoff(DType dt) { return dt == octo::kBFloat16 ? 0x1p-8 : 0x1p-11; }

inline std::vector<float> floats(const Tensor& t) {
  return t.detach().to(octo::kCPU, octo::kFloat32).contiguous().to_vector<float>();
}

/// How many elements of got (16-bit or float32, any device) are further from want (float32) than
/// `roundings` roundings plus `slack` times want's largest magnitude, plus, where `twice` is given
/// (float32, want's shape), one more rounding of twice's magnitude (Note [Bias rounds twice on
/// CUDA]). The first few are described in the test's output.
inline int count_outside(const Tensor& got, const Tensor& want, DType dt, double slack,
                         int roundings = 1, const Tensor& twice = {}) {
  REQUIRE(got.sizes() == want.sizes());
  const std::vector<float> g = floats(got), w = floats(want);
  std::vector<float> t(w.size(), 0.0f);
  if (twice.defined()) {
    REQUIRE(twice.sizes() == want.sizes());
    t = floats(twice);
  }
  double scale = 0;
  for (float v : w) scale = std::max(scale, double(std::fabs(v)));
  const double u = unit_roundoff(dt);
  int bad = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const double tol = roundings * u * std::fabs(w[i]) * (1 + 1e-6) + slack * scale + 1e-7 +
                       u * (1 + u) * std::fabs(t[i]);
    if (!(std::fabs(g[i] - w[i]) <= tol)) {
      if (bad++ < 3) UNSCOPED_INFO("at " << i << ": got " << g[i] << ", float32 gives " << w[i]);
    }
  }
  return bad;
}

/// Every element of got is within count_outside's bound.
inline void check_rounded(const std::string& what, const Tensor& got, const Tensor& want, DType dt,
                          double slack, int roundings = 1, const Tensor& twice = {}) {
  INFO(what << " (" << dt << ")");
  CHECK(count_outside(got, want, dt, slack, roundings, twice) == 0);
}

/// randn values of `shape` rounded to dt, a leaf on the target device.
inline Tensor sample(const Target& at, const octo::Shape& shape, uint64_t seed, DType dt) {
  octo::manual_seed(seed);
  return octo::randn(shape).to(dt).to(at.device).requires_grad_();
}

/// The same values in float32 on the CPU (exact: every 16-bit value is a float32), a fresh leaf.
inline Tensor widened(const Tensor& t) {
  return t.detach().to(octo::kCPU, octo::kFloat32).requires_grad_();
}

using Op = std::function<Tensor(const std::vector<Tensor>&)>;

/// Runs f on 16-bit leaves and on their float32 CPU copies; checks the outputs and every leaf's
/// gradient under a random upstream gradient (itself 16-bit, so both runs see the same values).
/// `bias_terms`, for an op with a bias: |product| + |bias| of the float32 copies, the size of the
/// forward's extra rounding where the target's bias rounds twice.
inline void check_op(const Target& at, const std::string& name, DType dt,
                     const std::vector<Tensor>& leaves, const Op& f, int roundings = 1,
                     const Op& bias_terms = {}) {
  std::vector<Tensor> wide;
  for (const Tensor& t : leaves) wide.push_back(widened(t));
  Tensor out = f(leaves), ref = f(wide);
  CHECK(out.dtype() == dt);
  CHECK(out.device() == at.device);
  Tensor twice;
  if (at.bias_rounds_twice && bias_terms) {
    octo::NoGradGuard no_grad;
    twice = bias_terms(wide);
  }
  check_rounded(name + " forward", out, ref, dt, at.slack, roundings, twice);
  octo::manual_seed(99);
  const Tensor up = octo::randn(out.sizes()).to(dt);
  (out * up.to(at.device)).sum().backward();
  (ref * up.to(octo::kFloat32)).sum().backward();
  for (size_t i = 0; i < leaves.size(); ++i) {
    REQUIRE(leaves[i].grad().defined());
    CHECK(leaves[i].grad().dtype() == dt);
    check_rounded(name + " grad of input " + std::to_string(i), leaves[i].grad(), wide[i].grad(),
                  dt, at.slack, roundings);
  }
}

/// f of 16-bit leaves against f of their float32 CPU copies, forward only: for one elementwise op,
/// whose 16-bit backward is a chain of such ops (each rounding once, with cancellation between
/// them), so it has no one-rounding bound against float32.
inline void check_forward(const Target& at, const std::string& name, DType dt,
                          const std::vector<Tensor>& leaves,
                          const std::function<Tensor(const std::vector<Tensor>&)>& f) {
  std::vector<Tensor> wide;
  for (const Tensor& t : leaves) wide.push_back(widened(t));
  const Tensor out = f(leaves);
  CHECK(out.dtype() == dt);
  CHECK(out.device() == at.device);
  check_rounded(name, out, f(wide), dt, at.slack);
}

inline void elementwise(const Target& at, DType dt) {
  using Fn = Tensor (*)(const Tensor&);
  const std::vector<std::pair<const char*, Fn>> unary = {
      {"neg", octo::neg},   {"relu", octo::relu},       {"exp", octo::exp},
      {"tanh", octo::tanh}, {"sigmoid", octo::sigmoid}, {"gelu", octo::gelu}};
  for (auto& [name, fn] : unary) {
    check_forward(at, name, dt, {sample(at, {7, 9}, 50, dt)},
                  [fn = fn](const auto& t) { return fn(t[0]); });
  }
  // A positive 16-bit operand (|x| + 1 rounds the same way on both runs: it is the leaf).
  const Tensor pos = (octo::abs(sample(at, {6, 5}, 51, dt)) + 1.0).detach();
  check_forward(at, "log (transposed)", dt, {pos},
                [](const auto& t) { return octo::log(t[0].transpose(0, 1)); });
  check_forward(at, "sqrt", dt, {pos}, [](const auto& t) { return octo::sqrt(t[0]); });
  check_forward(at, "add (broadcast row)", dt,
                {sample(at, {4, 6}, 52, dt), sample(at, {1, 6}, 53, dt)},
                [](const auto& t) { return t[0] + t[1]; });
  check_forward(at, "mul", dt, {sample(at, {3, 5}, 54, dt), sample(at, {3, 5}, 55, dt)},
                [](const auto& t) { return t[0] * t[1]; });
  check_forward(at, "div", dt, {sample(at, {3, 5}, 54, dt), pos.slice(0, 0, 3)},
                [](const auto& t) { return t[0] / t[1]; });
  check_forward(at, "maximum", dt, {sample(at, {33}, 56, dt), sample(at, {33}, 57, dt)},
                [](const auto& t) { return octo::maximum(t[0], t[1]); });
  // The gradient of an op whose backward is one 16-bit op: relu's (a where on the input's sign).
  check_op(at, "relu", dt, {sample(at, {7, 9}, 50, dt)},
           [](const auto& t) { return octo::relu(t[0]); });
  // Comparisons of 16-bit values are exact: the same bools as on the widened values.
  const Tensor a = sample(at, {40}, 58, dt), b = sample(at, {40}, 59, dt);
  const Tensor gt = a > b;
  CHECK(gt.dtype() == octo::kBool);
  CHECK(gt.to(octo::kCPU).to_vector<bool>() == (widened(a) > widened(b)).to_vector<bool>());
}

inline void reductions(const Target& at, DType dt) {
  const Tensor x = sample(at, {5, 6, 7}, 60, dt);
  check_op(at, "sum over dim 1", dt, {x}, [](const auto& t) { return octo::sum(t[0], {1}); });
  check_op(at, "mean over dims 0, 2", dt, {sample(at, {5, 6, 7}, 61, dt)}, [](const auto& t) {
    return octo::mean(t[0], {0, 2});
  });
  check_forward(at, "var over dim 2", dt, {sample(at, {5, 6, 7}, 62, dt)},
                [](const auto& t) { return octo::var(t[0], {2}); });
  check_op(at, "max over dim 0", dt, {sample(at, {5, 6, 7}, 63, dt)},
           [](const auto& t) { return octo::max(t[0], 0).first; });
  // argmax of 16-bit values is exact (ties go to the lower index on both backends).
  const Tensor y = sample(at, {9, 11}, 64, dt);
  CHECK(octo::argmax(y, 1).to(octo::kCPU).to_vector<int64_t>() ==
        octo::argmax(widened(y), 1).to_vector<int64_t>());
}

/// An op with a bias (Note [Bias rounds twice on CUDA]): `op` on its 16-bit (input, weight, bias)
/// `leaves`, `product` the same without the bias, and `bias` the bias leaf shaped to broadcast
/// onto the product, so that `product + bias` is what CUDA computes.
struct BiasCase {
  std::string name;
  std::vector<Tensor> leaves;
  Op op, product, bias;
  /// |product| + |bias| of t: the size of the rounding CUDA makes before adding the bias.
  Tensor terms(const std::vector<Tensor>& t) const {
    return octo::abs(product(t)) + octo::abs(bias(t));
  }
};

inline BiasCase linear_case(const Target& at, DType dt) {
  return {"linear",
          {sample(at, {8, 16}, 7, dt), sample(at, {5, 16}, 8, dt), sample(at, {5}, 9, dt)},
          [](const auto& t) { return octo::linear(t[0], t[1], t[2]); },
          [](const auto& t) { return octo::linear(t[0], t[1]); },
          [](const auto& t) { return t[2]; }};
}

inline BiasCase conv2d_case(const Target& at, DType dt) {
  return {
      "conv2d",
      {sample(at, {2, 3, 7, 6}, 10, dt), sample(at, {4, 3, 3, 3}, 11, dt), sample(at, {4}, 12, dt)},
      [](const auto& t) {
        return octo::conv2d(t[0], t[1], t[2], {1, 1}, {1, 1});
      },
      [](const auto& t) {
        return octo::conv2d(t[0], t[1], {}, {1, 1}, {1, 1});
      },
      [](const auto& t) {
        return t[2].reshape({1, 4, 1, 1});
      }};
}

/// check_op of a BiasCase; where the target's bias rounds twice, its forward is allowed that.
inline void check_op(const Target& at, DType dt, const BiasCase& c) {
  check_op(at, c.name, dt, c.leaves, c.op, 1, [&c](const auto& t) { return c.terms(t); });
}

inline void products(const Target& at, DType dt) {
  check_op(at, "mm", dt, {sample(at, {5, 7}, 1, dt), sample(at, {7, 3}, 2, dt)},
           [](const auto& t) { return octo::mm(t[0], t[1]); });
  check_op(at, "bmm", dt, {sample(at, {2, 4, 6}, 3, dt), sample(at, {2, 6, 5}, 4, dt)},
           [](const auto& t) { return octo::bmm(t[0], t[1]); });
  check_op(at, "matmul (broadcast)", dt,
           {sample(at, {3, 2, 4, 6}, 5, dt), sample(at, {6, 2}, 6, dt)},
           [](const auto& t) { return octo::matmul(t[0], t[1]); });
  check_op(at, dt, linear_case(at, dt));
}

inline void conv_and_pool(const Target& at, DType dt) {
  check_op(at, dt, conv2d_case(at, dt));
  check_op(at, "conv2d (stride 2, groups 3)", dt,
           {sample(at, {2, 3, 8, 8}, 13, dt), sample(at, {6, 1, 3, 3}, 14, dt)}, [](const auto& t) {
             return octo::conv2d(t[0], t[1], {}, {2, 2}, {0, 0}, {1, 1}, 3);
           });
  check_op(at, "max_pool2d", dt, {sample(at, {2, 3, 8, 7}, 15, dt)}, [](const auto& t) {
    return octo::max_pool2d(t[0], {2, 2});
  });
  check_op(at, "avg_pool2d", dt, {sample(at, {2, 3, 8, 7}, 16, dt)}, [](const auto& t) {
    return octo::avg_pool2d(t[0], {3, 3}, {2, 2}, {1, 1});
  });
  check_op(at, "adaptive_avg_pool2d", dt, {sample(at, {2, 3, 7, 5}, 17, dt)}, [](const auto& t) {
    return octo::adaptive_avg_pool2d(t[0], {3, 2});
  });
}

inline void softmax(const Target& at, DType dt) {
  for (bool log : {false, true}) {
    const std::string name = log ? "log_softmax" : "softmax";
    const Tensor x = sample(at, {6, 10}, log ? 21 : 20, dt);
    const Tensor y = log ? octo::log_softmax(x, 1) : octo::softmax(x, 1);
    CHECK(y.dtype() == dt);
    const Tensor xr = widened(x);
    check_rounded(name + " forward", y, log ? octo::log_softmax(xr, 1) : octo::softmax(xr, 1), dt,
                  at.slack);
    // Backward reads the saved 16-bit output y, as PyTorch's does, so its float32 reference is
    // the formula on that same y: y * (g - sum(g * y)), or g - exp(y) * sum(g).
    octo::manual_seed(22);
    const Tensor g = octo::randn(y.sizes()).to(dt);
    (y * g.to(at.device)).sum().backward();
    const Tensor yf = widened(y).detach(), gf = g.to(octo::kFloat32);
    const Tensor want = log ? gf - octo::exp(yf) * octo::sum(gf, {1}, true)
                            : yf * (gf - octo::sum(gf * yf, {1}, true));
    check_rounded(name + " backward", x.grad(), want, dt, at.slack);
  }
}

inline void batch_norm(const Target& at, DType dt) {
  const Tensor x = sample(at, {4, 3, 5, 5}, 30, dt);
  // float32 parameters and running statistics beside a 16-bit input, as under autocast.
  const Tensor w = sample(at, {3}, 31, octo::kFloat32), b = sample(at, {3}, 32, octo::kFloat32);
  Tensor rm = octo::zeros({3}, {.device = at.device}), rv = octo::ones({3}, {.device = at.device});
  Tensor rm_ref = octo::zeros({3}), rv_ref = octo::ones({3});
  const Tensor xr = widened(x), wr = widened(w), br = widened(b);
  Tensor out = octo::batch_norm(x, rm, rv, w, b, /*training=*/true, 0.1, 1e-5);
  Tensor ref = octo::batch_norm(xr, rm_ref, rv_ref, wr, br, true, 0.1, 1e-5);
  CHECK(out.dtype() == dt);
  check_rounded("batch_norm forward", out, ref, dt, at.slack);
  // The running statistics are the float32 ones: no 16-bit rounding at all.
  check_rounded("running_mean", rm, rm_ref, dt, at.slack, 0);
  check_rounded("running_var", rv, rv_ref, dt, at.slack, 0);
  octo::manual_seed(33);
  const Tensor up = octo::randn(out.sizes()).to(dt);
  (out * up.to(at.device)).sum().backward();
  (ref * up.to(octo::kFloat32)).sum().backward();
  CHECK(x.grad().dtype() == dt);
  check_rounded("batch_norm grad input", x.grad(), xr.grad(), dt, at.slack);
  CHECK(w.grad().dtype() == octo::kFloat32);
  check_rounded("batch_norm grad weight (float32)", w.grad(), wr.grad(), dt, at.slack, 0);
  check_rounded("batch_norm grad bias (float32)", b.grad(), br.grad(), dt, at.slack, 0);
  // Evaluation mode with 16-bit running statistics and parameters.
  check_op(
      at, "batch_norm (eval, 16-bit parameters)", dt, {sample(at, {4, 3, 2, 2}, 34, dt)},
      [&](const auto& t) {
        // 16-bit parameters, and the same values in float32 for the float32 run.
        auto p = [&](const Tensor& v) { return v.detach().to(dt).to(t[0].device(), t[0].dtype()); };
        return octo::batch_norm(t[0], p(rm), p(rv), p(w), p(b), /*training=*/false, 0.1, 1e-5);
      },
      2);
}

inline void cross_entropy(const Target& at, DType dt) {
  const Tensor target = octo::tensor({0, 3, 9, 2, 2, 7, 1, 5}).to(octo::kInt64);
  // The target on each run's device: f sees the 16-bit leaves or their CPU copies.
  auto on = [&](const Tensor& like) { return target.to(like.device()); };
  check_op(at, "cross_entropy per sample", dt, {sample(at, {8, 10}, 40, dt)},
           [&](const auto& t) { return octo::cross_entropy_per_sample(t[0], on(t[0])); });
  check_op(
      at, "cross_entropy (label smoothing 0.1, ignore_index 2)", dt, {sample(at, {8, 10}, 41, dt)},
      [&](const auto& t) { return octo::cross_entropy_per_sample(t[0], on(t[0]), {}, 2, 0.1); });
  // The mean of 8 16-bit losses rounds once more.
  check_op(
      at, "nn::functional::cross_entropy (mean)", dt, {sample(at, {8, 10}, 42, dt)},
      [&](const auto& t) { return octo::nn::functional::cross_entropy(t[0], on(t[0])); }, 2);
}

}  // namespace half_cases
