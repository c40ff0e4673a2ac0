// NCCL collectives and the CUDA paths of parallel::comm: nccl::broadcast / reduce against the
// CPU, broadcast_coalesced / reduce_add_coalesced through NCCL against the copy path (OCTO_NCCL=0),
// and DataParallel on two GPUs against one. Multi-GPU cases need cuda:0 and cuda:1.
#include "gpu/gpu_helpers.h"
#include "gpu/gpu_main.h"

#include <octo/octo.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "kernels/collectives.h"
#include "kernels/cuda/stream.h"
#include "parallel/models.h"

using octo::Device;
using octo::DType;
using octo::Shape;
using octo::Tensor;
namespace comm = octo::parallel::comm;
namespace nccl = octo::cuda::nccl;

using namespace gpu_test;

namespace {

const Device kGpu0("cuda:0");
const Device kGpu1("cuda:1");
const std::vector<DType> kAllDTypes = {octo::kFloat32,  octo::kFloat64, octo::kInt64,
                                       octo::kInt32,    octo::kUInt8,   octo::kBool,
                                       octo::kBFloat16, octo::kFloat16};

bool two_gpus() {
  if (octo::cuda::device_count() >= 2) return true;
  WARN("only " << octo::cuda::device_count()
               << " GPU visible: this multi-GPU case needs cuda:0 and cuda:1 and was NOT run");
  return false;
}

/// Random integers in [0, 100) on the CPU (nonzero-ness for bool): exact in every dtype, and sums
/// of two stay exact too (< 256, the largest integer bfloat16 holds exactly).
Tensor random_cpu(const Shape& shape, DType dtype, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<double> v(size_t(octo::detail::shape_numel(shape)));
  for (double& x : v) x = double(rng() % 100);
  return octo::tensor(v, shape, {.dtype = dtype});
}

/// What summing a and b gives in `dtype` (Add is logical or for bool).
std::vector<double> sum_of(const Tensor& a, const Tensor& b, DType dtype) {
  std::vector<double> x = values(a), y = values(b);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = dtype == octo::kBool ? double(x[i] || y[i]) : x[i] + y[i];
  return x;
}

/// The same result from both paths: device, dtype, shape, values, no autograd.
void check_same(const Tensor& got, const Tensor& want) {
  REQUIRE(got.defined() == want.defined());
  if (!got.defined()) return;
  CHECK(got.device() == want.device());
  CHECK(got.dtype() == want.dtype());
  CHECK(got.sizes() == want.sizes());
  CHECK_FALSE(got.requires_grad());
  CHECK(values(got) == values(want));
}

/// Runs fn with OCTO_NCCL=0 (the copy path), restoring the variable afterwards.
template <typename F>
auto without_nccl(F&& fn) {
  struct Restore {
    std::optional<std::string> previous;
    ~Restore() {
      if (previous) {
        setenv("OCTO_NCCL", previous->c_str(), 1);
      } else {
        unsetenv("OCTO_NCCL");
      }
    }
  } restore;
  if (const char* env = std::getenv("OCTO_NCCL")) restore.previous = env;
  setenv("OCTO_NCCL", "0", 1);
  return fn();
}

/// The Chrome-trace JSON of the spans recorded while fn runs.
template <typename F>
std::string trace_of(F&& fn) {
  const std::string path = "octo_test_nccl_trace.json";
  octo::start_trace(path);
  fn();
  octo::stop_trace();
  std::ifstream f(path);
  std::string json((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::remove(path.c_str());
  return json;
}

/// Mixed dtypes and sizes on `device`: a 12 MB tensor (more than one 10 MB buffer), a strided
/// view, a 0-dim and an empty tensor, and small tensors of every dtype that share buffers.
std::vector<Tensor> mixed_tensors(Device device) {
  std::vector<Tensor> ts;
  uint32_t seed = 1;
  for (DType dtype : kAllDTypes) {
    ts.push_back(random_cpu({3, 5}, dtype, seed++).to(device));
    ts.push_back(random_cpu({7}, dtype, seed++).to(device));
  }
  ts.push_back(random_cpu({3'000'000}, octo::kFloat32, seed++).to(device));  // 12 MB
  ts.push_back(random_cpu({4, 6}, octo::kFloat64, seed++).to(device).t());   // not contiguous
  ts.push_back(random_cpu({}, octo::kFloat32, seed++).to(device));
  ts.push_back(octo::zeros({0, 3}, {.device = device}));
  ts.push_back(random_cpu({6'000'000}, octo::kUInt8, seed++).to(device));  // 6 MB, and 5 MB
  ts.push_back(random_cpu({5'000'000}, octo::kUInt8, seed++).to(device));  // that starts another
  return ts;
}

}  // namespace

TEST_CASE("nccl reports its version and refuses bad groups", "[cuda][nccl]") {
  REQUIRE(nccl::is_available());
  CHECK(nccl::version() >= 20000);  // NCCL 2.x
  Tensor a = octo::zeros({4}, {.device = kGpu0});
  Tensor b = octo::zeros({5}, {.device = kGpu0});
  CHECK_THROWS_AS(nccl::broadcast({}, 0), octo::ValueError);
  CHECK_THROWS_AS(nccl::broadcast({a.arg()}, 1), octo::IndexError);
  CHECK_THROWS_AS(nccl::broadcast({a.arg(), b.arg()}, 0), octo::DeviceError);        // cuda:0 twice
  CHECK_THROWS_AS(nccl::broadcast({octo::zeros({4}).arg()}, 0), octo::DeviceError);  // cpu
  CHECK_THROWS_AS(nccl::reduce({a.arg()}, 0, b.arg()), octo::ValueError);  // 4 vs 5 elements
  if (octo::cuda::device_count() >= 2) {
    Tensor c = octo::zeros({5}, {.device = kGpu1});
    CHECK_THROWS_AS(nccl::broadcast({a.arg(), c.arg()}, 0), octo::ValueError);
  }
}

TEST_CASE("nccl with one rank: broadcast keeps the buffer, reduce copies it", "[cuda][nccl]") {
  uint32_t seed = 10;
  for (DType dtype : kAllDTypes) {
    CAPTURE(std::string(octo::dtype_name(dtype)));
    Tensor src = random_cpu({1000}, dtype, seed++);
    Tensor a = src.to(kGpu0);
    nccl::broadcast({a.arg()}, 0);
    CHECK(values(a) == values(src));
    Tensor out = octo::zeros({1000}, {.dtype = dtype, .device = kGpu0});
    nccl::reduce({a.arg()}, 0, out.arg());
    CHECK(values(out) == values(src));
    CHECK(values(a) == values(src));
  }
  // Empty buffers are a no-op.
  Tensor empty = octo::zeros({0}, {.device = kGpu0});
  nccl::broadcast({empty.arg()}, 0);
  nccl::reduce({empty.arg()}, 0, empty.arg());
}

TEST_CASE("nccl broadcast and reduce over cuda:0 and cuda:1", "[cuda][nccl][multi-gpu]") {
  if (!two_gpus()) return;
  uint32_t seed = 100;
  for (DType dtype : kAllDTypes) {
    CAPTURE(std::string(octo::dtype_name(dtype)));
    for (int root : {0, 1}) {
      CAPTURE(root);
      Tensor x0 = random_cpu({3000}, dtype, seed++), x1 = random_cpu({3000}, dtype, seed++);
      Tensor a = x0.to(kGpu0), b = x1.to(kGpu1);
      Tensor out = octo::zeros({3000}, {.dtype = dtype, .device = root == 0 ? kGpu0 : kGpu1});
      nccl::reduce({a.arg(), b.arg()}, root, out.arg());
      CHECK(values(out) == sum_of(x0, x1, dtype));
      CHECK(values(a) == values(x0));  // inputs untouched
      CHECK(values(b) == values(x1));
      nccl::broadcast({a.arg(), b.arg()}, root);
      const std::vector<double> want = values(root == 0 ? x0 : x1);
      CHECK(values(a) == want);
      CHECK(values(b) == want);
    }
  }
  // In place on the root.
  Tensor x0 = random_cpu({64}, octo::kFloat64, 1), x1 = random_cpu({64}, octo::kFloat64, 2);
  Tensor a = x0.to(kGpu0), b = x1.to(kGpu1);
  nccl::reduce({a.arg(), b.arg()}, 0, a.arg());
  CHECK(values(a) == sum_of(x0, x1, octo::kFloat64));
}

TEST_CASE("with device_ids {cuda:0}, comm returns the tensors and sums on cuda:0", "[cuda][nccl]") {
  std::vector<Tensor> ts = mixed_tensors(kGpu0);
  auto out = comm::broadcast_coalesced(ts, {kGpu0});
  REQUIRE(out.size() == 1);
  for (size_t j = 0; j < ts.size(); ++j) CHECK(out[0][j].is_alias_of(ts[j]));
  std::vector<Tensor> grads = {random_cpu({3, 4}, octo::kFloat32, 1).to(kGpu0), Tensor(),
                               random_cpu({5}, octo::kInt64, 2).to(kGpu0)};
  auto sums = comm::reduce_add_coalesced({grads}, kGpu0);
  REQUIRE(sums.size() == 3);
  check_same(sums[0], grads[0]);
  CHECK_FALSE(sums[0].is_alias_of(grads[0]));  // never the input itself
  CHECK_FALSE(sums[1].defined());
  check_same(sums[2], grads[2]);
  // Broadcast's backward on one device, as DataParallel with device_ids {cuda:0} runs it.
  Tensor w = random_cpu({2, 3}, octo::kFloat64, 3).to(kGpu0).requires_grad_();
  auto copies = octo::parallel::Broadcast::apply({w}, {kGpu0});
  (copies[0][0] * 3.0).sum().backward();
  CHECK(values(w.grad()) == std::vector<double>(6, 3.0));
}

TEST_CASE("broadcast_coalesced through NCCL equals the copy path", "[cuda][nccl][multi-gpu]") {
  if (!two_gpus()) return;
  for (int root : {0, 1}) {
    CAPTURE(root);
    const std::vector<Device> devices = {kGpu0, kGpu1};
    std::vector<Tensor> ts = mixed_tensors(devices[size_t(root)]);
    std::vector<std::vector<Tensor>> got;
    const std::string trace = trace_of([&] { got = comm::broadcast_coalesced(ts, devices); });
    CHECK_THAT(trace, Catch::Contains("\"name\": \"nccl_broadcast\""));
    std::vector<std::vector<Tensor>> want;
    const std::string copy_trace = trace_of(
        [&] { want = without_nccl([&] { return comm::broadcast_coalesced(ts, devices); }); });
    CHECK_THAT(copy_trace, !Catch::Contains("nccl_broadcast"));
    REQUIRE(got.size() == 2);
    for (size_t i = 0; i < 2; ++i) {
      REQUIRE(got[i].size() == ts.size());
      for (size_t j = 0; j < ts.size(); ++j) {
        CAPTURE(i, j);
        check_same(got[i][j], want[i][j]);
        if (int(i) == root) {
          CHECK(got[i][j].is_alias_of(ts[j]));
        } else {
          CHECK_FALSE(got[i][j].is_alias_of(ts[j]));
          CHECK(got[i][j].is_contiguous());
          for (size_t k = 0; k < j; ++k) CHECK_FALSE(got[i][j].is_alias_of(got[i][k]));
        }
      }
    }
    // An in-place op on one result leaves the others' version counters alone.
    const size_t other = root == 0 ? 1 : 0;
    const uint32_t before = got[other][1].version();
    got[other][0].zero_();
    CHECK(got[other][1].version() == before);
  }
}

TEST_CASE("broadcast_coalesced through NCCL follows non-default current streams",
          "[cuda][nccl][multi-gpu]") {
  if (!two_gpus()) return;
  octo::cuda::StreamGuard side0(octo::cuda::stream_from_pool(0));
  octo::cuda::set_current_stream(octo::cuda::stream_from_pool(1));
  // Written on the side stream of cuda:0 just before the broadcast reads it.
  Tensor t = octo::full({5'000'000}, 2.5, {.device = kGpu0});
  Tensor u = octo::full({17}, int64_t(7), {.dtype = octo::kInt64, .device = kGpu0});
  auto out = comm::broadcast_coalesced({t, u}, {kGpu0, kGpu1});
  CHECK(values(out[1][0]) == std::vector<double>(5'000'000, 2.5));
  CHECK(values(out[1][1]) == std::vector<double>(17, 7.0));
  octo::cuda::set_current_stream(octo::cuda::default_stream(1));
}

TEST_CASE("reduce_add_coalesced through NCCL equals the copy path", "[cuda][nccl][multi-gpu]") {
  if (!two_gpus()) return;
  // The copy path adds on the GPU, which supports float32, float64, int64 and bool.
  const std::vector<DType> addable = {octo::kFloat32, octo::kFloat64, octo::kInt64, octo::kBool};
  std::vector<Tensor> cpu0, cpu1;
  uint32_t seed = 200;
  for (DType dtype : addable) {
    for (const Shape& shape : std::vector<Shape>{{3, 5}, {7}, {}, {0, 2}}) {
      cpu0.push_back(random_cpu(shape, dtype, seed++));
      cpu1.push_back(random_cpu(shape, dtype, seed++));
    }
  }
  cpu0.push_back(random_cpu({3'000'000}, octo::kFloat32, seed++));  // 12 MB
  cpu1.push_back(random_cpu({3'000'000}, octo::kFloat32, seed++));
  for (int root : {0, 1}) {
    CAPTURE(root);
    std::vector<Tensor> g0, g1;
    for (const Tensor& t : cpu0) g0.push_back(t.to(kGpu0));
    for (const Tensor& t : cpu1) g1.push_back(t.to(kGpu1));
    g1[0] = cpu1[0].t().contiguous().to(kGpu1).t();              // a strided input, same values
    g0.push_back(random_cpu({4}, octo::kFloat32, 7).to(kGpu0));  // only cuda:0 has a gradient
    g1.push_back(Tensor());
    g0.push_back(Tensor());  // no device has one
    g1.push_back(Tensor());
    const Device destination = root == 0 ? kGpu0 : kGpu1;
    std::vector<Tensor> got;
    const std::string trace = trace_of([&] {
      got = comm::reduce_add_coalesced({g0, g1}, destination);
    });
    CHECK_THAT(trace, Catch::Contains("\"name\": \"nccl_reduce_add\""));
    std::vector<Tensor> want = without_nccl([&] {
      return comm::reduce_add_coalesced({g0, g1}, destination);
    });
    REQUIRE(got.size() == g0.size());
    for (size_t j = 0; j < got.size(); ++j) {
      CAPTURE(j);
      check_same(got[j], want[j]);
      if (got[j].defined()) {
        CHECK(got[j].device() == destination);
        CHECK(got[j].is_contiguous());
        CHECK_FALSE(got[j].is_alias_of(g0[j]));
      }
      if (j < cpu0.size()) CHECK(values(got[j]) == sum_of(cpu0[j], cpu1[j], cpu0[j].dtype()));
    }
    CHECK(values(g0[0]) == values(cpu0[0]));  // inputs untouched
    CHECK(values(g1[0]) == values(cpu1[0]));
  }
}

TEST_CASE("reduce_add_coalesced through NCCL sums the dtypes the GPU cannot add yet",
          "[cuda][nccl][multi-gpu]") {
  if (!two_gpus()) return;
  uint32_t seed = 300;
  std::vector<Tensor> cpu0, cpu1, g0, g1;
  for (DType dtype : {octo::kInt32, octo::kUInt8, octo::kBFloat16, octo::kFloat16}) {
    cpu0.push_back(random_cpu({9, 4}, dtype, seed++));
    cpu1.push_back(random_cpu({9, 4}, dtype, seed++));
    g0.push_back(cpu0.back().to(kGpu0));
    g1.push_back(cpu1.back().to(kGpu1));
  }
  auto got = comm::reduce_add_coalesced({g0, g1}, kGpu1);
  for (size_t j = 0; j < got.size(); ++j) {
    CAPTURE(std::string(octo::dtype_name(cpu0[j].dtype())));
    CHECK(got[j].device() == kGpu1);
    CHECK(got[j].dtype() == cpu0[j].dtype());
    CHECK(values(got[j]) == sum_of(cpu0[j], cpu1[j], cpu0[j].dtype()));
  }
}

namespace {

struct Step {
  Tensor output;
  std::vector<Tensor> grads;
};

/// One forward and backward of an Mlp (float64, seeded) on cuda:0, through DataParallel over
/// `devices` (or directly when empty).
Step mlp_step(const std::vector<Device>& devices, const Tensor& x, const Tensor& y) {
  octo::manual_seed(5);
  auto model = std::make_shared<test_models::Mlp>(6, 16, 3);
  model->to(kGpu0, octo::kFloat64);
  Tensor out;
  if (devices.empty()) {
    out = model->forward(x);
  } else {
    octo::parallel::DataParallel dp(model, devices);
    out = dp.forward(x);
  }
  octo::mean(octo::square(out - y)).backward();
  Step s{out.detach(), {}};
  for (const Tensor& p : model->parameters()) s.grads.push_back(p.grad());
  return s;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  std::vector<double> x = values(a), y = values(b);
  REQUIRE(x.size() == y.size());
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::fabs(x[i] - y[i]));
  return worst;
}

}  // namespace

TEST_CASE("DataParallel on cuda:0 and cuda:1 equals one device", "[cuda][nccl][multi-gpu]") {
  if (!two_gpus()) return;
  octo::manual_seed(11);
  Tensor x = octo::randn({10, 6}, {.dtype = octo::kFloat64}).to(kGpu0);
  Tensor y = octo::randn({10, 3}, {.dtype = octo::kFloat64}).to(kGpu0);
  const Step one = mlp_step({}, x, y);
  Step two;
  const std::string trace = trace_of([&] { two = mlp_step({kGpu0, kGpu1}, x, y); });
  CHECK_THAT(trace, Catch::Contains("\"name\": \"nccl_reduce_add\""));
  const Step copies = without_nccl([&] { return mlp_step({kGpu0, kGpu1}, x, y); });
  CHECK(two.output.device() == kGpu0);
  CHECK(max_abs_diff(two.output, one.output) <= 1e-12);
  REQUIRE(two.grads.size() == one.grads.size());
  for (size_t i = 0; i < one.grads.size(); ++i) {
    CAPTURE(i);
    REQUIRE(two.grads[i].defined());
    CHECK(two.grads[i].device() == kGpu0);
    CHECK(max_abs_diff(two.grads[i], one.grads[i]) <= 1e-12);
    // Two addends sum the same in any order: NCCL and the copy path agree to the bit, up to
    // the replicas' own kernels.
    CHECK(max_abs_diff(two.grads[i], copies.grads[i]) <= 1e-15);
  }
}
