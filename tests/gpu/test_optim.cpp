// CUDA fused optimizer updates against the CPU fused ones, and training steps on cuda:0 vs cpu.
//
// The two backends run the same per-element math (kernels/optim_math.h) with no FMA contraction,
// so float32 and float64 are expected to agree bit for bit; the checks allow float64 1e-12
// relative and float32 4 ulps, and each test case reports the largest difference it saw.
#include "gpu/gpu_main.h"

#include "optim/fused_configs.h"

#include <octo/octo.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "optim/optim_helpers.h"

using namespace optim_test;
using octo::Device;
using octo::DeviceType;

using namespace fused_configs;

namespace {

const Device kGpu(DeviceType::CUDA, 0);

/// Distance in float32 units in the last place.
int64_t ulps_f32(double a, double b) {
  auto ordered = [](float x) {
    int32_t i;
    std::memcpy(&i, &x, sizeof i);
    return i < 0 ? int64_t(INT32_MIN) - i : int64_t(i);
  };
  const int64_t ia = ordered(static_cast<float>(a)), ib = ordered(static_cast<float>(b));
  return ia > ib ? ia - ib : ib - ia;
}

struct Measured {
  int64_t max_ulps = 0;  // float32
  double max_rel = 0.0;  // float64
};

/// gpu (on cuda:0) equals cpu (on cpu) within float64 1e-12 relative / float32 4 ulps.
void check_same(const Tensor& gpu, const Tensor& cpu, const std::string& what, Measured& m) {
  INFO(what);
  REQUIRE(gpu.device() == kGpu);
  REQUIRE(cpu.device() == octo::kCPU);
  REQUIRE(gpu.dtype() == cpu.dtype());
  REQUIRE(gpu.sizes() == cpu.sizes());
  const Vec g = values(gpu), c = values(cpu);
  size_t bad = 0, first_bad = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    bool ok;
    if (std::isnan(c[i])) {
      ok = std::isnan(g[i]);
    } else if (gpu.dtype() == octo::kFloat64) {
      const double rel = g[i] == c[i] ? 0.0 : std::abs(g[i] - c[i]) / std::abs(c[i]);
      m.max_rel = std::max(m.max_rel, rel);
      ok = std::abs(g[i] - c[i]) <= 1e-12 * std::abs(c[i]);
    } else {
      const int64_t u = ulps_f32(g[i], c[i]);
      m.max_ulps = std::max(m.max_ulps, u);
      ok = u <= 4;
    }
    if (!ok && bad++ == 0) first_bad = i;
  }
  INFO(bad << " elements differ; the first is " << first_bad << ": cuda "
           << (bad ? g[first_bad] : 0.0) << ", cpu " << (bad ? c[first_bad] : 0.0));
  CHECK(bad == 0);
}

/// Runs Opt with options o on parameters on cuda:0 and on the cpu from the same values and the
/// same gradients for `steps` steps; compares parameters and every state tensor after each step.
template <typename Opt, typename Options>
void compare_devices(const Options& o, octo::DType dt, int steps, bool transposed_grads,
                     Measured& m) {
  const auto vals = initial_values();
  auto gpu_params = make_params(vals, dt, kGpu);
  auto cpu_params = make_params(vals, dt, octo::kCPU);
  Opt gpu_opt(gpu_params, o);
  Opt cpu_opt(cpu_params, o);
  for (int s = 0; s < steps; ++s) {
    for (size_t k = 0; k < vals.size(); ++k) {
      const Vec g = grad_at(vals[k].size(), s, static_cast<int>(k));
      give_grad(gpu_params[k], g, transposed_grads);
      give_grad(cpu_params[k], g);
    }
    gpu_opt.step();
    cpu_opt.step();
    for (size_t k = 0; k < vals.size(); ++k) {
      const std::string where = "step " + std::to_string(s) + ", parameter " + std::to_string(k);
      check_same(gpu_params[k], cpu_params[k], where, m);
      const auto& gs = gpu_opt.state(static_cast<int64_t>(k));
      const auto& cs = cpu_opt.state(static_cast<int64_t>(k));
      REQUIRE(gs.size() == cs.size());
      for (const auto& [key, t] : cs) {
        REQUIRE(gs.count(key) == 1);
        const Tensor& gt = gs.at(key);
        const Tensor& ct = t;
        if (key == "step") {  // a 0-d float64 on the cpu for both
          CHECK(gt.device() == octo::kCPU);
          CHECK(gt.item<double>() == ct.item<double>());
        } else {
          check_same(gt, ct, where + ", state " + key, m);
        }
      }
    }
  }
}

void report(const std::string& what, const Measured& m) {
  WARN(what << ": largest cuda-vs-cpu difference: float32 " << m.max_ulps << " ulps, float64 "
            << m.max_rel << " relative");
}

}  // namespace

TEST_CASE("cuda fused SGD equals cpu fused SGD", "[optim][fused][sgd]") {
  const auto dt = GENERATE(octo::kFloat64, octo::kFloat32);
  const bool transposed = GENERATE(false, true);
  Measured m;
  for (size_t c = 0; c < kSgdConfigs.size(); ++c) {
    INFO("config " << c << ", " << dt << ", non-contiguous grads " << transposed);
    compare_devices<optim::SGD>(kSgdConfigs[c], dt, 7, transposed, m);
  }
  report("SGD", m);
}

TEST_CASE("cuda fused Adam and AdamW equal the cpu fused ones", "[optim][fused][adam]") {
  const auto dt = GENERATE(octo::kFloat64, octo::kFloat32);
  const bool transposed = GENERATE(false, true);
  Measured m;
  for (size_t c = 0; c < kAdamConfigs.size(); ++c) {
    INFO("config " << c << ", " << dt << ", non-contiguous grads " << transposed);
    compare_devices<optim::Adam>(kAdamConfigs[c], dt, 7, transposed, m);
    compare_devices<optim::AdamW>(as_adamw(kAdamConfigs[c]), dt, 7, transposed, m);
  }
  compare_devices<optim::AdamW>(optim::AdamWOptions{}, dt, 7, transposed, m);
  report("Adam/AdamW", m);
}

TEST_CASE("cuda fused updates of bfloat16 and float16 equal the cpu ones", "[optim][fused]") {
  const auto dt = GENERATE(octo::kBFloat16, octo::kFloat16);
  const bool adam = GENERATE(false, true);
  INFO(dt << (adam ? ", Adam" : ", SGD"));
  const octo::Shape shape{37, 5};
  auto on = [&](const Vec& v, Device d) { return octo::tensor(v, shape, {.dtype = dt}).to(d); };
  const Vec init = random_vec(185, 5), zero(185, 0.0);
  Tensor pc = on(init, octo::kCPU), pg = on(init, kGpu);
  std::vector<Tensor> sc, sg;
  for (int k = 0; k < 3; ++k) {
    sc.push_back(on(zero, octo::kCPU));
    sg.push_back(on(zero, kGpu));
  }
  auto& cpu = octo::kernels::backend(octo::kCPU);
  auto& gpu = octo::kernels::backend(kGpu);
  for (int step = 1; step <= 6; ++step) {
    const Vec g = grad_at(185, step, 3);
    Tensor gc = on(g, octo::kCPU), gg = on(g, kGpu);
    if (adam) {
      octo::kernels::AdamParams hp{
          .lr = 0.01, .weight_decay = 0.1, .step = double(step), .amsgrad = true};
      cpu.adam_update(pc.arg(), gc.arg(), sc[0].arg(), sc[1].arg(), sc[2].arg(), hp);
      gpu.adam_update(pg.arg(), gg.arg(), sg[0].arg(), sg[1].arg(), sg[2].arg(), hp);
    } else {
      octo::kernels::SgdParams hp{.lr = 0.1,
                                  .momentum = 0.9,
                                  .weight_decay = 0.05,
                                  .nesterov = true,
                                  .first_step = step == 1};
      cpu.sgd_update(pc.arg(), gc.arg(), sc[0].arg(), hp);
      gpu.sgd_update(pg.arg(), gg.arg(), sg[0].arg(), hp);
    }
    INFO("step " << step);
    CHECK(values(pg) == values(pc));
    for (int k = 0; k < (adam ? 3 : 1); ++k) CHECK(values(sg[k]) == values(sc[k]));
  }
}

namespace {

/// A small float64 MLP, built identically on each call after manual_seed.
std::shared_ptr<octo::nn::Sequential> make_mlp() {
  octo::manual_seed(11);
  auto net = std::make_shared<octo::nn::Sequential>();
  net->push_back(std::make_shared<octo::nn::Linear>(6, 16));
  net->push_back(std::make_shared<octo::nn::Tanh>());
  net->push_back(std::make_shared<octo::nn::Linear>(16, 3));
  net->to(octo::kFloat64);
  return net;
}

/// Trains the MLP for 5 steps on `device` with optimizer `Opt` and returns its parameters (on the
/// cpu). The data is drawn on the cpu from a fixed seed and moved, so both devices see the same.
template <typename Opt, typename Options>
std::vector<Tensor> train(Device device, const Options& o) {
  auto net = make_mlp();
  net->to(device);
  Opt opt(net->parameters(), o);
  octo::manual_seed(12);
  for (int s = 0; s < 5; ++s) {
    Tensor x = octo::randn({8, 6}, {.dtype = octo::kFloat64}).to(device);
    Tensor y = octo::randn({8, 3}, {.dtype = octo::kFloat64}).to(device);
    opt.zero_grad();
    Tensor loss = octo::mean(octo::square(net->forward(x) - y));
    loss.backward();
    opt.step();
  }
  std::vector<Tensor> out;
  for (const Tensor& p : net->parameters()) out.push_back(p.to(octo::kCPU));
  return out;
}

/// The gradients differ in the last bits between cuBLAS and the cpu GEMM, so the comparison is
/// to 1e-9 relative rather than bit for bit.
void check_trained(const std::vector<Tensor>& gpu, const std::vector<Tensor>& cpu) {
  REQUIRE(gpu.size() == cpu.size());
  for (size_t k = 0; k < gpu.size(); ++k) {
    INFO("parameter " << k);
    check_close(values(gpu[k]), values(cpu[k]), 1e-9, 1e-12);
  }
}

}  // namespace

TEST_CASE("SGD and Adam training steps on cuda:0 equal the same on the cpu", "[optim][models]") {
  SECTION("SGD with Nesterov momentum and weight decay") {
    const optim::SGDOptions o{.lr = 0.05, .momentum = 0.9, .weight_decay = 1e-3, .nesterov = true};
    check_trained(train<optim::SGD>(kGpu, o), train<optim::SGD>(octo::kCPU, o));
  }
  SECTION("Adam with amsgrad") {
    const optim::AdamOptions o{.lr = 0.01, .weight_decay = 1e-2, .amsgrad = true};
    check_trained(train<optim::Adam>(kGpu, o), train<optim::Adam>(octo::kCPU, o));
  }
  SECTION("AdamW") {
    const optim::AdamWOptions o{.lr = 0.01};
    check_trained(train<optim::AdamW>(kGpu, o), train<optim::AdamW>(octo::kCPU, o));
  }
}
