// GPU benchmark on cuda:0: SGEMM TFLOP/s (fp32, bf16 if supported) and MLP / CNN training
// samples/s.
//
//   ./build/bench/bench_gpu            # about 20 s on an H100/H200
//   ./build/bench/bench_gpu --quick    # fewer repeats, no 8192^3
//
// Prints one markdown table (the same columns as tools/bench_torch.py) so tools/gpu_check.sh can
// paste it into its report. Exits 77 (meson's "skipped") when no CUDA device is visible, and 1
// when a benchmark that should run failed. Features the CUDA backend does not have yet (bfloat16
// GEMM, conv2d) are tried and reported as "not available", never faked.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <octo/octo.h>

#include "kernels/cuda/stream.h"

using octo::Tensor;
namespace nn = octo::nn;
namespace F = octo::nn::functional;

namespace {

// Datasheet dense FP32 (non-tensor-core) peak of an H100/H200 SXM: 67 TFLOP/s. The CUDA runtime
// does not report a peak (cudaGetDeviceProperties has no clock on recent toolkits without the
// driver API), so this is printed as a datasheet figure, never as a measurement.
constexpr double kDatasheetFp32Tflops = 67.0;

const octo::Device kGpu("cuda:0");
bool g_failed = false;

struct Stats {
  double best = 0, median = 0;
};

Stats stats_of(std::vector<double> v) {  // v: rates, higher is better
  std::sort(v.begin(), v.end());
  return {v.back(), v[v.size() / 2]};
}

void header() {
  std::printf("| framework | benchmark | config | best | median | unit | note |\n");
  std::printf("|---|---|---|---:|---:|---|---|\n");
}

void row(const char* bench, const std::string& config, Stats s, const char* unit,
         const std::string& note) {
  std::printf("| octo | %s | %s | %.1f | %.1f | %s | %s |\n", bench, config.c_str(), s.best,
              s.median, unit, note.c_str());
  std::fflush(stdout);
}

void row_na(const char* bench, const std::string& config, const std::string& note) {
  std::printf("| octo | %s | %s | - | - | - | %s |\n", bench, config.c_str(), note.c_str());
  std::fflush(stdout);
}

/// One line of an exception message, with '|' replaced so it cannot break the table.
std::string one_line(const char* what) {
  std::string s(what);
  if (auto nl = s.find('\n'); nl != std::string::npos) s.resize(nl);
  std::replace(s.begin(), s.end(), '|', '/');
  return s;
}

/// TFLOP/s of n x n x n matmuls in `dtype` on cuda:0: `warmup` untimed calls, then `reps` calls
/// each timed between two CUDA events on the current stream (kernel time, queued back to back).
Stats time_matmul(int64_t n, octo::DType dtype, int warmup, int reps) {
  octo::NoGradGuard no_grad;
  // float32 is drawn on the GPU; other dtypes are converted on the host on the way over, as in
  // the bfloat16 probe (the CUDA elementwise kernels do not cover every dtype).
  auto make = [&] {
    return dtype == octo::kFloat32 ? octo::randn({n, n}, {.device = kGpu})
                                   : octo::randn({n, n}).to(kGpu, dtype);
  };
  Tensor a = make(), b = make();
  for (int i = 0; i < warmup; ++i) (void)octo::matmul(a, b);
  octo::synchronize(kGpu);
  std::vector<octo::cuda::Event> start, stop;
  for (int i = 0; i < reps; ++i) {
    start.emplace_back(true);
    stop.emplace_back(true);
  }
  auto stream = octo::cuda::current_stream(0);
  for (int i = 0; i < reps; ++i) {
    start[i].record(stream);
    (void)octo::matmul(a, b);
    stop[i].record(stream);
  }
  octo::synchronize(kGpu);
  std::vector<double> tflops;
  double flops = 2.0 * double(n) * double(n) * double(n);
  for (int i = 0; i < reps; ++i)
    tflops.push_back(flops / (start[i].elapsed_time(stop[i]) * 1e-3) / 1e12);
  return stats_of(tflops);
}

/// max |gpu - cpu| / max |cpu| of a 256 x 320 x 192 float32 matmul: a wrong kernel must not
/// produce a fast-looking number unnoticed.
double check_matmul() {
  octo::NoGradGuard no_grad;
  Tensor a = octo::randn({256, 320}), b = octo::randn({320, 192});
  Tensor ref = octo::matmul(a, b);
  Tensor got = octo::matmul(a.to(kGpu), b.to(kGpu)).cpu();
  double diff = octo::max(octo::abs(got - ref)).item<double>();
  double scale = octo::max(octo::abs(ref)).item<double>();
  return diff / scale;
}

// The MLP of examples/mnist: 784 -> 256 -> 128 -> 10 with ReLU.
struct Mlp : nn::Cloneable<Mlp> {
  Mlp() : Cloneable("Mlp") { reset(); }
  void reset() override {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(784, 256));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(256, 128));
    fc3 = register_module("fc3", std::make_shared<nn::Linear>(128, 10));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = octo::relu(fc1->forward(x.flatten(1)));
    return fc3->forward(octo::relu(fc2->forward(h)));
  }
  std::shared_ptr<nn::Linear> fc1, fc2, fc3;
};

// LeNet-5 style on 1x28x28 (as examples/mnist --model cnn --no-batchnorm, width 1).
struct LeNet : nn::Cloneable<LeNet> {
  LeNet() : Cloneable("LeNet") { reset(); }
  void reset() override {
    c1 = register_module("c1",
                         std::make_shared<nn::Conv2d>(1, 6, 5, nn::Conv2dOptions{.padding = 2}));
    c2 = register_module("c2", std::make_shared<nn::Conv2d>(6, 16, 5));
    f1 = register_module("f1", std::make_shared<nn::Linear>(16 * 5 * 5, 120));
    f2 = register_module("f2", std::make_shared<nn::Linear>(120, 84));
    f3 = register_module("f3", std::make_shared<nn::Linear>(84, 10));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = octo::max_pool2d(octo::relu(c1->forward(x)), {2, 2});
    h = octo::max_pool2d(octo::relu(c2->forward(h)), {2, 2});
    return f3->forward(octo::relu(f2->forward(octo::relu(f1->forward(h.flatten(1))))));
  }
  std::shared_ptr<nn::Conv2d> c1, c2;
  std::shared_ptr<nn::Linear> f1, f2, f3;
};

/// samples/s of a training step (forward, cross-entropy, backward, SGD with momentum) on `device`:
/// 5 warm-up steps, then `chunks` chunks of `steps` steps, each chunk timed with the wall clock
/// between two device synchronisations (so the GPU's queue is included, not just the launches).
Stats time_training(const std::shared_ptr<nn::Module>& model, octo::Device device,
                    const octo::Shape& input_shape, int chunks, int steps) {
  octo::manual_seed(0);
  model->to(device);
  octo::optim::SGD opt(model->parameters(),
                       {.lr = 0.01, .momentum = 0.9, .weight_decay = 5e-4, .nesterov = true});
  int64_t batch = input_shape[0];
  Tensor x = octo::randn(input_shape, {.device = device});
  Tensor y = octo::randint(0, 10, {batch}, {.dtype = octo::kInt64, .device = device});
  auto step = [&] {
    opt.zero_grad();
    Tensor loss = F::cross_entropy(model->forward(x), y);
    loss.backward();
    opt.step();
  };
  for (int i = 0; i < 5; ++i) step();
  octo::synchronize(device);
  std::vector<double> rates;
  for (int c = 0; c < chunks; ++c) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < steps; ++i) step();
    octo::synchronize(device);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rates.push_back(double(batch) * steps / s);
  }
  return stats_of(rates);
}

/// Runs one benchmark section; an unexpected error is reported in the table and fails the run.
void guarded(const char* bench, const std::string& config, const std::function<void()>& body) {
  try {
    body();
  } catch (const std::exception& e) {
    row_na(bench, config, "FAILED: " + one_line(e.what()));
    g_failed = true;
  }
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  if (!octo::cuda::is_available()) {
    std::printf("bench_gpu: no CUDA device visible (octo built with CUDA: %s); skipping\n",
                octo::cuda_hooks().is_built() ? "yes" : "no");
    return 77;
  }
  std::string name = octo::cuda_hooks().device_name(0);
  std::printf("bench_gpu: cuda:0 = %s (%d visible GPU(s)), octo %s\n", name.c_str(),
              octo::cuda::device_count(), OCTO_VERSION);
  std::printf(
      "FP32 peak: %.0f TFLOP/s dense FP32 is the H100/H200 SXM *datasheet* figure, not a "
      "measurement%s.\n",
      kDatasheetFp32Tflops,
      name.find("H100") != std::string::npos || name.find("H200") != std::string::npos
          ? ""
          : " (this GPU is not an H100/H200, so it may not apply)");
  std::printf(
      "SGEMM: octo::matmul -> cublasSgemmStridedBatched, CUBLAS_DEFAULT_MATH (no TF32), "
      "CUDA-event timing per call after warm-up.\n\n");
  octo::manual_seed(0);
  header();

  guarded("matmul check", "256x320x192 fp32", [] {
    double rel = check_matmul();
    bool ok = rel < 1e-4;
    row_na("matmul check", "256x320x192 fp32",
           std::string(ok ? "ok" : "FAILED") + ": max|gpu-cpu|/max|cpu| = " + std::to_string(rel));
    if (!ok) g_failed = true;
  });

  std::vector<int64_t> sizes =
      quick ? std::vector<int64_t>{4096} : std::vector<int64_t>{4096, 8192};
  for (int64_t n : sizes) {
    std::string config = std::to_string(n) + "^3";
    guarded("sgemm fp32", config, [&] {
      int reps = n <= 4096 ? (quick ? 10 : 30) : 10;
      Stats s = time_matmul(n, octo::kFloat32, 3, reps);
      char note[96];
      std::snprintf(note, sizeof note, "best = %.0f%% of datasheet %.0f",
                    100 * s.best / kDatasheetFp32Tflops, kDatasheetFp32Tflops);
      row("sgemm fp32", config, s, "TFLOP/s", note);
    });
  }

  // bfloat16: probe with a small product first; the CUDA backend's bmm is float32/float64 only
  // today, so this is expected to report "not supported" until a bf16 GEMM path exists.
  bool bf16 = false;
  try {
    octo::NoGradGuard no_grad;
    Tensor a = octo::randn({64, 64}).to(kGpu, octo::kBFloat16);
    (void)octo::matmul(a, a);
    octo::synchronize(kGpu);
    bf16 = true;
  } catch (const octo::Error& e) {
    row_na("matmul bf16", "-", "not supported by octo's CUDA backend: " + one_line(e.what()));
  }
  if (bf16) {
    for (int64_t n : sizes) {
      std::string config = std::to_string(n) + "^3";
      guarded("matmul bf16", config, [&] {
        row("matmul bf16", config, time_matmul(n, octo::kBFloat16, 3, 10), "TFLOP/s", "");
      });
    }
  }

  int chunks = quick ? 3 : 5;
  for (int64_t batch : {64, 512}) {
    std::string config = "batch " + std::to_string(batch);
    guarded("mlp train cuda:0", config, [&] {
      Stats s = time_training(std::make_shared<Mlp>(), kGpu, {batch, 784}, chunks, 50);
      row("mlp train cuda:0", config, s, "samples/s", "784-256-128-10, CE, SGD nesterov");
    });
  }
  {
    int threads = octo::get_num_threads();
    std::string config = "batch 512";
    guarded("mlp train cpu", config, [&] {
      Stats s = time_training(std::make_shared<Mlp>(), octo::kCPU, {512, 784}, 3, 10);
      row("mlp train cpu", config, s, "samples/s",
          "same step, " + std::to_string(threads) + " CPU threads");
    });
  }

  // CNN: conv2d / pooling / batch norm have no CUDA kernels yet (cuDNN pending); report that
  // instead of a number. If they appear, this times them without any change here.
  {
    std::string config = "LeNet batch 64";
    try {
      Stats s = time_training(std::make_shared<LeNet>(), kGpu, {64, 1, 28, 28}, chunks, 20);
      row("cnn train cuda:0", config, s, "samples/s", "LeNet-5 1x28x28, no BN");
    } catch (const octo::NotImplementedError& e) {
      std::string what = one_line(e.what());
      row_na("cnn train cuda:0", config,
             what.find("conv2d") != std::string::npos
                 ? "not available: conv2d has no CUDA kernel yet (" + what + ")"
                 : "not available: " + what);
    } catch (const std::exception& e) {
      row_na("cnn train cuda:0", config, "FAILED: " + one_line(e.what()));
      g_failed = true;
    }
  }
  return g_failed ? 1 : 0;
}
