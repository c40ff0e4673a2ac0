// comm primitives and the Broadcast / Scatter / Gather autograd functions on virtual CPU devices.
#include <catch2/catch.hpp>
#include <fstream>
#include <thread>

#include <octo/octo.h>

#include "kernels/collectives.h"

using octo::Device;
using octo::Tensor;
namespace comm = octo::parallel::comm;

namespace {
std::vector<Device> cpus(int n) {
  std::vector<Device> d;
  for (int i = 0; i < n; ++i) d.emplace_back(octo::DeviceType::CPU, i);
  return d;
}
}  // namespace

TEST_CASE("broadcast copies to every device; the source device keeps the tensor") {
  Tensor t = octo::randn({3, 4});
  auto out = comm::broadcast(t, cpus(3));
  REQUIRE(out.size() == 3);
  CHECK(out[0].is_alias_of(t));
  for (int i = 0; i < 3; ++i) {
    CHECK(out[i].device() == Device(octo::DeviceType::CPU, i));
    CHECK(out[i].to_vector<float>() == t.to_vector<float>());
  }
  CHECK_FALSE(out[1].is_alias_of(t));
  auto coalesced = comm::broadcast_coalesced({t, octo::arange(5)}, cpus(2));
  CHECK(coalesced[1][1].to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2, 3, 4});
}

TEST_CASE("reduce_add sums on the destination without touching the inputs") {
  Tensor a = octo::tensor({1, 2});
  Tensor b = octo::tensor({10, 20}).to(Device("cpu:1"));
  Tensor s = comm::reduce_add({a, b}, Device("cpu:0"));
  CHECK(s.device() == Device("cpu:0"));
  CHECK(s.to_vector<float>() == std::vector<float>{11, 22});
  CHECK(a.to_vector<float>() == std::vector<float>{1, 2});
  CHECK_THROWS_AS(comm::reduce_add({a, octo::zeros({3})}, Device("cpu:0")), octo::ValueError);
}

TEST_CASE("coalesced broadcast and reduce keep dtypes, shapes and missing gradients") {
  std::vector<Tensor> ts = {octo::randn({3, 4}),
                            octo::arange(5),
                            octo::randn({2, 3}, {.dtype = octo::kFloat64}).t(),
                            octo::full({}, 2.5, {.dtype = octo::kFloat16}),
                            octo::zeros({0, 2}, {.dtype = octo::kInt32}),
                            octo::ones({4}, {.dtype = octo::kBool})};
  auto out = comm::broadcast_coalesced(ts, cpus(3));
  REQUIRE(out.size() == 3);
  for (size_t j = 0; j < ts.size(); ++j) {
    CAPTURE(j);
    CHECK(out[0][j].is_alias_of(ts[j]));
    for (size_t i = 1; i < 3; ++i) {
      CHECK(out[i][j].device() == Device(octo::DeviceType::CPU, int(i)));
      CHECK(out[i][j].dtype() == ts[j].dtype());
      CHECK(out[i][j].sizes() == ts[j].sizes());
      CHECK(out[i][j].to(octo::kFloat64).to_vector<double>() ==
            ts[j].to(octo::kFloat64).to_vector<double>());
    }
  }
  // Tensor 1 only comes from cpu:0, tensor 2 from no device.
  std::vector<Tensor> g0 = {octo::tensor({1, 2}), octo::tensor({5, 6}), Tensor()};
  std::vector<Tensor> g1 = {octo::tensor({10, 20}).to(Device("cpu:1")), Tensor(), Tensor()};
  auto sums = comm::reduce_add_coalesced({g0, g1}, Device("cpu:1"));
  REQUIRE(sums.size() == 3);
  CHECK(sums[0].device() == Device("cpu:1"));
  CHECK(sums[0].to_vector<float>() == std::vector<float>{11, 22});
  CHECK(sums[1].to_vector<float>() == std::vector<float>{5, 6});
  CHECK(sums[1].device() == Device("cpu:1"));
  CHECK_FALSE(sums[2].defined());
  CHECK(g1[0].to_vector<float>() == std::vector<float>{10, 20});  // not accumulated into
}

TEST_CASE("nccl is unavailable without a GPU and refuses buffers that are not on one") {
  if (!octo::cuda::is_available()) CHECK_FALSE(octo::cuda::nccl::is_available());
  Tensor t = octo::zeros({4});
  CHECK_THROWS_AS(octo::cuda::nccl::broadcast({t.arg()}, 0), octo::DeviceError);
  CHECK_THROWS_AS(octo::cuda::nccl::reduce({t.arg()}, 0, t.arg()), octo::DeviceError);
}

TEST_CASE("scatter with explicit chunk sizes, and gather back") {
  Tensor t = octo::arange(0.0, 12.0).view({6, 2});
  auto parts = comm::scatter(t, cpus(3), octo::Shape{1, 2, 3});
  REQUIRE(parts.size() == 3);
  CHECK(parts[2].sizes() == octo::Shape{3, 2});
  Tensor back = comm::gather(parts, Device("cpu:0"));
  CHECK(back.to_vector<float>() == t.to_vector<float>());
  auto cols = comm::scatter(t, cpus(2), std::nullopt, 1);
  CHECK(cols[1].sizes() == octo::Shape{6, 1});
  CHECK_THROWS_WITH(comm::gather({octo::zeros({2, 3}), octo::zeros({2, 4})}, Device("cpu:0")),
                    Catch::Contains("replica 0 returned [2, 3] and replica 1 returned [2, 4]"));
}

TEST_CASE("Scatter and Gather are differentiable and inverse to each other") {
  Tensor x = octo::randn({5, 3}, {.dtype = octo::kFloat64, .requires_grad = true});
  auto pieces = octo::parallel::Scatter::apply(x, cpus(2));
  Tensor y = octo::parallel::Gather::apply({pieces[0] * 2.0, pieces[1] * 3.0}, Device("cpu:0"));
  y.sum().backward();
  auto g = x.grad().to_vector<double>();
  CHECK(g[0] == 2.0);   // rows 0..2 went to cpu:0
  CHECK(g[14] == 3.0);  // rows 3..4 went to cpu:1
  CHECK(octo::autograd::gradcheck(
      [](const octo::autograd::TensorList& in) {
        auto p = octo::parallel::Scatter::apply(in[0], {Device("cpu:0"), Device("cpu:1")});
        return octo::parallel::Gather::apply({octo::sin(p[0]), octo::exp(p[1])}, Device("cpu:0"));
      },
      {x}));
}

TEST_CASE("Broadcast's backward reduce-adds the replicas' gradients") {
  Tensor w = octo::randn({2, 2}, {.dtype = octo::kFloat64, .requires_grad = true});
  auto copies = octo::parallel::Broadcast::apply({w}, cpus(3));
  Tensor total = octo::zeros({}, {.dtype = octo::kFloat64});
  for (int i = 0; i < 3; ++i)
    total = total + (copies[i][0] * double(i + 1)).sum().to(Device("cpu:0"));
  total.backward();
  for (double g : w.grad().to_vector<double>()) CHECK(g == 6.0);
  Tensor elsewhere = octo::zeros({2}, {.device = Device("cpu:1")});
  CHECK_THROWS_AS(octo::parallel::Broadcast::apply({elsewhere}, cpus(2)), octo::DeviceError);
}

TEST_CASE("run_on_devices runs concurrently on distinct workers and reports every failure") {
  std::vector<std::thread::id> ids(3);
  octo::run_on_devices(cpus(3), [&](size_t i) { ids[i] = std::this_thread::get_id(); });
  CHECK(ids[0] != ids[1]);
  CHECK(ids[1] != ids[2]);
  CHECK(ids[0] != std::this_thread::get_id());
  // Each of 2 CPU devices gets an even share of the threads.
  std::vector<int> shares(2);
  octo::set_num_threads(2);
  octo::run_on_devices(cpus(2), [&](size_t i) { shares[i] = octo::get_num_threads(); });
  CHECK(shares == std::vector<int>{1, 1});
  CHECK_THROWS_WITH(octo::run_on_devices(cpus(2),
                                         [](size_t i) {
                                           if (i == 1) throw std::runtime_error("boom");
                                         }),
                    Catch::Contains("Caught boom in task 1 on device cpu:1"));
  CHECK_THROWS_WITH(octo::run_on_devices(
                        cpus(2), [](size_t) { throw octo::ValueError("bad"); }, 0, "chunk"),
                    Catch::Contains("Caught bad in chunk 0 on device cpu:0") &&
                        Catch::Contains("Caught bad in chunk 1 on device cpu:1"));
}

TEST_CASE("run_on_devices keeps the error type of a single failure") {
  auto fail_on_1 = [](auto error) {
    return [=] {
      octo::run_on_devices(cpus(2), [&](size_t i) {
        if (i == 1) throw error;
      });
    };
  };
  CHECK_THROWS_AS(fail_on_1(octo::IOError("unreadable"))(), octo::IOError);
  CHECK_THROWS_AS(fail_on_1(octo::NotImplementedError("no kernel"))(), octo::NotImplementedError);
  CHECK_THROWS_AS(fail_on_1(octo::OutOfMemoryError("no memory"))(), octo::OutOfMemoryError);
  CHECK_THROWS_WITH(fail_on_1(octo::IOError("unreadable"))(),
                    Catch::Contains("Caught unreadable in task 1 on device cpu:1"));
  // Several failures become one plain Error: no single type describes them all.
  try {
    octo::run_on_devices(cpus(2), [](size_t) { throw octo::IOError("unreadable"); });
    FAIL("expected a throw");
  } catch (const octo::IOError&) {
    FAIL("two failures must not pass for one IOError");
  } catch (const octo::Error& e) {
    CHECK_THAT(e.what(), Catch::Contains("in task 0") && Catch::Contains("in task 1"));
  }
}

TEST_CASE("a trace records spans per device with bytes moved") {
  std::string path = "octo_test_trace.json";
  octo::start_trace(path);
  Tensor t = octo::randn({64, 64});
  comm::broadcast(t, cpus(2));
  int64_t n = octo::stop_trace();
  CHECK(n >= 2);
  std::ifstream f(path);
  std::string json((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  CHECK_THAT(json, Catch::Contains("\"traceEvents\""));
  CHECK_THAT(json, Catch::Contains("\"name\": \"broadcast\""));
  CHECK_THAT(json, Catch::Contains("\"bytes\": 16384"));
  CHECK_THAT(json, Catch::Contains("\"name\": \"cpu:1\""));
  std::remove(path.c_str());
}
