// bfloat16 and float16 on the CPU (Note [16-bit on the CPU]): every primitive that stages 16-bit
// tensors through float32 -- products, convolution, pooling, softmax, batch norm, cross-entropy --
// forward and backward, against the same op run in float32 on the same (exactly widened) values.
//
// The staged kernels accumulate in float32 and round each result once, so a 16-bit result is
// within one rounding (u = 2^-8 for bfloat16, 2^-11 for float16, relative) of the float32 one;
// results that pass through two 16-bit ops (a mean of 16-bit losses) are allowed two roundings.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include <octo/octo.h>

using octo::DType;
using octo::Tensor;

namespace {

/// Unit roundoff of a 16-bit type: half the distance from 1 to the next value.
double unit_roundoff(DType dt) { return dt == octo::kBFloat16 ? 0x1p-8 : 0x1p-11; }

std::vector<float> floats(const Tensor& t) {
  return t.detach().to(octo::kFloat32).contiguous().to_vector<float>();
}

/// got (16-bit or float32) is within `roundings` roundings of want (float32), element by element.
void check_rounded(const std::string& what, const Tensor& got, const Tensor& want, DType dt,
                   int roundings = 1) {
  INFO(what << " (" << dt << ")");
  REQUIRE(got.sizes() == want.sizes());
  const std::vector<float> g = floats(got), w = floats(want);
  const double u = unit_roundoff(dt);
  int bad = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const double tol = roundings * u * std::fabs(w[i]) * (1 + 1e-6) + 1e-7;
    if (!(std::fabs(g[i] - w[i]) <= tol)) {
      if (bad++ < 3) UNSCOPED_INFO("at " << i << ": got " << g[i] << ", float32 gives " << w[i]);
    }
  }
  CHECK(bad == 0);
}

Tensor sample(const octo::Shape& shape, uint64_t seed, DType dt) {
  octo::manual_seed(seed);
  return octo::randn(shape).to(dt).requires_grad_();
}

/// The same values in float32 (exact: every 16-bit value is a float32), a fresh leaf.
Tensor widened(const Tensor& t) { return t.detach().to(octo::kFloat32).requires_grad_(); }

/// Runs f on 16-bit leaves and on their float32 copies; checks the outputs and every leaf's
/// gradient under a random upstream gradient (itself 16-bit, so both runs see the same values).
void check_op(const std::string& name, DType dt, const std::vector<Tensor>& leaves,
              const std::function<Tensor(const std::vector<Tensor>&)>& f, int roundings = 1) {
  std::vector<Tensor> wide;
  for (const Tensor& t : leaves) wide.push_back(widened(t));
  Tensor out = f(leaves), ref = f(wide);
  CHECK(out.dtype() == dt);
  check_rounded(name + " forward", out, ref, dt, roundings);
  octo::manual_seed(99);
  const Tensor up = octo::randn(out.sizes()).to(dt);
  (out * up).sum().backward();
  (ref * up.to(octo::kFloat32)).sum().backward();
  for (size_t i = 0; i < leaves.size(); ++i) {
    REQUIRE(leaves[i].grad().defined());
    CHECK(leaves[i].grad().dtype() == dt);
    check_rounded(name + " grad of input " + std::to_string(i), leaves[i].grad(), wide[i].grad(),
                  dt, roundings);
  }
}

}  // namespace

TEST_CASE("16-bit products accumulate in float32 and round once", "[half][linalg]") {
  const DType dt = GENERATE(octo::kBFloat16, octo::kFloat16);
  check_op("mm", dt, {sample({5, 7}, 1, dt), sample({7, 3}, 2, dt)},
           [](const auto& t) { return octo::mm(t[0], t[1]); });
  check_op("bmm", dt, {sample({2, 4, 6}, 3, dt), sample({2, 6, 5}, 4, dt)},
           [](const auto& t) { return octo::bmm(t[0], t[1]); });
  check_op("matmul (broadcast)", dt, {sample({3, 2, 4, 6}, 5, dt), sample({6, 2}, 6, dt)},
           [](const auto& t) { return octo::matmul(t[0], t[1]); });
  check_op("linear", dt, {sample({8, 16}, 7, dt), sample({5, 16}, 8, dt), sample({5}, 9, dt)},
           [](const auto& t) { return octo::linear(t[0], t[1], t[2]); });
}

TEST_CASE("16-bit convolution and pooling accumulate in float32 and round once",
          "[half][conv][pool]") {
  const DType dt = GENERATE(octo::kBFloat16, octo::kFloat16);
  check_op("conv2d", dt,
           {sample({2, 3, 7, 6}, 10, dt), sample({4, 3, 3, 3}, 11, dt), sample({4}, 12, dt)},
           [](const auto& t) {
             return octo::conv2d(t[0], t[1], t[2], {1, 1}, {1, 1});
           });
  check_op("conv2d (stride 2, groups 3)", dt,
           {sample({2, 3, 8, 8}, 13, dt), sample({6, 1, 3, 3}, 14, dt)}, [](const auto& t) {
             return octo::conv2d(t[0], t[1], {}, {2, 2}, {0, 0}, {1, 1}, 3);
           });
  const Tensor x = sample({2, 3, 8, 7}, 15, dt);
  check_op("max_pool2d", dt, {x}, [](const auto& t) { return octo::max_pool2d(t[0], {2, 2}); });
  check_op("avg_pool2d", dt, {sample({2, 3, 8, 7}, 16, dt)}, [](const auto& t) {
    return octo::avg_pool2d(t[0], {3, 3}, {2, 2}, {1, 1});
  });
  check_op("adaptive_avg_pool2d", dt, {sample({2, 3, 7, 5}, 17, dt)}, [](const auto& t) {
    return octo::adaptive_avg_pool2d(t[0], {3, 2});
  });
}

TEST_CASE("16-bit softmax and log_softmax compute in float32 and round once", "[half][softmax]") {
  const DType dt = GENERATE(octo::kBFloat16, octo::kFloat16);
  for (bool log : {false, true}) {
    const std::string name = log ? "log_softmax" : "softmax";
    const Tensor x = sample({6, 10}, log ? 21 : 20, dt);
    const Tensor y = log ? octo::log_softmax(x, 1) : octo::softmax(x, 1);
    CHECK(y.dtype() == dt);
    const Tensor xr = widened(x);
    check_rounded(name + " forward", y, log ? octo::log_softmax(xr, 1) : octo::softmax(xr, 1), dt);
    // Backward reads the saved 16-bit output y, as PyTorch's does, so its float32 reference is
    // the formula on that same y: y * (g - sum(g * y)), or g - exp(y) * sum(g).
    octo::manual_seed(22);
    const Tensor g = octo::randn(y.sizes()).to(dt);
    (y * g).sum().backward();
    const Tensor yf = y.detach().to(octo::kFloat32), gf = g.to(octo::kFloat32);
    const Tensor want = log ? gf - octo::exp(yf) * octo::sum(gf, {1}, true)
                            : yf * (gf - octo::sum(gf * yf, {1}, true));
    check_rounded(name + " backward", x.grad(), want, dt);
  }
}

TEST_CASE("16-bit batch norm keeps float32 statistics and parameters", "[half][norm]") {
  const DType dt = GENERATE(octo::kBFloat16, octo::kFloat16);
  const Tensor x = sample({4, 3, 5, 5}, 30, dt);
  // float32 parameters and running statistics beside a 16-bit input, as under autocast.
  const Tensor w = sample({3}, 31, octo::kFloat32), b = sample({3}, 32, octo::kFloat32);
  Tensor rm = octo::zeros({3}), rv = octo::ones({3});
  Tensor rm_ref = octo::zeros({3}), rv_ref = octo::ones({3});
  const Tensor xr = widened(x), wr = widened(w), br = widened(b);
  Tensor out = octo::batch_norm(x, rm, rv, w, b, /*training=*/true, 0.1, 1e-5);
  Tensor ref = octo::batch_norm(xr, rm_ref, rv_ref, wr, br, true, 0.1, 1e-5);
  CHECK(out.dtype() == dt);
  check_rounded("batch_norm forward", out, ref, dt);
  // The running statistics are the float32 ones: no 16-bit rounding at all.
  check_rounded("running_mean", rm, rm_ref, dt, 0);
  check_rounded("running_var", rv, rv_ref, dt, 0);
  octo::manual_seed(33);
  const Tensor up = octo::randn(out.sizes()).to(dt);
  (out * up).sum().backward();
  (ref * up.to(octo::kFloat32)).sum().backward();
  CHECK(x.grad().dtype() == dt);
  check_rounded("batch_norm grad input", x.grad(), xr.grad(), dt);
  CHECK(w.grad().dtype() == octo::kFloat32);
  check_rounded("batch_norm grad weight (float32)", w.grad(), wr.grad(), dt, 0);
  check_rounded("batch_norm grad bias (float32)", b.grad(), br.grad(), dt, 0);
  // Evaluation mode with the running statistics.
  check_op(
      "batch_norm (eval, 16-bit parameters)", dt, {sample({4, 3, 2, 2}, 34, dt)},
      [&](const auto& t) {
        // 16-bit parameters, and the same values in float32 for the float32 run.
        auto p = [&](const Tensor& v) { return v.detach().to(dt).to(t[0].dtype()); };
        return octo::batch_norm(t[0], p(rm), p(rv), p(w), p(b), /*training=*/false, 0.1, 1e-5);
      },
      2);
  // A parameter in neither the input's dtype nor float32 is refused, naming both.
  CHECK_THROWS_WITH(
      octo::batch_norm(x, {}, {}, w.detach().to(octo::kFloat64), {}, true, 0.1, 1e-5),
      Catch::Contains("to have the input's dtype " + std::string(octo::dtype_name(dt)) +
                      " or float32, got float64"));
}

TEST_CASE("16-bit cross-entropy computes in float32", "[half][loss]") {
  const DType dt = GENERATE(octo::kBFloat16, octo::kFloat16);
  const Tensor target = octo::tensor({0, 3, 9, 2, 2, 7, 1, 5}).to(octo::kInt64);
  check_op("cross_entropy per sample", dt, {sample({8, 10}, 40, dt)},
           [&](const auto& t) { return octo::cross_entropy_per_sample(t[0], target); });
  check_op("cross_entropy (label smoothing 0.1, ignore_index 2)", dt, {sample({8, 10}, 41, dt)},
           [&](const auto& t) { return octo::cross_entropy_per_sample(t[0], target, {}, 2, 0.1); });
  // The mean of 8 16-bit losses rounds once more.
  check_op(
      "nn::functional::cross_entropy (mean)", dt, {sample({8, 10}, 42, dt)},
      [&](const auto& t) { return octo::nn::functional::cross_entropy(t[0], target); }, 2);
}

TEST_CASE("16-bit ops refuse non-floating operands with the dtypes named", "[half]") {
  const Tensor x = octo::zeros({2, 3, 4, 4}, {.dtype = octo::kInt32});
  CHECK_THROWS_WITH(octo::max_pool2d(x, {2, 2}),
                    Catch::Contains("max_pool2d: expected floating-point tensors (float32, "
                                    "float64, bfloat16 or float16), got input int32"));
  CHECK_THROWS_WITH(
      octo::mm(octo::zeros({2, 2}, {.dtype = octo::kInt64}),
               octo::zeros({2, 2}, {.dtype = octo::kInt64})),
      Catch::Contains(
          "mm: expected floating-point tensors (float32, float64, bfloat16 or float16), got input int64, other int64"));
}
