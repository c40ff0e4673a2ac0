// DataParallel under threads: nested DataParallel (one inside another's replicas) and several
// threads calling one DataParallel at once. Both used to hang or corrupt memory.
#include <catch2/catch.hpp>

#include <chrono>
#include <future>
#include <thread>

#include "parallel/models.h"

using octo::Device;
using octo::Tensor;
using octo::parallel::DataParallel;
namespace nn = octo::nn;

namespace {

/// Runs fn on another thread and fails (instead of hanging the suite) if it takes over 60 s.
template <typename F>
void within_a_minute(F fn) {
  auto done = std::async(std::launch::async, fn);
  REQUIRE(done.wait_for(std::chrono::seconds(60)) == std::future_status::ready);
  done.get();  // rethrows
}

/// A model whose forward runs its own DataParallel over cpu:0,cpu:1 (the inner object is shared
/// by the outer replicas, which copy the pointer when cloned).
struct Nested : nn::Cloneable<Nested> {
  Nested() : Cloneable("Nested") { reset(); }
  void reset() override {
    head = register_module("head", std::make_shared<nn::Linear>(8, 3));
    if (!inner) {
      inner_model = std::make_shared<test_models::Mlp>(6, 8, 8);
      inner = std::make_shared<DataParallel>(inner_model,
                                             std::vector<Device>{Device("cpu:0"), Device("cpu:1")});
    }
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = inner->forward(x.to(Device("cpu:0"))).to(x.device());
    return head->forward(octo::relu(h));
  }
  std::shared_ptr<test_models::Mlp> inner_model;
  std::shared_ptr<DataParallel> inner;
  std::shared_ptr<nn::Linear> head;
};

}  // namespace

TEST_CASE("DataParallel inside DataParallel runs (inline on the outer worker) and matches") {
  octo::manual_seed(0);
  auto model = std::make_shared<Nested>();
  Tensor x = octo::randn({8, 6});
  Tensor reference = model->forward(x);  // outer level plain; the inner one still parallel
  within_a_minute([&] {
    DataParallel outer(model, {Device("cpu:0"), Device("cpu:1")});
    Tensor out = outer.forward(x);
    CHECK((out - reference).abs().max().item<float>() < 1e-6f);
    out.sum().backward();
    CHECK(model->head->weight.grad().defined());
    CHECK(model->inner_model->fc1->weight.grad().defined());
  });
}

TEST_CASE("DataParallel called from four threads at once stays correct") {
  octo::manual_seed(1);
  auto model = std::make_shared<test_models::Mlp>(6, 16, 4);
  DataParallel dp(model, {Device("cpu:0"), Device("cpu:1")});
  std::vector<Tensor> inputs, expected;
  {
    octo::NoGradGuard no_grad;
    for (int t = 0; t < 4; ++t) {
      inputs.push_back(octo::randn({10, 6}));
      expected.push_back(model->forward(inputs.back()));
    }
  }
  within_a_minute([&] {
    std::vector<std::future<float>> workers;
    for (int t = 0; t < 4; ++t) {
      workers.push_back(std::async(std::launch::async, [&, t] {
        float worst = 0;
        for (int k = 0; k < 25; ++k) {
          Tensor out = dp.forward(inputs[size_t(t)]);
          worst = std::max(worst, (out - expected[size_t(t)]).abs().max().item<float>());
          out.sum().backward();  // multi-device backward from several threads too
        }
        return worst;
      }));
    }
    for (auto& w : workers) CHECK(w.get() < 1e-6f);
  });
}

TEST_CASE("run_on_devices from a device worker runs the jobs inline, each on its device") {
  std::vector<int> seen(2, -1);
  octo::run_on_devices({Device("cpu:0")}, [&](size_t) {
    octo::run_on_devices({Device("cpu:0"), Device("cpu:1")}, [&](size_t i) {
      seen[i] = octo::current_device_index(octo::DeviceType::CPU);
    });
  });
  CHECK(seen == std::vector<int>({0, 1}));
}
