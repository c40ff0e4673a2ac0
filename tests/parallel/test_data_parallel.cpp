// DataParallel over virtual CPU devices: equivalence with one device, and every edge the lesson
// and torch.nn.DataParallel define.
#include <catch2/catch.hpp>

#include <cmath>
#include <sstream>

#include "parallel/models.h"

using octo::Device;
using octo::Tensor;
using octo::parallel::DataParallel;
namespace nn = octo::nn;
using namespace test_models;

namespace {

std::vector<Device> cpus(int n) {
  std::vector<Device> d;
  for (int i = 0; i < n; ++i) d.emplace_back(octo::DeviceType::CPU, i);
  return d;
}

double max_rel_diff(const Tensor& a, const Tensor& b) {
  auto x = a.to(octo::kFloat64).contiguous().to_vector<double>();
  auto y = b.to(octo::kFloat64).contiguous().to_vector<double>();
  REQUIRE(x.size() == y.size());
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i)
    worst = std::max(worst, std::fabs(x[i] - y[i]) / std::max(1.0, std::fabs(y[i])));
  return worst;
}

/// Runs `steps` SGD steps of model on (x, y) with MSE loss, through DataParallel over `devices`
/// (or directly when devices is empty); returns the first step's output and loss, and the
/// gradients of the first step.
struct StepResult {
  Tensor output, loss;
  std::vector<std::pair<std::string, Tensor>> grads;
};

template <typename Model>
StepResult train(std::shared_ptr<Model> model, const Tensor& x, const Tensor& y,
                 const std::vector<Device>& devices, int steps, double lr) {
  std::shared_ptr<DataParallel> dp;
  if (!devices.empty()) dp = std::make_shared<DataParallel>(model, devices);
  StepResult first;
  for (int s = 0; s < steps; ++s) {
    Tensor out = dp ? dp->forward(x) : model->forward(x);
    Tensor loss = octo::mean(octo::square(out - y));
    model->zero_grad();
    loss.backward();
    if (s == 0) {
      first.output = out.detach();
      first.loss = loss.detach();
      for (auto& [n, p] : model->named_parameters()) first.grads.emplace_back(n, p.grad().clone());
    }
    octo::NoGradGuard no_grad;
    for (Tensor& p : model->parameters()) p.add_(p.grad(), -lr);
  }
  return first;
}

template <typename Model>
void check_equivalence(const std::function<std::shared_ptr<Model>()>& make, const Tensor& x,
                       const Tensor& y, double tol) {
  octo::manual_seed(1);
  auto reference = make();
  auto ref = train(reference, x, y, {}, 3, 0.1);
  for (int n : {1, 2, 3, 4}) {
    INFO(n << " devices");
    octo::manual_seed(1);
    auto model = make();
    auto got = train(model, x, y, cpus(n), 3, 0.1);
    CHECK(got.output.device() == Device("cpu:0"));
    CHECK(max_rel_diff(got.output, ref.output) <= tol);
    CHECK(max_rel_diff(got.loss, ref.loss) <= tol);
    for (size_t i = 0; i < ref.grads.size(); ++i) {
      INFO("gradient of " << ref.grads[i].first);
      CHECK(max_rel_diff(got.grads[i].second, ref.grads[i].second) <= tol);
    }
    auto ref_params = reference->named_parameters();
    auto params = model->named_parameters();
    for (size_t i = 0; i < ref_params.size(); ++i) {
      INFO("weights of " << ref_params[i].first << " after 3 SGD steps");
      CHECK(max_rel_diff(params[i].second, ref_params[i].second) <= tol);
    }
  }
}

}  // namespace

TEST_CASE("DataParallel matches one device for an MLP (float64 and float32)") {
  octo::manual_seed(7);
  Tensor x = octo::randn({10, 6}, {.dtype = octo::kFloat64});  // 10 rows: uneven chunks for 3, 4
  Tensor y = octo::randn({10, 3}, {.dtype = octo::kFloat64});
  check_equivalence<Mlp>(
      [] {
        auto m = std::make_shared<Mlp>();
        m->to(octo::kFloat64);
        return m;
      },
      x, y, 1e-10);
  check_equivalence<Mlp>([] { return std::make_shared<Mlp>(); }, x.to(octo::kFloat32),
                         y.to(octo::kFloat32), 1e-5);
}

TEST_CASE("DataParallel matches one device for a CNN") {
  octo::manual_seed(8);
  Tensor x = octo::randn({7, 1, 8, 8}, {.dtype = octo::kFloat64});
  Tensor y = octo::randn({7, 5}, {.dtype = octo::kFloat64});
  check_equivalence<Cnn>(
      [] {
        auto m = std::make_shared<Cnn>();
        m->to(octo::kFloat64);
        return m;
      },
      x, y, 1e-10);
  check_equivalence<Cnn>([] { return std::make_shared<Cnn>(); }, x.to(octo::kFloat32),
                         y.to(octo::kFloat32), 1e-5);
}

TEST_CASE("outputs are gathered on device_ids[0], or on output_device") {
  auto model = std::make_shared<Mlp>();
  Tensor x = octo::randn({8, 6});
  DataParallel dp(model, cpus(4));
  Tensor out = dp.forward(x);
  CHECK(out.device() == Device("cpu:0"));
  CHECK(out.sizes() == octo::Shape{8, 3});
  model->to(Device("cpu:2"));
  DataParallel dp2(model, {Device("cpu:2"), Device("cpu:3")}, Device("cpu:0"));
  CHECK(dp2.forward(x).device() == Device("cpu:0"));
  DataParallel dp3(model, {Device("cpu:2"), Device("cpu:3")});
  CHECK(dp3.forward(x).device() == Device("cpu:2"));
}

TEST_CASE("a model not moved to device_ids[0] is refused with the PyTorch message") {
  auto model = std::make_shared<Mlp>();  // on cpu:0
  DataParallel dp(model, {Device("cpu:1"), Device("cpu:2")});
  Tensor x = octo::randn({4, 6});
  CHECK_THROWS_AS(dp.forward(x), octo::DeviceError);
  CHECK_THROWS_WITH(
      dp.forward(x),
      Catch::StartsWith(
          "module must have its parameters and buffers on device cpu:1 (device_ids[0]) but found one of them on device: cpu:0") &&
          Catch::Contains("model->to("));
}

TEST_CASE("a batch smaller than the device count uses fewer replicas") {
  auto model = std::make_shared<Mlp>();
  DataParallel dp(model, cpus(4));
  Tensor x = octo::randn({2, 6});
  Tensor out = dp.forward(x);
  CHECK(out.sizes() == octo::Shape{2, 3});
  CHECK(max_rel_diff(out, model->forward(x)) < 1e-6);
  out.sum().backward();
  CHECK(model->fc1->weight.grad().defined());
}

TEST_CASE("chunks follow torch.chunk: 10 rows on 4 devices are 3, 3, 3, 1") {
  auto parts = octo::parallel::comm::scatter(octo::arange(10), cpus(4));
  REQUIRE(parts.size() == 4);
  CHECK(parts[0].numel() == 3);
  CHECK(parts[3].numel() == 1);
  CHECK(parts[3].device() == Device("cpu:3"));
  CHECK(parts[3].to_vector<int64_t>() == std::vector<int64_t>{9});
  auto three = octo::parallel::comm::scatter(octo::arange(6), cpus(4));  // chunk(6, 4) -> 2,2,2
  CHECK(three.size() == 3);
}

namespace {
/// Takes [x, [y, scale]] and returns [x * scale + y, mean(x)].
struct Nested : nn::Cloneable<Nested> {
  Nested() : Cloneable("Nested") { reset(); }
  void reset() override { w = register_parameter("w", octo::ones({3})); }
  nn::Value forward_values(const std::vector<nn::Value>& in) override {
    const Tensor& x = in[0].tensor();
    const Tensor& y = in[1].list()[0].tensor();
    double scale = in[1].list()[1].to_double();
    return nn::Value::list({x * w * scale + y, octo::mean(x)});
  }
  Tensor w;
};
}  // namespace

TEST_CASE("nested inputs and outputs, non-tensor arguments and scalar outputs") {
  auto model = std::make_shared<Nested>();
  DataParallel dp(model, cpus(3));
  Tensor x = octo::randn({6, 3});
  Tensor y = octo::randn({6, 3});
  nn::Value out = dp.forward_values({x, nn::Value::list({y, 2.0})});
  REQUIRE(out.is_list());
  Tensor first = out.list()[0].tensor();
  CHECK(first.sizes() == octo::Shape{6, 3});
  CHECK(max_rel_diff(first, x * 2.0 + y) < 1e-6);
  // 0-dim outputs become one value per replica.
  Tensor means = out.list()[1].tensor();
  CHECK(means.sizes() == octo::Shape{3});
  CHECK(std::fabs(means.to_vector<float>()[1] - octo::mean(x.narrow(0, 2, 2)).item<float>()) <
        1e-6);
  first.sum().backward();
  CHECK(max_rel_diff(model->w.grad(), octo::sum(x * 2.0, {0})) < 1e-5);
}

namespace {
struct FailsOnSomeDevices : nn::Cloneable<FailsOnSomeDevices> {
  FailsOnSomeDevices() : Cloneable("FailsOnSomeDevices") { reset(); }
  void reset() override { w = register_parameter("w", octo::ones({2})); }
  Tensor forward(const Tensor& x) override {
    if (x.device() != Device("cpu:0")) OCTO_THROW(octo::ValueError, "bad chunk on ", x.device());
    return x * w;
  }
  Tensor w;
};
}  // namespace

TEST_CASE("an exception inside replicas is reported with replica and device") {
  auto model = std::make_shared<FailsOnSomeDevices>();
  DataParallel dp(model, cpus(3));
  Tensor x = octo::randn({3, 2});
  CHECK_THROWS_WITH(dp.forward(x),
                    Catch::Contains("Caught bad chunk on cpu:1 in replica 1 on device cpu:1") &&
                        Catch::Contains("Caught bad chunk on cpu:2 in replica 2 on device cpu:2"));
  DataParallel two(model, cpus(2));
  CHECK_THROWS_AS(two.forward(octo::randn({2, 2})),
                  octo::ValueError);  // one failure keeps its type
}

TEST_CASE("a single device runs the module directly") {
  auto model = std::make_shared<Mlp>();
  DataParallel dp(model, {Device("cpu:0")});
  Tensor x = octo::randn({5, 6});
  Tensor out = dp.forward(x);
  CHECK(out.grad_fn()->name() != "Gather");
  CHECK(max_rel_diff(out, model->forward(x)) == 0.0);
}

TEST_CASE("a single device moves nested outputs to output_device too") {
  auto model = std::make_shared<Nested>();
  model->to(Device("cpu:1"));
  DataParallel dp(model, {Device("cpu:1")}, Device("cpu:0"));
  Tensor x = octo::randn({4, 3});
  Tensor y = octo::randn({4, 3});
  nn::Value out = dp.forward_values({x, nn::Value::list({y, 2.0})});
  REQUIRE(out.is_list());
  REQUIRE(out.list().size() == 2);
  for (const nn::Value& v : out.list()) CHECK(v.tensor().device() == Device("cpu:0"));
  CHECK(out.list()[1].tensor().dim() == 0);  // one device: nothing is gathered, a scalar stays
  CHECK(max_rel_diff(out.list()[0].tensor(), x * 2.0 + y) < 1e-6);
  out.list()[0].tensor().sum().backward();  // the move is differentiable
  REQUIRE(model->w.grad().defined());
  CHECK(model->w.grad().device() == Device("cpu:1"));
  CHECK(max_rel_diff(model->w.grad().to(Device("cpu:0")), octo::sum(x * 2.0, {0})) < 1e-5);
}

TEST_CASE("state_dict keys are unchanged by wrapping, so checkpoints move freely") {
  auto model = std::make_shared<Mlp>();
  DataParallel dp(model, cpus(2));
  auto plain = model->state_dict();
  auto wrapped = dp.state_dict();
  REQUIRE(plain.size() == wrapped.size());
  for (size_t i = 0; i < plain.size(); ++i) CHECK(plain[i].first == wrapped[i].first);
  CHECK(wrapped[0].first == "fc1.weight");
  auto other = std::make_shared<Mlp>();
  DataParallel dp_other(other, cpus(2));
  dp_other.load_state_dict(model->state_dict());
  CHECK(max_rel_diff(other->fc2->bias, model->fc2->bias) == 0.0);
}

TEST_CASE("BatchNorm-style buffers: replica 0's update persists, the others' are dropped") {
  auto model = std::make_shared<RunningMean>();
  DataParallel dp(model, cpus(2));
  Tensor x = octo::randn({8, 3});
  dp.forward(x);
  // Only the first chunk's statistics reach the original buffer, as in torch.nn.DataParallel.
  Tensor expected = octo::mean(x.narrow(0, 0, 4), {0}) * 0.1;
  CHECK(max_rel_diff(model->running_mean, expected) < 1e-6);
}

TEST_CASE("no_grad replication is detached") {
  auto model = std::make_shared<Mlp>();
  DataParallel dp(model, cpus(2));
  octo::NoGradGuard no_grad;
  Tensor out = dp.forward(octo::randn({4, 6}));
  CHECK_FALSE(out.requires_grad());
}

TEST_CASE("replicate: gradients of every replica sum into the original parameters") {
  auto model = std::make_shared<Mlp>();
  auto replicas = octo::parallel::replicate(model, cpus(3));
  REQUIRE(replicas.size() == 3);
  Tensor x = octo::randn({2, 6});
  Tensor total;
  for (size_t i = 0; i < 3; ++i) {
    Tensor out = replicas[i]->forward(x.to(Device(octo::DeviceType::CPU, static_cast<int>(i))));
    CHECK(out.device() == Device(octo::DeviceType::CPU, static_cast<int>(i)));
    Tensor s = out.sum().to(Device("cpu:0"));
    total = total.defined() ? total + s : s;
  }
  total.backward();
  Tensor g3 = model->fc1->weight.grad().clone();
  model->zero_grad();
  (model->forward(x).sum() * 3.0).backward();
  CHECK(max_rel_diff(g3, model->fc1->weight.grad()) < 1e-5);
}

namespace {
/// Gradients of a gradient penalty, sum over parameters of |dL/dp|^2, where L is the MSE of
/// model(x) (through DataParallel over `devices`, or directly when empty): double backward.
std::vector<Tensor> penalty_grads(std::shared_ptr<Mlp> model, const Tensor& x, const Tensor& y,
                                  const std::vector<Device>& devices) {
  std::shared_ptr<DataParallel> dp;
  if (!devices.empty()) dp = std::make_shared<DataParallel>(model, devices);
  Tensor out = dp ? dp->forward(x) : model->forward(x);
  Tensor loss = octo::mean(octo::square(out - y));
  auto params = model->parameters();
  auto g = octo::autograd::grad({loss}, params, {}, {}, false, /*create_graph=*/true);
  Tensor penalty;
  for (const Tensor& gi : g)
    penalty = penalty.defined() ? penalty + (gi * gi).sum() : (gi * gi).sum();
  model->zero_grad();
  penalty.backward();
  std::vector<Tensor> out_grads;
  for (const Tensor& p : params) out_grads.push_back(p.grad().clone());
  return out_grads;
}
}  // namespace

TEST_CASE("double backward through DataParallel (a gradient penalty) matches one device") {
  octo::manual_seed(11);
  Tensor x = octo::randn({7, 6}, {.dtype = octo::kFloat64});
  Tensor y = octo::randn({7, 3}, {.dtype = octo::kFloat64});
  auto make = [] {
    octo::manual_seed(3);
    auto m = std::make_shared<Mlp>();
    m->to(octo::kFloat64);
    return m;
  };
  auto ref = penalty_grads(make(), x, y, {});
  for (int n : {2, 3}) {
    INFO(n << " devices");
    auto got = penalty_grads(make(), x, y, cpus(n));
    REQUIRE(got.size() == ref.size());
    for (size_t i = 0; i < ref.size(); ++i) CHECK(max_rel_diff(got[i], ref[i]) < 1e-10);
  }
}

TEST_CASE("no leaked threads or memory after 10,000 steps of a tiny model") {
  auto model = std::make_shared<Mlp>(2, 2, 1);
  DataParallel dp(model, cpus(2));
  Tensor x = octo::randn({4, 2});
  auto step = [&] {
    Tensor loss = octo::mean(dp.forward(x));
    model->zero_grad();
    loss.backward();
  };
  for (int i = 0; i < 10; ++i) step();  // warm up: workers started, caches filled
  int threads = octo::DeviceWorker::threads_started();
  auto before = octo::memory_stats(Device("cpu:0"));
  for (int i = 0; i < 10000; ++i) step();
  auto after = octo::memory_stats(Device("cpu:0"));
  CHECK(octo::DeviceWorker::threads_started() == threads);
  CHECK(after.allocations <= before.allocations);
  CHECK(after.allocated_bytes <= before.allocated_bytes);
}

TEST_CASE("check_equivalence reports the differences by parameter name") {
  octo::manual_seed(5);
  auto model = std::make_shared<Mlp>();
  model->to(octo::kFloat64);
  Tensor x = octo::randn({9, 6}, {.dtype = octo::kFloat64});
  Tensor y = octo::randn({9, 3}, {.dtype = octo::kFloat64});
  auto loss_fn = [](const Tensor& out, const Tensor& t) {
    return octo::mean(octo::square(out - t));
  };
  auto report = octo::parallel::check_equivalence(model, x, y, loss_fn, cpus(3));
  CHECK(report.gradients.size() == 4);
  CHECK(report.gradients[0].name == "fc1.weight");
  CHECK(report.gradients[0].max_abs_grad > 0);
  CHECK(report.max_relative_diff() < 1e-12);
  CHECK(report.caveat.empty());
  CHECK_FALSE(model->fc1->weight.grad().defined());  // restored
  std::ostringstream os;
  os << report;
  CHECK_THAT(os.str(), Catch::Contains("grad fc2.bias"));
  auto bn = std::make_shared<RunningMean>();
  bn->to(octo::kFloat64);
  Tensor x3 = octo::randn({8, 3}, {.dtype = octo::kFloat64});
  Tensor before = bn->running_mean.clone();
  auto r2 = octo::parallel::check_equivalence(bn, x3, x3, loss_fn, cpus(2));
  CHECK_THAT(r2.caveat, Catch::Contains("BatchNorm"));
  CHECK(r2.max_relative_diff() > 1e-6);  // per-chunk statistics really differ
  CHECK(bn->running_mean.to_vector<double>() == before.to_vector<double>());  // restored
}
