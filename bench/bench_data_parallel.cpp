// DataParallel throughput on virtual CPU devices: a compute-bound CNN step on 1 vs 2 devices.
//
// Prints samples/s for
//   A. one device, 1 thread         (the baseline a single virtual device gets on 2 devices)
//   B. one device, all threads      (intra-op parallelism: OpenMP inside each kernel)
//   C. DataParallel on cpu:0,cpu:1  (each device one thread, replicas concurrently)
//   D. as C, rebuilding replicas every step instead of refreshing cached ones
// and the ratios C/A (the scaling of data parallelism) and C/B.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <octo/octo.h>

using octo::Tensor;
namespace nn = octo::nn;

namespace {

/// conv3x3(3->32) relu conv3x3(32->32) relu pool2 conv3x3(32->64) relu pool2 linear(64*8*8 -> 10)
struct Cnn : nn::Cloneable<Cnn> {
  Cnn() : Cloneable("Cnn") { reset(); }
  void reset() override {
    auto conv = [&](const char* name, int64_t in, int64_t out) {
      return register_parameter(name, octo::randn({out, in, 3, 3}) * (1.0 / std::sqrt(9.0 * in)));
    };
    w1 = conv("w1", 3, 32);
    w2 = conv("w2", 32, 32);
    w3 = conv("w3", 32, 64);
    fc = register_module("fc", std::make_shared<nn::Linear>(64 * 8 * 8, 10));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = octo::relu(octo::conv2d(x, w1, {}, {1, 1}, {1, 1}));
    h = octo::max_pool2d(octo::relu(octo::conv2d(h, w2, {}, {1, 1}, {1, 1})), {2, 2});
    h = octo::max_pool2d(octo::relu(octo::conv2d(h, w3, {}, {1, 1}, {1, 1})), {2, 2});
    return fc->forward(h.flatten(1));
  }
  Tensor w1, w2, w3;
  std::shared_ptr<nn::Linear> fc;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// Seconds per step (median of `reps` after a warm-up), forward + backward + SGD update.
double time_step(const std::shared_ptr<Cnn>& model, nn::Module& runner, const Tensor& x,
                 const Tensor& y, int reps) {
  std::vector<double> times;
  for (int r = 0; r < reps + 2; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    Tensor out = runner.forward(x);
    Tensor loss = octo::mean(octo::square(out - y));
    model->zero_grad();
    loss.backward();
    {
      octo::NoGradGuard no_grad;
      for (Tensor& p : model->parameters()) p.add_(p.grad(), -0.01);
    }
    auto t1 = std::chrono::steady_clock::now();
    if (r >= 2) times.push_back(std::chrono::duration<double>(t1 - t0).count());
  }
  return median(times);
}

}  // namespace

int main(int argc, char** argv) {
  int batch = argc > 1 ? std::atoi(argv[1]) : 64;
  int reps = argc > 2 ? std::atoi(argv[2]) : 7;
  int cores = octo::hardware_concurrency();
  octo::manual_seed(0);
  auto model = std::make_shared<Cnn>();
  Tensor x = octo::randn({batch, 3, 32, 32});
  Tensor y = octo::randn({batch, 10});
  std::printf("DataParallel on virtual CPU devices: CNN step (fwd+bwd+SGD), batch %d, %d cores\n",
              batch, cores);

  octo::set_num_threads(1);
  double a = time_step(model, *model, x, y, reps);
  octo::set_num_threads(cores);
  double b = time_step(model, *model, x, y, reps);
  octo::parallel::DataParallel dp(model, {octo::Device("cpu:0"), octo::Device("cpu:1")});
  double c = time_step(model, dp, x, y, reps);
  dp.set_cache_replicas(false);
  double d = time_step(model, dp, x, y, reps);

  auto row = [&](const char* what, double s) {
    std::printf("  %-46s %8.1f ms/step %9.1f samples/s\n", what, s * 1e3, batch / s);
  };
  row("A. 1 device, 1 thread", a);
  row("B. 1 device, all threads (intra-op)", b);
  row("C. DataParallel cpu:0,cpu:1 (1 thread each)", c);
  row("D. as C, replicas rebuilt every step", d);
  std::printf("  data-parallel scaling C/A: %.2fx (target >= 1.8x on 2 cores)\n", a / c);
  std::printf("  DataParallel vs intra-op C/B: %.2fx;  cached replicas vs rebuilt D/C: %.2fx\n",
              b / c, d / c);
  return 0;
}
