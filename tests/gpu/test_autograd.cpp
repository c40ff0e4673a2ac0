// Every differentiable op on cuda:0 against the same op on the CPU, forward and backward: one
// table of ops, each run on random float64 and float32 inputs, contiguous and as strided views.
#include "gpu/gpu_helpers.h"
#include "gpu/gpu_main.h"

#include <octo/octo.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

using octo::Device;
using octo::DeviceType;
using octo::DType;
using octo::Shape;
using octo::Tensor;
namespace F = octo::nn::functional;

using namespace gpu_test;

namespace {

/// Largest |gpu - cpu| / (atol + rtol * |cpu|) over the elements; <= 1 means they match. NaNs must
/// sit in the same places.
double mismatch(const Tensor& gpu, const Tensor& cpu, double rtol, double atol) {
  REQUIRE(gpu.device() == kGpu);
  REQUIRE(cpu.device() == octo::kCPU);
  REQUIRE(gpu.sizes() == cpu.sizes());
  const std::vector<double> g = values(gpu), c = values(cpu);
  double worst = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(c[i]) || std::isnan(g[i])) {
      if (std::isnan(c[i]) != std::isnan(g[i])) return INFINITY;
      continue;
    }
    if (c[i] == g[i]) continue;  // infinities too
    worst = std::max(worst, std::abs(g[i] - c[i]) / (atol + rtol * std::abs(c[i])));
  }
  return worst;
}

/// One row of the table: inputs are made on the CPU by `make` (float64; the test converts), then
/// `fn` runs on CPU copies and on GPU copies. Integer inputs (indices) are passed through.
struct OpCase {
  std::string name;
  std::function<std::vector<Tensor>()> make;
  std::function<Tensor(const std::vector<Tensor>&)> fn;
  double rtol32 = 1e-4;  // float32 tolerance (the float64 one is fixed below)
};

Tensor rn(const Shape& s) { return octo::randn(s, {.dtype = octo::kFloat64}); }
Tensor pos(const Shape& s) { return octo::rand(s, {.dtype = octo::kFloat64}) + 0.5; }
Tensor idx(int64_t high, const Shape& s) { return octo::randint(0, high, s); }

std::vector<OpCase> op_table() {
  using V = std::vector<Tensor>;
  std::vector<OpCase> t = {
      // elementwise, with broadcasting and a transposed operand
      {"add",
       [] {
         return V{rn({4, 5}), rn({5})};
       },
       [](const V& x) { return octo::add(x[0], x[1], 0.5); }},
      {"sub(transposed)",
       [] {
         return V{rn({5, 4}), rn({4, 5})};
       },
       [](const V& x) { return octo::sub(x[0].transpose(0, 1), x[1]); }},
      {"mul",
       [] {
         return V{rn({3, 1, 4}), rn({2, 4})};
       },
       [](const V& x) { return octo::mul(x[0], x[1]); }},
      {"div",
       [] {
         return V{rn({3, 4}), pos({3, 4})};
       },
       [](const V& x) { return octo::div(x[0], x[1]); }},
      {"pow",
       [] {
         return V{pos({3, 4}), rn({3, 4})};
       },
       [](const V& x) { return octo::pow(x[0], x[1]); }},
      {"pow(scalar)", [] { return V{pos({6})}; }, [](const V& x) { return octo::pow(x[0], 2.5); }},
      {"maximum",
       [] {
         return V{rn({6}), rn({6})};
       },
       [](const V& x) { return octo::maximum(x[0], x[1]); }},
      {"minimum",
       [] {
         return V{rn({6}), rn({6})};
       },
       [](const V& x) { return octo::minimum(x[0], x[1]); }},
      {"neg", [] { return V{rn({7})}; }, [](const V& x) { return octo::neg(x[0]); }},
      {"abs", [] { return V{rn({7})}; }, [](const V& x) { return octo::abs(x[0]); }},
      {"exp", [] { return V{rn({7})}; }, [](const V& x) { return octo::exp(x[0]); }},
      {"log", [] { return V{pos({7})}; }, [](const V& x) { return octo::log(x[0]); }},
      {"log1p", [] { return V{pos({7})}; }, [](const V& x) { return octo::log1p(x[0]); }},
      {"expm1", [] { return V{rn({7})}; }, [](const V& x) { return octo::expm1(x[0]); }},
      {"sqrt", [] { return V{pos({7})}; }, [](const V& x) { return octo::sqrt(x[0]); }},
      {"rsqrt", [] { return V{pos({7})}; }, [](const V& x) { return octo::rsqrt(x[0]); }},
      {"sin", [] { return V{rn({7})}; }, [](const V& x) { return octo::sin(x[0]); }},
      {"cos", [] { return V{rn({7})}; }, [](const V& x) { return octo::cos(x[0]); }},
      {"square", [] { return V{rn({7})}; }, [](const V& x) { return octo::square(x[0]); }},
      {"reciprocal", [] { return V{pos({7})}; }, [](const V& x) { return octo::reciprocal(x[0]); }},
      {"erf", [] { return V{rn({7})}; }, [](const V& x) { return octo::erf(x[0]); }},
      {"relu", [] { return V{rn({9})}; }, [](const V& x) { return octo::relu(x[0]); }},
      {"leaky_relu", [] { return V{rn({9})}; },
       [](const V& x) { return octo::leaky_relu(x[0], 0.2); }},
      {"gelu", [] { return V{rn({9})}; }, [](const V& x) { return octo::gelu(x[0]); }},
      {"silu", [] { return V{rn({9})}; }, [](const V& x) { return octo::silu(x[0]); }},
      {"sigmoid", [] { return V{rn({9})}; }, [](const V& x) { return octo::sigmoid(x[0]); }},
      {"tanh", [] { return V{rn({9})}; }, [](const V& x) { return octo::tanh(x[0]); }},
      {"clamp", [] { return V{rn({9})}; }, [](const V& x) { return octo::clamp(x[0], -0.5, 0.7); }},
      {"where",
       [] {
         return V{rn({4, 3}), rn({4, 3}), rn({3})};
       },
       [](const V& x) { return octo::where(x[0] > octo::zeros_like(x[0]), x[1], x[2]); }},
      {"masked_fill",
       [] {
         return V{rn({4, 3}), rn({4, 3})};
       },
       [](const V& x) { return octo::masked_fill(x[1], x[0] < octo::zeros_like(x[0]), 2.0); }},
      // reductions
      {"sum",
       [] {
         return V{rn({3, 4, 5})};
       },
       [](const V& x) {
         return octo::sum(x[0], {0, 2});
       }},
      {"mean",
       [] {
         return V{rn({3, 4, 5})};
       },
       [](const V& x) { return octo::mean(x[0], {1}, true); }},
      {"prod",
       [] {
         return V{pos({3, 4})};
       },
       [](const V& x) { return octo::prod(x[0], 1); }},
      {"max(dim)",
       [] {
         return V{rn({3, 4})};
       },
       [](const V& x) { return octo::max(x[0], 1).first; }},
      {"min",
       [] {
         return V{rn({3, 4})};
       },
       [](const V& x) { return octo::min(x[0]); }},
      {"var",
       [] {
         return V{rn({3, 6})};
       },
       [](const V& x) { return octo::var(x[0], {1}); }},
      {"std",
       [] {
         return V{rn({3, 6})};
       },
       [](const V& x) { return octo::std(x[0], {0}, 0); }},
      {"logsumexp",
       [] {
         return V{rn({3, 6})};
       },
       [](const V& x) { return octo::logsumexp(x[0], 1); }},
      // views and indexing
      {"permute+reshape",
       [] {
         return V{rn({2, 3, 4})};
       },
       [](const V& x) {
         return x[0].permute({2, 0, 1}).reshape({4, 6}) * 3.0;
       }},
      {"narrow+select+expand",
       [] {
         return V{rn({5, 4})};
       },
       [](const V& x) {
         return x[0].narrow(0, 1, 3).select(1, 2).unsqueeze(1).expand({3, 4}) * 2.0;
       }},
      {"cat",
       [] {
         return V{rn({2, 3}), rn({4, 3})};
       },
       [](const V& x) {
         return octo::cat({x[0], x[1]}, 0);
       }},
      {"stack",
       [] {
         return V{rn({2, 3}), rn({2, 3})};
       },
       [](const V& x) {
         return octo::stack({x[0], x[1]}, 1);
       }},
      {"index_select",
       [] {
         return V{rn({5, 4}), idx(5, {7})};
       },
       [](const V& x) { return octo::index_select(x[0], 0, x[1]); }},
      {"gather",
       [] {
         return V{rn({3, 5}), idx(5, {3, 4})};
       },
       [](const V& x) { return octo::gather(x[0], 1, x[1]); }},
      {"scatter_add",
       [] {
         return V{rn({3, 5}), idx(5, {3, 4}), rn({3, 4})};
       },
       [](const V& x) { return octo::scatter_add(x[0], 1, x[1], x[2]); }},
      {"embedding",
       [] {
         return V{rn({10, 4}), idx(10, {3, 5})};
       },
       [](const V& x) { return octo::embedding(x[0], x[1]); }},
      // linear algebra
      {"matmul",
       [] {
         return V{rn({2, 5, 7}), rn({7, 3})};
       },
       [](const V& x) { return octo::matmul(x[0], x[1]); }},
      {"bmm(transposed)",
       [] {
         return V{rn({2, 7, 5}), rn({2, 3, 7})};
       },
       [](const V& x) { return octo::bmm(x[0].transpose(1, 2), x[1].transpose(1, 2)); }},
      {"linear",
       [] {
         return V{rn({6, 5}), rn({4, 5}), rn({4})};
       },
       [](const V& x) { return octo::linear(x[0], x[1], x[2]); }},
      // nn ops
      {"softmax",
       [] {
         return V{rn({4, 9})};
       },
       [](const V& x) { return octo::softmax(x[0], 1); }},
      {"log_softmax",
       [] {
         return V{rn({4, 9})};
       },
       [](const V& x) { return octo::log_softmax(x[0], 0); }},
      {"conv2d",
       [] {
         return V{rn({2, 3, 9, 8}), rn({4, 3, 3, 3}), rn({4})};
       },
       [](const V& x) {
         return octo::conv2d(x[0], x[1], x[2], {2, 1}, {1, 1});
       }},
      {"conv2d(groups,dilation)",
       [] {
         return V{rn({2, 4, 9, 9}), rn({6, 2, 3, 3})};
       },
       [](const V& x) {
         return octo::conv2d(x[0], x[1], {}, {1, 1}, {2, 2}, {2, 2}, 2);
       }},
      {"max_pool2d",
       [] {
         return V{rn({2, 3, 9, 8})};
       },
       [](const V& x) {
         return octo::max_pool2d(x[0], {3, 3}, {2, 2}, {1, 1});
       }},
      {"avg_pool2d",
       [] {
         return V{rn({2, 3, 9, 8})};
       },
       [](const V& x) {
         return octo::avg_pool2d(x[0], {2, 3}, {2, 2}, {1, 1}, true, false);
       }},
      {"adaptive_avg_pool2d",
       [] {
         return V{rn({2, 3, 7, 5})};
       },
       [](const V& x) {
         return octo::adaptive_avg_pool2d(x[0], {3, 2});
       }},
      {"batch_norm(train)",
       [] {
         return V{rn({4, 3, 5, 5}), pos({3}), rn({3})};
       },
       [](const V& x) { return octo::batch_norm(x[0], {}, {}, x[1], x[2], true); }},
      {"batch_norm_relu(train)",  // the composite on CUDA, the fused kernel on the CPU
       [] {
         return V{rn({4, 3, 5, 5}), pos({3}), rn({3})};
       },
       [](const V& x) { return octo::batch_norm_relu(x[0], {}, {}, x[1], x[2], true); }},
      {"layer_norm",
       [] {
         return V{rn({4, 6}), pos({6}), rn({6})};
       },
       [](const V& x) { return octo::layer_norm(x[0], {6}, x[1], x[2]); }},
      {"cross_entropy",
       [] {
         return V{rn({6, 5}), idx(5, {6}), pos({5})};
       },
       [](const V& x) {
         return F::cross_entropy(x[0], x[1], {.weight = x[2], .label_smoothing = 0.1});
       }},
      {"mse_loss",
       [] {
         return V{rn({6, 5}), rn({6, 5})};
       },
       [](const V& x) { return F::mse_loss(x[0], x[1]); }},
  };
  return t;
}

/// Runs one case on the CPU and the GPU in `dtype`: outputs and the gradients of every
/// floating input (for a random upstream gradient) must agree.
void check_case(const OpCase& c, DType dtype) {
  const double rtol = dtype == octo::kFloat64 ? 1e-10 : c.rtol32;
  const double atol = dtype == octo::kFloat64 ? 1e-12 : 1e-5;
  octo::manual_seed(1234);
  std::vector<Tensor> base = c.make();
  std::vector<Tensor> cpu, gpu;
  for (const Tensor& b : base) {
    const bool floating = b.dtype() == octo::kFloat64;
    Tensor x = floating ? b.to(dtype) : b;
    cpu.push_back(floating ? x.detach().requires_grad_() : x);
    gpu.push_back(floating ? x.to(kGpu).requires_grad_() : x.to(kGpu));
  }
  Tensor yc = c.fn(cpu), yg = c.fn(gpu);
  REQUIRE(yg.device() == kGpu);
  CHECK(yg.dtype() == yc.dtype());
  CHECK(mismatch(yg.detach(), yc.detach(), rtol, atol) <= 1.0);
  if (!yc.requires_grad()) return;
  Tensor g = octo::randn(yc.sizes(), {.dtype = dtype});
  octo::sum(octo::mul(yc, g)).backward();
  octo::sum(octo::mul(yg, g.to(kGpu))).backward();
  for (size_t i = 0; i < cpu.size(); ++i) {
    if (!cpu[i].requires_grad()) continue;
    INFO("gradient of input " << i);
    if (!cpu[i].grad().defined()) {  // used only non-differentiably (a where/masked_fill mask)
      CHECK(!gpu[i].grad().defined());
      continue;
    }
    REQUIRE(gpu[i].grad().defined());
    CHECK(gpu[i].grad().device() == kGpu);
    CHECK(mismatch(gpu[i].grad(), cpu[i].grad(), rtol, atol) <= 1.0);
  }
}

}  // namespace

TEST_CASE("every differentiable op on cuda matches the cpu, forward and backward",
          "[cuda][autograd]") {
  for (const OpCase& c : op_table()) {
    for (DType dtype : {octo::kFloat64, octo::kFloat32}) {
      INFO(c.name << " in " << dtype);
      try {
        check_case(c, dtype);
      } catch (const std::exception& e) {
        FAIL_CHECK(c.name << " in " << dtype << " threw: " << e.what());
      }
    }
  }
}

TEST_CASE("dropout on cuda draws the cpu's mask for the same seed", "[cuda][autograd]") {
  // The Philox counters are the same on both devices, so bernoulli masks are bit-identical.
  Tensor x = octo::randn({64, 33}, {.dtype = octo::kFloat32});
  octo::manual_seed(7);
  Tensor xc = x.detach().requires_grad_();
  Tensor yc = octo::dropout(xc, 0.3, true);
  octo::manual_seed(7);
  Tensor xg = x.to(kGpu).requires_grad_();
  Tensor yg = octo::dropout(xg, 0.3, true);
  CHECK(mismatch(yg.detach(), yc.detach(), 0, 1e-30) <= 1.0);
  octo::sum(yc).backward();
  octo::sum(yg).backward();
  CHECK(mismatch(xg.grad(), xc.grad(), 0, 1e-30) <= 1.0);
}

TEST_CASE("ops mixing cuda and cpu tensors are a clear error", "[cuda][autograd]") {
  Tensor a = octo::ones({3}, {.device = kGpu});
  Tensor b = octo::ones({3});
  CHECK_THROWS_AS(octo::add(a, b), octo::DeviceError);
  CHECK_THROWS_WITH(octo::add(a, b), Catch::Contains("cuda:0") && Catch::Contains("cpu:0"));
  CHECK_THROWS_AS(octo::matmul(a.view({1, 3}), b.view({3, 1})), octo::DeviceError);
}
