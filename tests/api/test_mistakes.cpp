// The typical mistakes, one table: each public entry point is fed a wrong shape, dtype, device,
// size or option value, and must throw an octo::Error of the right type whose message names what
// was expected or found -- never crash, hang or succeed.
#include <catch2/catch.hpp>

#include <functional>
#include <limits>
#include <string>
#include <typeinfo>

#include <octo/octo.h>

using octo::Device;
using octo::Tensor;
namespace nn = octo::nn;
namespace F = octo::nn::functional;

namespace {

enum class Kind { Value, Index, Device, OutOfMemory, IO, Any };

struct Mistake {
  const char* what;
  Kind kind;
  const char* message_contains;
  std::function<void()> call;
};

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::Value:
      return "ValueError";
    case Kind::Index:
      return "IndexError";
    case Kind::Device:
      return "DeviceError";
    case Kind::OutOfMemory:
      return "OutOfMemoryError";
    case Kind::IO:
      return "IOError";
    case Kind::Any:
      return "Error";
  }
  return "?";
}

bool is_kind(const octo::Error& e, Kind k) {
  switch (k) {
    case Kind::Value:
      return dynamic_cast<const octo::ValueError*>(&e) != nullptr;
    case Kind::Index:
      return dynamic_cast<const octo::IndexError*>(&e) != nullptr;
    case Kind::Device:
      return dynamic_cast<const octo::DeviceError*>(&e) != nullptr;
    case Kind::OutOfMemory:
      return dynamic_cast<const octo::OutOfMemoryError*>(&e) != nullptr;
    case Kind::IO:
      return dynamic_cast<const octo::IOError*>(&e) != nullptr;
    case Kind::Any:
      return true;
  }
  return false;
}

const Tensor a23 = octo::randn({2, 3});
const Tensor a45 = octo::randn({4, 5});

std::vector<Mistake> mistakes() {
  return {
      // tensors and ops
      {"matmul of [2, 3] and [4, 5]", Kind::Value, "[2, 3]", [] { octo::matmul(a23, a45); }},
      {"add on cpu:0 and cpu:1", Kind::Device, "cpu:0 and cpu:1",
       [] {
         (void)(a23 + octo::randn({2, 3}).to(Device("cpu:1")));
       }},
      {"add of [2, 3] and [4, 5]", Kind::Value, "[2, 3]", [] { (void)(a23 + a45); }},
      {"view to a size that does not fit", Kind::Any, "[7]", [] { a23.view({7}); }},
      {"negative size", Kind::Value, "-3",
       [] {
         octo::zeros({2, -3});
       }},
      {"a size whose element count overflows", Kind::Value, "64 bits",
       [] {
         octo::empty({int64_t{1} << 40, int64_t{1} << 40});
       }},
      {"1 TiB on the CPU", Kind::OutOfMemory, "", [] { octo::empty({int64_t{1} << 38}); }},
      {"arange of 2^50 values", Kind::OutOfMemory, "",
       [] { octo::arange(int64_t{1} << 50, {.dtype = octo::kFloat32}); }},
      {"arange to infinity", Kind::Value, "finite",
       [] { octo::arange(0.0, std::numeric_limits<double>::infinity()); }},
      {"eye whose element count overflows", Kind::Value, "64 bits",
       [] { octo::eye(int64_t{1} << 40, int64_t{1} << 40); }},
      {"randperm of 2^50", Kind::OutOfMemory, "", [] { octo::randperm(int64_t{1} << 50); }},
      {"narrow past the end by an overflowing length", Kind::Index, "exceeds",
       [] { a23.narrow(1, 1, std::numeric_limits<int64_t>::max()); }},
      {"split_with_sizes whose sum overflows", Kind::Value, "64 bits",
       [] {
         int64_t big = int64_t{1} << 62;
         octo::split_with_sizes(octo::zeros({4}), {big, big, big, big, 4});
       }},
      {"reshape to sizes whose product overflows", Kind::Value, "invalid for input of size 6",
       [] {
         a23.reshape({int64_t{1} << 62, int64_t{1} << 62, 0});
       }},
      {"split of an expanded dim of 2^62 into pieces of 1", Kind::OutOfMemory,
       "4611686018427387904 pieces",
       [] { octo::split(octo::ones({1}).expand({int64_t{1} << 62}), 1); }},
      {"an empty shape whose strides overflow", Kind::Value, "strides overflow",
       [] {
         octo::empty({0, int64_t{1} << 62, int64_t{1} << 62});
       }},
      {"conv2d groups whose channel count overflows", Kind::Value, "more than 2^63",
       [] {
         octo::conv2d(octo::zeros({1, 4, 3, 3}), octo::zeros({4, 2, 1, 1}), {}, {1, 1}, {0, 0},
                      {1, 1}, int64_t{1} << 62);
       }},
      {"adaptive_avg_pool2d to 2^40 columns", Kind::OutOfMemory, "",
       [] {
         octo::adaptive_avg_pool2d(octo::zeros({1, 1, 3, 3}), {2, int64_t{1} << 40});
       }},
      {"max_pool2d whose dilation overflows the window", Kind::Value, "past 64 bits",
       [] {
         const int64_t huge = std::numeric_limits<int64_t>::max() - 1;
         octo::max_pool2d(octo::zeros({1, 1, 4, 4}), {4, 4}, {1, 1}, {0, 0}, {huge, huge});
       }},
      {"expand to a negative size other than -1", Kind::Value, "size -2 at dimension 1",
       [] {
         octo::ones({1}).expand({3, -2});
       }},
      {"expand whose element count overflows", Kind::Value, "64 bits",
       [] {
         octo::ones({1}).expand({int64_t{1} << 40, int64_t{1} << 40});
       }},
      {"chunk of an empty dim into 2^62 pieces", Kind::OutOfMemory, "4611686018427387904 pieces",
       [] { octo::chunk(octo::zeros({0}), int64_t{1} << 62); }},
      {"dim out of range", Kind::Index, "3", [] { a23.sum(octo::Shape{3}); }},
      {"select index out of range", Kind::Index, "5", [] { a23.select(0, 5); }},
      {"max of an empty tensor", Kind::Any, "", [] { octo::zeros({0}).max(); }},
      {"item of a tensor of 6 elements", Kind::Any, "6", [] { a23.item<float>(); }},
      {"backward of a non-scalar", Kind::Any, "[2, 3]",
       [] {
         octo::randn({2, 3}).requires_grad_().mul(octo::full({2, 3}, 2.0)).backward();
       }},
      {"softmax over dim 2 of a 2-d tensor", Kind::Index, "2", [] { octo::softmax(a23, 2); }},
      {"conv2d with 3 input channels for a 1-channel weight", Kind::Value, "",
       [] {
         octo::conv2d(octo::randn({1, 3, 8, 8}), octo::randn({4, 1, 3, 3}));
       }},
      {"max_pool2d with a zero kernel", Kind::Value, "",
       [] {
         octo::max_pool2d(octo::randn({1, 1, 4, 4}), {0, 0});
       }},
      {"cross_entropy with a target out of range", Kind::Any, "",
       [] {
         F::cross_entropy(octo::randn({2, 3}), octo::full({2}, 7, {.dtype = octo::kInt64}));
       }},
      {"cross_entropy with float targets of the wrong shape", Kind::Value, "",
       [] {
         F::cross_entropy(octo::randn({2, 3}), octo::randn({5}));
       }},
      {"a device string that is not one", Kind::Any, "tpu", [] { Device("tpu:0"); }},
      {"a cuda device in a build or machine without it", Kind::Device, "",
       [] { octo::zeros({2}).to(Device("cuda:7")); }},
      // nn
      {"Linear(3, 4) on [2, 5]", Kind::Value, "",
       [] {
         nn::Linear(3, 4).forward(octo::randn({2, 5}));
       }},
      {"Linear with 0 input features", Kind::Value, "", [] { nn::Linear(0, 4); }},
      {"Conv2d on a 2-d input", Kind::Value, "",
       [] {
         nn::Conv2d(1, 2, 3).forward(octo::randn({8, 8}));
       }},
      {"Conv2d on 2 channels for 1", Kind::Value, "",
       [] {
         nn::Conv2d(1, 2, 3).forward(octo::randn({1, 2, 8, 8}));
       }},
      {"load_state_dict with a wrong shape", Kind::Value, "size mismatch",
       [] {
         nn::Linear(3, 4).load_state_dict(
             {{"weight", octo::zeros({4, 4})}, {"bias", octo::zeros({4})}});
       }},
      // optim
      {"SGD with a negative learning rate", Kind::Value, "-1",
       [] {
         nn::Linear l(2, 2);
         octo::optim::SGD(l.parameters(), {.lr = -1});
       }},
      {"Adam with beta1 = 1", Kind::Value, "",
       [] {
         nn::Linear l(2, 2);
         octo::optim::Adam(l.parameters(), {.lr = 1e-3, .betas = {1.0, 0.999}});
       }},
      {"SGD with a NaN learning rate", Kind::Value, "",
       [] {
         nn::Linear l(2, 2);
         octo::optim::SGD(l.parameters(), {.lr = std::nan("")});
       }},
      // mixed precision
      {"autocast in float32", Kind::Value, "bfloat16 or float16",
       [] { octo::autocast amp(octo::kFloat32); }},
      {"GradScaler with a zero init_scale", Kind::Value, "init_scale",
       [] { octo::GradScaler({.init_scale = 0}); }},
      {"GradScaler with a backoff_factor above 1", Kind::Value, "backoff_factor",
       [] { octo::GradScaler({.backoff_factor = 2}); }},
      {"GradScaler.update before any step", Kind::Value, "step()",
       [] {
         octo::GradScaler scaler;
         scaler.update();
       }},
      {"GradScaler.step twice in one iteration", Kind::Value, "already",
       [] {
         nn::Linear l(2, 2);
         octo::optim::SGD opt(l.parameters(), {.lr = 0.1});
         octo::GradScaler scaler;
         scaler.scale(l.forward(octo::randn({3, 2})).sum()).backward();
         scaler.step(opt);
         scaler.step(opt);
       }},
      {"GradScaler.scale of an integer loss", Kind::Value, "int64",
       [] { octo::GradScaler().scale(octo::ones({1}, {.dtype = octo::kInt64})); }},
      {"batch_norm_relu with a weight for 5 channels on 3", Kind::Value, "batch_norm_relu",
       [] {
         F::batch_norm_relu(octo::randn({4, 3, 2, 2}), {}, {}, octo::ones({5}), octo::zeros({3}),
                            /*training=*/true, 0.1, 1e-5);
       }},
      // data and files
      {"DataLoader with batch_size 0", Kind::Value, "batch",
       [] {
         auto ds =
             std::make_shared<octo::data::TensorDataset>(octo::zeros({4, 2}), octo::zeros({4}));
         octo::data::DataLoader(ds, {.batch_size = 0});
       }},
      {"TensorDataset of 4 inputs and 3 targets", Kind::Value, "",
       [] {
         octo::data::TensorDataset(octo::zeros({4, 2}), octo::zeros({3}));
       }},
      {"read_idx of a missing file", Kind::IO, "/nonexistent",
       [] { octo::data::read_idx("/nonexistent/x.idx"); }},
      {"load_safetensors of a missing file", Kind::IO, "/nonexistent",
       [] { octo::load_safetensors("/nonexistent/x.safetensors"); }},
      {"load_safetensors of a directory", Kind::IO, "/tmp", [] { octo::load_safetensors("/tmp"); }},
      {"save_safetensors onto /dev/null", Kind::IO, "not a regular file",
       [] {
         octo::save_safetensors({{"t", octo::ones({1})}}, "/dev/null");
       }},
      {"save_safetensors with an empty name", Kind::Value, "",
       [] {
         octo::save_safetensors({{"", octo::ones({1})}}, "/tmp/octo_mistake.safetensors");
       }},
      // parallel
      {"DataParallel with a repeated device", Kind::Value, "repeat",
       [] {
         auto m = std::make_shared<nn::Linear>(2, 2);
         octo::parallel::DataParallel(m, {Device("cpu:0"), Device("cpu:0")});
       }},
      {"DataParallel with the model elsewhere", Kind::Device, "Move the model first",
       [] {
         auto m = std::make_shared<nn::Linear>(2, 2);
         octo::parallel::DataParallel dp(m, {Device("cpu:1"), Device("cpu:2")});
         dp.forward(octo::randn({4, 2}));
       }},
      {"DataParallel of a null module", Kind::Value, "null",
       [] { octo::parallel::DataParallel(nullptr, {Device("cpu:0")}); }},
      {"DistributedDataParallel before init_process_group", Kind::Any, "init_process_group",
       [] { octo::distributed::DistributedDataParallel(std::make_shared<nn::Linear>(2, 2)); }},
      {"get_rank before init_process_group", Kind::Any, "init_process_group",
       [] { octo::distributed::get_rank(); }},
  };
}

}  // namespace

TEST_CASE("every typical mistake gets a clear error of the right type") {
  for (const Mistake& m : mistakes()) {
    INFO(m.what);
    bool threw = false;
    try {
      m.call();
    } catch (const octo::Error& e) {
      threw = true;
      INFO("got " << typeid(e).name() << ": " << e.msg());
      CHECK(is_kind(e, m.kind));
      CHECK(!e.msg().empty());
      CHECK(e.msg().find(m.message_contains) != std::string::npos);
    } catch (const std::exception& e) {
      threw = true;
      FAIL_CHECK("not an octo::Error (expected " << kind_name(m.kind) << "): " << e.what());
    }
    CHECK(threw);
  }
}
