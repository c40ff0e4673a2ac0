// CPU benchmark suite, octo's half (bench/torch_cpu.py is PyTorch's): per-op overhead, SGEMM and
// conv2d GFLOP/s against the FP32 peak measured in the same run, the examples' training steps and
// DataParallel on cpu:0,cpu:1. Prints one JSON object per line, one per measurement; progress
// goes to stderr. bench/run.py runs it at 1 and 2 threads and joins it with the PyTorch twin.
//
//   ./build/bench/bench_cpu --threads 2 [--quick] [--only peak,op,sgemm,conv,prep,bnrelu,train,dp]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <octo/octo.h>

#include "bench/fp32_peak.h"
#include "examples/cifar10/models.h"
#include "examples/mnist/models.h"

using octo::Tensor;
namespace nn = octo::nn;
namespace F = octo::nn::functional;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// Seconds of one call of `fn`: `warmup` untimed calls, then the median of `reps` timed ones.
double time_median(const std::function<void()>& fn, int warmup, int reps) {
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto t0 = Clock::now();
    fn();
    t.push_back(seconds_since(t0));
  }
  return median(t);
}

int g_threads = 1;

/// One measurement as a JSON line on stdout (all string fields are plain ASCII, no escaping).
void emit(const std::string& bench, const std::string& config, double value, const char* unit,
          int reps) {
  std::printf(
      "{\"framework\": \"octo\", \"bench\": \"%s\", \"config\": \"%s\", \"threads\": %d, \"value\": %.6g, \"unit\": \"%s\", \"reps\": %d}\n",
      bench.c_str(), config.c_str(), g_threads, value, unit, reps);
  std::fflush(stdout);
  std::fprintf(stderr, "  octo %-14s %-28s %d thr: %10.2f %s\n", bench.c_str(), config.c_str(),
               g_threads, value, unit);
}

/// Forward + backward of one 8x8 float32 add with autograd, in microseconds per op: a chain of
/// `n` adds h = h + x, then h.sum().backward(), timed as a whole and divided by n.
void bench_op_overhead(bool quick) {
  const int n = 1000, reps = quick ? 7 : 21;
  Tensor x = octo::randn({8, 8}).requires_grad_();
  Tensor h0 = octo::randn({8, 8});
  double s = time_median(
      [&] {
        Tensor h = h0;
        for (int i = 0; i < n; ++i) h = h + x;
        h.sum().backward();
        x.grad().zero_();
      },
      3, reps);
  emit("op_overhead", "8x8 add fwd+bwd", s / n * 1e6, "us/op", reps);
}

void bench_peak() {
  double g = octo::bench::fma_loop_gflops(g_threads, 20'000'000, 5);
  emit("fp32_peak", "FMA loop", g, "GFLOP/s", 5);
}

void bench_sgemm(bool quick) {
  const int64_t n = 1024;
  const int reps = quick ? 5 : 15;
  octo::NoGradGuard no_grad;
  Tensor a = octo::randn({n, n}), b = octo::randn({n, n});
  double s = time_median([&] { Tensor c = octo::matmul(a, b); }, 2, reps);
  emit("sgemm", "1024^3", 2.0 * n * n * n / s / 1e9, "GFLOP/s", reps);
}

/// The MNIST CNN's largest conv layer (by flops) at batch 128: LeNet width 2's second conv,
/// 12 -> 32 channels, 5x5, no padding, on 14x14 inputs (10x10 outputs); forward only.
void bench_conv(bool quick) {
  const int64_t b = 128, cin = 12, cout = 32, k = 5, hw = 14, out_hw = hw - k + 1;
  const int reps = quick ? 5 : 15;
  octo::NoGradGuard no_grad;
  Tensor x = octo::randn({b, cin, hw, hw}), w = octo::randn({cout, cin, k, k}),
         bias = octo::randn({cout});
  double s = time_median([&] { Tensor y = octo::conv2d(x, w, bias, {1, 1}, {0, 0}); }, 2, reps);
  double flops = 2.0 * b * cout * out_hw * out_hw * cin * k * k;
  emit("conv2d", "128x12x14x14 * 32x12x5x5", flops / s / 1e9, "GFLOP/s", reps);
}

/// Preparing a batch the way the examples' loaders do: uint8 images -> float32, normalised per
/// channel, in microseconds per batch of 128 (MNIST [128, 1, 28, 28], CIFAR-10 [128, 3, 32, 32]).
/// "prep_*" is normalize on the uint8 batch (Note [One-pass normalize]); "prep_*_composite" is
/// normalize(to_float(x)), four passes, for comparison.
void bench_prep(bool quick) {
  const int reps = quick ? 31 : 101;
  struct Case {
    const char* name;
    octo::Shape shape;
    std::vector<double> mean, std;
  };
  const std::vector<Case> cases = {
      {"prep_mnist", {128, 1, 28, 28}, {0.5}, {0.5}},
      {"prep_cifar", {128, 3, 32, 32}, {0.4914, 0.4822, 0.4465}, {0.2470, 0.2435, 0.2616}}};
  for (const Case& c : cases) {
    Tensor u8 = octo::randint(0, 256, c.shape).to(octo::kUInt8);
    const std::string config = octo::shape_str(c.shape) + " uint8";
    double one = time_median([&] { Tensor x = octo::data::normalize(u8, c.mean, c.std); }, 5, reps);
    double composite = time_median(
        [&] { Tensor x = octo::data::normalize(octo::data::to_float(u8), c.mean, c.std); }, 5,
        reps);
    emit(c.name, config, one * 1e6, "us/batch", reps);
    emit(std::string(c.name) + "_composite", config, composite * 1e6, "us/batch", reps);
  }
}

/// BatchNorm2d + ReLU forward and backward in training, as in the MNIST CNN's first block (LeNet
/// width 2: [128, 12, 28, 28]), in microseconds: "bn_relu" is the fused batch_norm_relu (Note
/// [Fused batch norm + ReLU]), "bn_relu_composite" relu(batch_norm(...)), two ops.
void bench_bn_relu(bool quick) {
  const int reps = quick ? 11 : 41;
  const octo::Shape shape{128, 12, 28, 28};
  Tensor x = octo::randn(shape).requires_grad_();
  Tensor w = octo::ones({12}).requires_grad_(), b = octo::zeros({12}).requires_grad_();
  Tensor rm = octo::zeros({12}), rv = octo::ones({12});
  Tensor g = octo::randn(shape);
  const std::string config = octo::shape_str(shape) + " fwd+bwd";
  for (bool fused : {true, false}) {
    double s = time_median(
        [&] {
          Tensor y = fused ? F::batch_norm_relu(x, rm, rv, w, b, true)
                           : octo::relu(F::batch_norm(x, rm, rv, w, b, true));
          y.backward(g);
          for (const Tensor* t : {&x, &w, &b}) t->set_grad(Tensor());
        },
        3, reps);
    emit(fused ? "bn_relu" : "bn_relu_composite", config, s * 1e6, "us/iter", reps);
  }
}

/// Samples/s of one training step (zero_grad, forward, cross-entropy, backward, SGD with Nesterov
/// momentum 0.9 and weight decay 5e-4, as the examples) on one fixed random batch, median over
/// timed steps after warm-up. `runner` is the model itself or a DataParallel around it; `amp`
/// runs forward and loss under octo::autocast in that dtype, as the examples' --amp.
double train_rate(const std::shared_ptr<nn::Module>& model, nn::Module& runner,
                  const octo::Shape& shape, const F::CrossEntropyOptions& loss_options, int warmup,
                  int reps, std::optional<octo::DType> amp = std::nullopt) {
  octo::manual_seed(0);
  model->train();
  octo::optim::SGD opt(model->parameters(),
                       {.lr = 0.01, .momentum = 0.9, .weight_decay = 5e-4, .nesterov = true});
  Tensor x = octo::randn(shape);
  Tensor y = octo::randint(0, 10, {shape[0]}, {.dtype = octo::kInt64});
  double s = time_median(
      [&] {
        opt.zero_grad();
        Tensor loss;
        {
          std::optional<octo::autocast> cast;
          if (amp) cast.emplace(*amp);
          loss = F::cross_entropy(runner.forward(x), y, loss_options);
        }
        loss.backward();
        opt.step();
      },
      warmup, reps);
  return double(shape[0]) / s;
}

/// The training rows `want` names: all of them for "train", or single rows by name.
void bench_train(bool quick, const std::function<bool(const char*)>& want) {
  const int64_t batch = 128;
  struct Row {
    const char* name;
    octo::Shape shape;
    std::function<std::shared_ptr<nn::Module>()> make;
    F::CrossEntropyOptions loss;
    int reps;
    std::optional<octo::DType> amp = std::nullopt;
  };
  std::vector<Row> rows = {
      {"train_mlp", {batch, 1, 28, 28}, [] { return std::make_shared<examples::Mlp>(); }, {}, 50},
      {"train_mlp_bf16",
       {batch, 1, 28, 28},
       [] { return std::make_shared<examples::Mlp>(); },
       {},
       50,
       octo::kBFloat16},
      {"train_cnn",
       {batch, 1, 28, 28},
       [] { return std::make_shared<examples::LeNet>(2, true); },
       {},
       20},
      {"train_cnn_bf16",
       {batch, 1, 28, 28},
       [] { return std::make_shared<examples::LeNet>(2, true); },
       {},
       20,
       octo::kBFloat16},
      {"train_cifar10",
       {batch, 3, 32, 32},
       [] { return std::make_shared<examples::ResNet9>(16); },
       {.label_smoothing = 0.2},
       5},
  };
  for (auto& r : rows) {
    if (!want("train") && !want(r.name)) continue;
    int reps = quick ? std::max(3, r.reps / 4) : r.reps;
    auto model = r.make();
    double rate = train_rate(model, *model, r.shape, r.loss, quick ? 2 : 5, reps, r.amp);
    emit(r.name, "batch 128", rate, "samples/s", reps);
  }
}

/// The MNIST CNN on DataParallel over cpu:0,cpu:1 against one device using all g_threads threads.
void bench_dp(bool quick) {
  const octo::Shape shape{128, 1, 28, 28};
  const int reps = quick ? 5 : 20, warmup = quick ? 2 : 5;
  auto model = std::make_shared<examples::LeNet>(2, true);
  double one = train_rate(model, *model, shape, {}, warmup, reps);
  emit("dp_one_device", "cnn batch 128", one, "samples/s", reps);
  octo::parallel::DataParallel dp(model, {octo::Device("cpu:0"), octo::Device("cpu:1")});
  double two = train_rate(model, dp, shape, {}, warmup, reps);
  emit("dp_cpu0_cpu1", "cnn batch 128", two, "samples/s", reps);
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  std::string only = "peak,op,sgemm,conv,prep,bnrelu,train,dp";
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick"))
      quick = true;
    else if (!std::strcmp(argv[i], "--threads") && i + 1 < argc)
      g_threads = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--only") && i + 1 < argc)
      only = argv[++i];
    else {
      std::fprintf(
          stderr,
          "usage: %s --threads N [--quick] [--only peak,op,sgemm,conv,prep,bnrelu,train,dp]\n"
          "  (train rows one at a time: train_mlp, train_mlp_bf16, train_cnn, train_cnn_bf16, train_cifar10)\n",
          argv[0]);
      return 2;
    }
  }
  if (g_threads < 1) g_threads = 1;
  octo::set_num_threads(g_threads);
  octo::manual_seed(0);
  auto want = [&](const char* what) {
    return ("," + only + ",").find(std::string(",") + what + ",") != std::string::npos;
  };
  std::fprintf(stderr, "bench_cpu: %d thread(s)%s, %s\n", g_threads, quick ? ", quick" : "",
               octo::bench::cpuinfo_model().c_str());
  if (want("peak")) bench_peak();
  if (want("op")) bench_op_overhead(quick);
  if (want("sgemm")) bench_sgemm(quick);
  if (want("conv")) bench_conv(quick);
  if (want("prep")) bench_prep(quick);
  if (want("bnrelu")) bench_bn_relu(quick);
  bench_train(quick, want);
  if (want("dp")) bench_dp(quick);
  if (want("peak")) bench_peak();  // again: the best of the two is the run's peak
  return 0;
}
