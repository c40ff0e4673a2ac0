// bfloat16 and float16 on CUDA (Note [16-bit kernels]): the cases of kernels/half_cases.h, which
// the CPU suite runs too, each a 16-bit op on cuda:0 against the float32 op on the CPU; then what
// only the GPU has: random fills equal to the CPU's (bit for bit but for randn's last bits), 16-bit
// atomic adds, and a small CNN trained under autocast on cuda:0 as on the CPU.
#include "gpu/gpu_helpers.h"
#include "gpu/gpu_main.h"

#include <octo/octo.h>

#include <memory>
#include <vector>

#include "kernels/half_cases.h"
#include "parallel/models.h"

using octo::DType;
using octo::Tensor;

using namespace gpu_test;

namespace {

/// The GPU's float32 kernels differ from the CPU's in summation order (block reductions, cuDNN's
/// algorithms) and in the device math library: 2^-14 of the largest reference value, a quarter
/// of float16's rounding and far below a wrong kernel's error.
const half_cases::Target kCuda{kGpu, 0x1p-14, /*bias_rounds_twice=*/true};

}  // namespace

TEST_CASE("cuda 16-bit elementwise ops compute in float and round once", "[cuda][half]") {
  half_cases::elementwise(kCuda, GENERATE(octo::kBFloat16, octo::kFloat16));
}

TEST_CASE("cuda 16-bit reductions accumulate wide and round once", "[cuda][half]") {
  half_cases::reductions(kCuda, GENERATE(octo::kBFloat16, octo::kFloat16));
}

TEST_CASE("cuda 16-bit products accumulate in float32 and round once", "[cuda][half]") {
  half_cases::products(kCuda, GENERATE(octo::kBFloat16, octo::kFloat16));
}

TEST_CASE("cuda 16-bit convolution (cuDNN) and pooling match float32", "[cuda][half][cudnn]") {
  half_cases::conv_and_pool(kCuda, GENERATE(octo::kBFloat16, octo::kFloat16));
}

TEST_CASE("cuda 16-bit softmax and log_softmax match float32", "[cuda][half]") {
  half_cases::softmax(kCuda, GENERATE(octo::kBFloat16, octo::kFloat16));
}

TEST_CASE("cuda 16-bit batch norm keeps float32 statistics", "[cuda][half][cudnn]") {
  half_cases::batch_norm(kCuda, GENERATE(octo::kBFloat16, octo::kFloat16));
}

TEST_CASE("cuda 16-bit cross-entropy computes in float32", "[cuda][half]") {
  half_cases::cross_entropy(kCuda, GENERATE(octo::kBFloat16, octo::kFloat16));
}

TEST_CASE("cuda 16-bit random fills equal the cpu's", "[cuda][half][random]") {
  const DType dt = GENERATE(octo::kBFloat16, octo::kFloat16);
  INFO(dt);
  octo::manual_seed(5);
  const Tensor ug = octo::rand({257}, {.dtype = dt, .device = kGpu});
  octo::manual_seed(5);
  check_match(ug, octo::rand({257}, {.dtype = dt}));
  // randn's Box-Muller calls logf and cosf, which CUDA's math library and glibc may round an
  // ulp apart in float32; rounded to 16 bits that rarely shows, and then as one 16-bit ulp (2u
  // relative; float16's smallest subnormal absolute). The rest must be equal.
  octo::manual_seed(6);
  const Tensor ng = octo::randn({3, 50}, {.dtype = dt, .device = kGpu});
  octo::manual_seed(6);
  const Tensor nc = octo::randn({3, 50}, {.dtype = dt});
  check_match(ng, nc, 2 * half_cases::unit_roundoff(dt), 0x1p-24);
  const std::vector<float> g = half_cases::floats(ng), c = half_cases::floats(nc);
  int64_t equal = 0;
  for (size_t i = 0; i < g.size(); ++i) equal += g[i] == c[i];
  CHECK(equal >= int64_t(g.size()) * 95 / 100);
  // dropout's bernoulli mask, drawn in the input's dtype
  octo::manual_seed(7);
  const Tensor dg = octo::dropout(octo::ones({64, 33}, {.dtype = dt, .device = kGpu}), 0.3, true);
  octo::manual_seed(7);
  check_match(dg, octo::dropout(octo::ones({64, 33}, {.dtype = dt}), 0.3, true));
}

TEST_CASE("cuda 16-bit scatter_add adds every source element once", "[cuda][half][indexing]") {
  const DType dt = GENERATE(octo::kBFloat16, octo::kFloat16);
  INFO(dt);
  // 1000 ones added into 5 bins, 200 each (many collisions, both halves of each 32-bit word):
  // every partial sum is an integer up to 200, exact in both types, so the order the atomics run
  // in cannot change the result.
  std::vector<int64_t> bins(1000);
  for (size_t i = 0; i < bins.size(); ++i) bins[i] = int64_t(i % 5);
  const Tensor index = octo::from_vector(bins, {1000});
  const Tensor src = octo::ones({1000}, {.dtype = dt});
  const Tensor base = octo::zeros({5}, {.dtype = dt});
  const Tensor got = octo::scatter_add(base.to(kGpu), 0, index.to(kGpu), src.to(kGpu));
  check_match(got, octo::scatter_add(base, 0, index, src));
}

TEST_CASE("a small CNN trains under bfloat16 autocast on cuda:0 as on the cpu", "[cuda][half]") {
  // Three SGD steps of test_models::Cnn in float32 with its convolutions and linear layer in
  // bfloat16 (autocast), from the same weights on both devices. The 16-bit roundings of the two
  // runs agree except where float32 sums in another order land on the other side of a rounding
  // boundary, which moves a value by one bfloat16 step (2^-8 relative); so the weights agree to
  // a few such steps of an update, not to float32 rounding.
  auto train = [](octo::Device device) {
    octo::manual_seed(11);
    auto model = std::make_shared<test_models::Cnn>();
    model->to(device);
    octo::manual_seed(12);
    const Tensor x = octo::randn({8, 1, 8, 8}).to(device);
    const Tensor y = octo::randint(0, 5, {8}).to(device);
    octo::optim::SGD opt(model->parameters(), {.lr = 0.1, .momentum = 0.9});
    std::vector<double> losses;
    for (int step = 0; step < 3; ++step) {
      opt.zero_grad();
      Tensor loss;
      {
        octo::AutocastGuard autocast(device.type(), octo::kBFloat16);
        const Tensor out = model->forward(x);
        CHECK(out.dtype() == octo::kBFloat16);
        loss = octo::nn::functional::cross_entropy(out, y);
      }
      CHECK(loss.dtype() == octo::kFloat32);
      loss.backward();
      losses.push_back(loss.item<double>());
      opt.step();
    }
    return std::make_pair(model, losses);
  };
  auto [cpu, cpu_losses] = train(octo::kCPU);
  auto [gpu, gpu_losses] = train(kGpu);
  for (size_t i = 0; i < cpu_losses.size(); ++i) {
    INFO("step " << i);
    CHECK(std::abs(gpu_losses[i] - cpu_losses[i]) <= 0x1p-6 * std::abs(cpu_losses[i]));
  }
  auto pc = cpu->named_parameters(), pg = gpu->named_parameters();
  REQUIRE(pc.size() == pg.size());
  for (size_t i = 0; i < pc.size(); ++i) {
    INFO(pc[i].first);
    CHECK(pg[i].second.dtype() == octo::kFloat32);  // the float32 master weights
    check_match(pg[i].second, pc[i].second, 0x1p-5, 0x1p-7);
  }
}
