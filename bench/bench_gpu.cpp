// GPU benchmark on cuda:0: GEMM TFLOP/s (float32 with TF32 off and on, bfloat16, float16) against
// the datasheet dense peaks, and training images/s of the examples' models.
//
//   ./build/bench/bench_gpu            # about half a minute on an H100/H200
//   ./build/bench/bench_gpu --quick    # fewer repeats, no 8192^3
//
// Prints one markdown table (the same columns as tools/bench_torch.py) so tools/gpu_check.sh can
// put the two side by side. Exits 77 (meson's "skipped") when no CUDA device is visible, and 1
// when a row failed; a failing row (an op the CUDA backend lacks, say) is reported as
// "failed: <what()>" and the remaining rows still run.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <octo/octo.h>

#include "examples/cifar10/models.h"
#include "examples/mnist/models.h"
#include "kernels/cuda/device_info.h"
#include "kernels/cuda/stream.h"

using octo::Tensor;
namespace nn = octo::nn;
namespace F = octo::nn::functional;

namespace {

// Dense (no sparsity) peak rates of an H100/H200 SXM in TFLOP/s, from NVIDIA's H100 and H200
// datasheets, which list tensor-core rates "with sparsity" (twice these): FP32 (no tensor cores)
// 67, TF32 989 sparse, BF16/FP16 1979 sparse. Printed as datasheet figures, never measured.
constexpr double kPeakFp32 = 67.0;
constexpr double kPeakTf32 = 494.7;
constexpr double kPeakBf16 = 989.4;
constexpr double kPeakFp16 = 989.4;

const octo::Device kGpu("cuda:0");
bool g_failed = false;

struct Stats {
  double median = 0, best = 0;
};

Stats stats_of(std::vector<double> v) {  // v: rates, higher is better
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.back()};
}

void header() {
  std::printf("| framework | benchmark | config | median | best | unit | %% of peak | note |\n");
  std::printf("|---|---|---|---:|---:|---|---:|---|\n");
}

void row(const std::string& bench, const std::string& config, Stats s, const char* unit,
         double peak, const std::string& note) {
  char pct[32] = "-";
  if (peak > 0) std::snprintf(pct, sizeof pct, "%.0f%%", 100 * s.median / peak);
  std::printf("| octo | %s | %s | %.1f | %.1f | %s | %s | %s |\n", bench.c_str(), config.c_str(),
              s.median, s.best, unit, pct, note.c_str());
  std::fflush(stdout);
}

void row_na(const std::string& bench, const std::string& config, const std::string& note) {
  std::printf("| octo | %s | %s | - | - | - | - | %s |\n", bench.c_str(), config.c_str(),
              note.c_str());
  std::fflush(stdout);
}

/// One line of an exception message, with '|' replaced so it cannot break the table.
std::string one_line(const char* what) {
  std::string s(what);
  if (auto nl = s.find('\n'); nl != std::string::npos) s.resize(nl);
  std::replace(s.begin(), s.end(), '|', '/');
  return s;
}

/// Runs one row; an exception becomes a "failed: <what()>" row and fails the run.
void guarded(const std::string& bench, const std::string& config,
             const std::function<void()>& body) {
  try {
    body();
  } catch (const std::exception& e) {
    row_na(bench, config, "failed: " + one_line(e.what()));
    g_failed = true;
  }
}

/// An [n, n] standard-normal matrix of `dtype` on cuda:0 (drawn in float32 and converted there:
/// never zeros, which can run faster than real data).
Tensor random_matrix(int64_t n, octo::DType dtype) {
  Tensor x = octo::randn({n, n}, {.device = kGpu});
  return dtype == octo::kFloat32 ? x : x.to(dtype);
}

/// TFLOP/s of n x n x n matmuls in `dtype`: `warmup` untimed calls, then `reps` calls each timed
/// between two CUDA events on the current stream (kernel time, queued back to back).
Stats time_matmul(int64_t n, octo::DType dtype, int warmup, int reps) {
  octo::NoGradGuard no_grad;
  Tensor a = random_matrix(n, dtype), b = random_matrix(n, dtype);
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
  const double flops = 2.0 * double(n) * double(n) * double(n);
  for (int i = 0; i < reps; ++i)
    tflops.push_back(flops / (start[i].elapsed_time(stop[i]) * 1e-3) / 1e12);
  return stats_of(tflops);
}

/// max |gpu - cpu| / max |cpu| of a 256 x 320 x 192 product of `dtype` inputs (16-bit inputs are
/// rounded first and multiplied in float32 on the CPU): a wrong kernel must not post a fast
/// number unnoticed.
double check_matmul(octo::DType dtype) {
  octo::NoGradGuard no_grad;
  Tensor a = octo::randn({256, 320}).to(dtype), b = octo::randn({320, 192}).to(dtype);
  Tensor ref = octo::matmul(a.to(octo::kFloat32), b.to(octo::kFloat32));
  Tensor got = octo::matmul(a.to(kGpu), b.to(kGpu)).to(octo::kCPU, octo::kFloat32);
  double diff = octo::max(octo::abs(got - ref)).item<double>();
  double scale = octo::max(octo::abs(ref)).item<double>();
  return diff / scale;
}

/// Sets octo::cuda::allow_tf32 for its lifetime, then restores the previous value.
class Tf32Scope {
 public:
  explicit Tf32Scope(bool allow) : previous_(octo::cuda::allow_tf32()) {
    octo::cuda::set_allow_tf32(allow);
  }
  ~Tf32Scope() { octo::cuda::set_allow_tf32(previous_); }
  Tf32Scope(const Tf32Scope&) = delete;
  Tf32Scope& operator=(const Tf32Scope&) = delete;

 private:
  bool previous_;
};

struct TrainConfig {
  int warmup = 5;             // untimed steps (cuDNN set-up, allocator warm-up)
  int steps = 30;             // timed steps
  double max_seconds = 20.0;  // stop timing early past this (a very slow path still reports)
};

/// images/s of one training step (forward, cross-entropy, backward, SGD with Nesterov momentum
/// and weight decay) in float32 on cuda:0, on one random batch of `input_shape` reused every
/// step: `warmup` untimed steps, then each timed step alone between two device synchronisations
/// (wall clock); median and best over the timed steps.
Stats time_training(const std::shared_ptr<nn::Module>& model, const octo::Shape& input_shape,
                    const F::CrossEntropyOptions& loss_options, const TrainConfig& cfg,
                    int* timed_steps) {
  octo::manual_seed(0);
  model->to(kGpu);
  model->train();
  octo::optim::SGD opt(model->parameters(),
                       {.lr = 0.01, .momentum = 0.9, .weight_decay = 5e-4, .nesterov = true});
  const int64_t batch = input_shape[0];
  Tensor x = octo::randn(input_shape, {.device = kGpu});
  Tensor y = octo::randint(0, 10, {batch}, {.dtype = octo::kInt64, .device = kGpu});
  auto step = [&] {
    opt.zero_grad();
    Tensor loss = F::cross_entropy(model->forward(x), y, loss_options);
    loss.backward();
    opt.step();
  };
  for (int i = 0; i < cfg.warmup; ++i) step();
  octo::synchronize(kGpu);
  std::vector<double> rates;
  const auto begin = std::chrono::steady_clock::now();
  for (int i = 0; i < cfg.steps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    step();
    octo::synchronize(kGpu);
    const auto t1 = std::chrono::steady_clock::now();
    rates.push_back(double(batch) / std::chrono::duration<double>(t1 - t0).count());
    if (std::chrono::duration<double>(t1 - begin).count() > cfg.max_seconds) break;
  }
  *timed_steps = static_cast<int>(rates.size());
  return stats_of(rates);
}

/// One training row: the model, its input, its loss options and a note.
void train_row(const std::string& bench, int64_t batch, const octo::Shape& image,
               const std::function<std::shared_ptr<nn::Module>()>& make,
               const F::CrossEntropyOptions& loss_options, const TrainConfig& cfg,
               const std::string& note) {
  const std::string config = "batch " + std::to_string(batch);
  guarded(bench, config, [&] {
    octo::Shape shape{batch};
    shape.insert(shape.end(), image.begin(), image.end());
    int timed = 0;
    Stats s = time_training(make(), shape, loss_options, cfg, &timed);
    row(bench, config, s, "images/s", 0, note + "; median of " + std::to_string(timed) + " steps");
  });
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  if (!octo::cuda::is_available()) {
    std::printf("bench_gpu: no CUDA device visible (octo built with CUDA: %s); nothing measured\n",
                octo::cuda_hooks().is_built() ? "yes" : "no");
    return 77;
  }
  try {
    const octo::cuda::DeviceInfo g = octo::cuda::device_info(0);
    std::printf(
        "bench_gpu: cuda:0 = %s, compute capability %d.%d, %d SMs, SM clock %.0f MHz (peak, cudaDevAttrClockRate), memory %.0f GiB, %d-bit bus at %.0f MHz; %d visible GPU(s); octo %s\n",
        g.name.c_str(), g.major, g.minor, g.sm_count, g.sm_clock_mhz, g.memory_gib, g.mem_bus_bits,
        g.mem_clock_mhz, octo::cuda::device_count(), OCTO_VERSION);
    const bool hopper =
        g.name.find("H100") != std::string::npos || g.name.find("H200") != std::string::npos;
    std::printf(
        "Peaks: H100/H200 SXM datasheet dense TFLOP/s, not measured: FP32 %.0f, TF32 %.0f, BF16 %.0f, FP16 %.0f%s.\n",
        kPeakFp32, kPeakTf32, kPeakBf16, kPeakFp16,
        hopper ? "" : " (this GPU is not an H100/H200: the percentages do not apply)");
  } catch (const std::exception& e) {
    std::printf("bench_gpu: cannot read the device properties: %s\n", one_line(e.what()).c_str());
    g_failed = true;
  }
  std::printf(
      "GEMM: octo::matmul of [n, n] randn matrices; fp32 = cublasSgemmStridedBatched (TF32 off), tf32 = CUBLAS_COMPUTE_32F_FAST_TF32 (octo::cuda::set_allow_tf32(true)), bf16/fp16 = cublasGemmStridedBatchedEx with float32 compute; CUDA-event time per call after warm-up.\n"
      "Training: float32, TF32 off, one random batch reused, each step synchronised; SGD lr 0.01 momentum 0.9 Nesterov, weight decay 5e-4.\n\n");
  octo::manual_seed(0);
  header();

  for (octo::DType dt : {octo::kFloat32, octo::kBFloat16}) {
    const std::string name = std::string("matmul check ") + std::string(octo::dtype_name(dt));
    guarded(name, "256x320x192", [&] {
      const double rel = check_matmul(dt);
      // float32: summation order only; 16-bit: one rounding of the output (2^-8 for bfloat16).
      const bool ok = rel < (dt == octo::kFloat32 ? 1e-4 : 1e-2);
      row_na(name, "256x320x192",
             std::string(ok ? "ok" : "FAILED") +
                 ": max abs(gpu - cpu) / max abs(cpu) = " + std::to_string(rel));
      if (!ok) g_failed = true;
    });
  }

  struct Gemm {
    const char* bench;
    octo::DType dtype;
    bool tf32;
    double peak;
  };
  const Gemm gemms[] = {{"gemm fp32", octo::kFloat32, false, kPeakFp32},
                        {"gemm tf32", octo::kFloat32, true, kPeakTf32},
                        {"gemm bf16", octo::kBFloat16, false, kPeakBf16},
                        {"gemm fp16", octo::kFloat16, false, kPeakFp16}};
  const std::vector<int64_t> sizes =
      quick ? std::vector<int64_t>{4096} : std::vector<int64_t>{4096, 8192};
  for (const Gemm& gm : gemms) {
    for (int64_t n : sizes) {
      const std::string config = std::to_string(n) + "^3";
      guarded(gm.bench, config, [&] {
        Tf32Scope tf32(gm.tf32);
        const int reps = quick ? 10 : (n <= 4096 ? 30 : 10);
        Stats s = time_matmul(n, gm.dtype, 3, reps);
        char note[64];
        std::snprintf(note, sizeof note, "%% of the %.0f TFLOP/s datasheet peak", gm.peak);
        row(gm.bench, config, s, "TFLOP/s", gm.peak, note);
      });
    }
  }

  TrainConfig cfg;
  if (quick) cfg.steps = 10;
  train_row(
      "train mnist cnn", 128, {1, 28, 28},
      [] { return std::make_shared<examples::LeNet>(2, true); }, {}, cfg,
      "examples/mnist LeNet width 2 + BN, 1x28x28");
  train_row(
      "train cifar10 resnet9", 512, {3, 32, 32},
      [] { return std::make_shared<examples::ResNet9>(16); }, {.label_smoothing = 0.2}, cfg,
      "examples/cifar10 ResNet-9 width 16, 3x32x32, label smoothing 0.2");
  train_row(
      "train mnist mlp", 512, {784}, [] { return std::make_shared<examples::Mlp>(); }, {}, cfg,
      "examples/mnist MLP 784-256-128-10");
  return g_failed ? 1 : 0;
}
