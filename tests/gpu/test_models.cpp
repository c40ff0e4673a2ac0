// Whole models on cuda:0: the example programs run a few steps, a small CNN trains like it does on
// the CPU, and DataParallel with device_ids {cuda:0} (and its placement errors) behaves as the
// lesson teaches.
#include "gpu/gpu_main.h"

#include <octo/octo.h>

#include <string>

#include "examples/example_helpers.h"
#include "parallel/models.h"

using octo::Device;
using octo::Tensor;
namespace fs = std::filesystem;
namespace nn = octo::nn;
using namespace example_helpers;

namespace {

const Device kGpu("cuda:0");

double max_abs_diff(const Tensor& a, const Tensor& b) {
  return octo::max(octo::abs(octo::sub(a.to(octo::kCPU), b.to(octo::kCPU)))).item<double>();
}

/// Three SGD steps of test_models::Cnn on `device` (float64), from the same initial weights.
std::shared_ptr<test_models::Cnn> train_cnn(Device device) {
  octo::manual_seed(11);
  auto model = std::make_shared<test_models::Cnn>();
  model->to(device);
  octo::manual_seed(12);
  Tensor x = octo::randn({8, 1, 8, 8});
  Tensor y = octo::randint(0, 5, {8});
  model->to(octo::kFloat64);
  octo::optim::SGD opt(model->parameters(), {.lr = 0.1, .momentum = 0.9});
  for (int step = 0; step < 3; ++step) {
    opt.zero_grad();
    Tensor out = model->forward(x.to(device, octo::kFloat64));
    octo::nn::functional::cross_entropy(out, y.to(device)).backward();
    opt.step();
  }
  return model;
}

}  // namespace

TEST_CASE("a small CNN trains on cuda:0 as on the cpu (float64, 3 SGD steps)", "[cuda][models]") {
  auto cpu = train_cnn(octo::kCPU);
  auto gpu = train_cnn(kGpu);
  auto pc = cpu->named_parameters(), pg = gpu->named_parameters();
  REQUIRE(pc.size() == pg.size());
  for (size_t i = 0; i < pc.size(); ++i) {
    INFO(pc[i].first);
    CHECK(pg[i].second.device() == kGpu);
    CHECK(max_abs_diff(pg[i].second, pc[i].second) < 1e-10);
  }
}

TEST_CASE("DataParallel on cuda:0 runs the module and returns outputs on cuda:0",
          "[cuda][models][data_parallel]") {
  octo::manual_seed(3);
  auto model = std::make_shared<test_models::Mlp>();
  Tensor x = octo::randn({10, 6});
  Tensor expected = model->forward(x);
  model->to(kGpu);
  octo::parallel::DataParallel dp(model, {kGpu});
  Tensor out = dp.forward(x.to(kGpu));
  CHECK(out.device() == kGpu);
  CHECK(max_abs_diff(out, expected) < 1e-5);
  // Inputs on the CPU are scattered to cuda:0 too, as torch's DataParallel does.
  CHECK(dp.forward(x).device() == kGpu);
  octo::sum(out).backward();
  CHECK(model->fc1->weight.grad().device() == kGpu);
}

TEST_CASE("DataParallel refuses a model left on the cpu with the lesson's message",
          "[cuda][models][data_parallel]") {
  auto model = std::make_shared<test_models::Mlp>();
  octo::parallel::DataParallel dp(model, {kGpu});
  try {
    dp.forward(octo::randn({4, 6}).to(kGpu));
    FAIL("DataParallel ran a model whose parameters are on the cpu");
  } catch (const octo::DeviceError& e) {
    const std::string msg = e.what();
    CHECK(
        msg.find(
            "module must have its parameters and buffers on device cuda:0 (device_ids[0]) but found one of them on device: cpu:0") !=
        std::string::npos);
    CHECK(msg.find("Move the model") != std::string::npos);
  }
  // Half moved is refused too, naming the parameter left behind.
  model->fc1->to(kGpu);
  CHECK_THROWS_WITH(dp.forward(octo::randn({4, 6}).to(kGpu)), Catch::Contains("fc2"));
}

TEST_CASE("the examples train a few steps on cuda:0", "[cuda][models][examples]") {
  INFO("this test runs the example programs: configure with -Dexamples=true");
  REQUIRE(fs::exists(bin("mnist/mnist")));
  {
    fs::path d = make_mnist("gpu_mnist", 512, 128);
    Run r = run(bin("mnist/mnist") + " --model cnn --device cuda:0 --data " + d.string() +
                " --epochs 2 --batch-size 32 --seed 3");
    REQUIRE(r.rc == 0);
    CHECK(r.out.find("cuda:0") != std::string::npos);
    CHECK(final_accuracy(r.out) > 80.0);  // 10% is chance; the CPU run of this data reaches ~100%
    // Mixed precision: bfloat16 autocast, and float16 with the GradScaler.
    for (const char* amp : {"bf16", "fp16"}) {
      INFO("--amp " << amp);
      Run a = run(bin("mnist/mnist") + " --model cnn --device cuda:0 --data " + d.string() +
                  " --epochs 2 --batch-size 32 --seed 3 --amp " + amp);
      REQUIRE(a.rc == 0);
      CHECK(final_accuracy(a.out) > 80.0);
    }
    fs::remove_all(d);
  }
  {
    fs::path d = scratch("gpu_cifar");
    for (int i = 1; i <= 5; ++i)
      write_cifar(d / ("data_batch_" + std::to_string(i) + ".bin"), 12, i);
    write_cifar(d / "test_batch.bin", 20, 9);
    Run r = run(bin("cifar10/cifar10") + " --device cuda:0 --data " + d.string() +
                " --width 2 --batch-size 16 --epochs 1 --seed 5");
    REQUIRE(r.rc == 0);
    CHECK(r.out.find("test accuracy: ") != std::string::npos);
    fs::remove_all(d);
  }
}
