// libtorch's (PyTorch's C++ API) half of the per-op overhead row: the same chain as bench_cpu's
// op_overhead -- n 8x8 float32 adds with autograd, then sum().backward() -- in C++, so the
// comparison has no Python in it. Built and run by bench/libtorch_op_overhead.sh against the
// libtorch that `pip install torch` ships; never part of octo's build.
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 1;
  const bool quick = argc > 2 && std::string(argv[2]) == "--quick";
  torch::set_num_threads(threads);
  const int n = 1000, reps = quick ? 7 : 21, warmup = 3;
  torch::Tensor x = torch::randn({8, 8}, torch::requires_grad());
  torch::Tensor h0 = torch::randn({8, 8});
  std::vector<double> times;
  for (int r = 0; r < warmup + reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    torch::Tensor h = h0;
    for (int i = 0; i < n; ++i) h = h + x;
    h.sum().backward();
    x.mutable_grad().zero_();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r >= warmup) times.push_back(s);
  }
  std::sort(times.begin(), times.end());
  const double us = times[times.size() / 2] / n * 1e6;
  std::printf(
      "{\"framework\": \"libtorch\", \"bench\": \"op_overhead\", \"config\": \"8x8 add fwd+bwd\", "
      "\"threads\": %d, \"value\": %.4f, \"unit\": \"us/op\", \"reps\": %d, \"version\": \"%s\"}\n",
      threads, us, reps, TORCH_VERSION);
  std::fprintf(stderr, "  libtorch op_overhead 8x8 add fwd+bwd         %d thr: %10.2f us/op\n",
               threads, us);
  return 0;
}
