// bench_sgemm: octo::matmul float32 GFLOP/s at 256^3, 1024^3, 2048^3 on 1 and 2 threads, as a
// percentage of the machine's FP32 peak (measured by an FMA loop, and computed). See
// docs/benchmarks.md for how to read it.
//
//   bench_sgemm            full run (about a minute)
//   bench_sgemm --quick    fewer repeats and no 2048^3
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <vector>

#include <octo/octo.h>

#include "fp32_peak.h"

namespace {

struct Timing {
  double best_gflops;
  double median_gflops;
};

/// C = A @ B with [n, n] float32 operands: `warmup` untimed runs, then `repeats` timed ones.
Timing time_sgemm(int64_t n, int threads, int warmup, int repeats) {
  octo::set_num_threads(threads);
  octo::Tensor a = octo::randn({n, n}), b = octo::randn({n, n});
  double flops = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
  for (int i = 0; i < warmup; ++i) octo::matmul(a, b);
  std::vector<double> gflops;
  for (int i = 0; i < repeats; ++i) {
    auto start = std::chrono::steady_clock::now();
    octo::Tensor c = octo::matmul(a, b);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    gflops.push_back(flops / s * 1e-9);
  }
  std::sort(gflops.begin(), gflops.end());
  return {gflops.back(), gflops[gflops.size() / 2]};
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  namespace bench = octo::bench;
  const int kThreads[] = {1, 2};
  octo::NoGradGuard no_grad;

  std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M", std::localtime(&now));
  std::string model = bench::cpuinfo_model();
  double mhz = bench::cpuinfo_mhz();
  bench::VectorIsa isa = bench::vector_isa();
  std::printf("bench_sgemm  %s\nCPU: %s, %d hardware threads, cpu MHz %.0f\n", date, model.c_str(),
              octo::hardware_concurrency(), mhz);
  std::printf("FMA loop ISA: %s (%d float lanes)\n\n", isa.name, isa.lanes);

  // (a) measured: the FMA-bound loop on 1 and 2 threads, best of a run before and one after the
  // SGEMM timings (a busy machine depresses either; the best is the closest to the real peak).
  double measured[3] = {0, 0, 0};
  long iters = quick ? 5'000'000 : 20'000'000;
  auto measure_peak = [&] {
    for (int t : kThreads)
      measured[t] = std::max(measured[t], bench::fma_loop_gflops(t, iters, quick ? 3 : 5));
  };
  measure_peak();
  struct Row {
    int64_t n;
    int threads;
    Timing timing;
  };
  std::vector<Row> rows;
  std::vector<int64_t> sizes = {256, 1024};
  if (!quick) sizes.push_back(2048);
  for (int64_t n : sizes) {
    for (int t : kThreads) {
      // Aim for ~0.5-2 s of timed work per row.
      int repeats = n <= 256 ? (quick ? 20 : 100) : n <= 1024 ? (quick ? 5 : 15) : 5;
      rows.push_back({n, t, time_sgemm(n, t, n <= 256 ? 10 : 2, repeats)});
    }
  }
  measure_peak();

  // (b) computed: lanes x FMA units x 2 flops x clock x cores.
  bench::FmaUnits units = bench::fma_units(model, measured[1], mhz);
  auto computed = [&](int t) { return isa.lanes * units.units * 2.0 * mhz * 1e-3 * t; };

  std::printf("FP32 peak (GFLOP/s)\n");
  std::printf(
      "  threads   measured (FMA loop)   computed (%d lanes x %d FMA x 2 x %.0f MHz x threads)\n",
      isa.lanes, units.units, mhz);
  for (int t : kThreads) std::printf("  %7d   %19.1f   %10.1f\n", t, measured[t], computed(t));
  std::printf("  FMA units: %s\n\n", units.reason.c_str());

  std::printf("SGEMM: octo::matmul, float32 [n, n] @ [n, n], GFLOP/s = 2 n^3 / time\n");
  std::printf("  %5s  %7s  %8s  %8s  %10s  %10s\n", "n", "threads", "best", "median", "%measured",
              "%computed");
  double target_pct = 0;
  for (const Row& r : rows) {
    double pm = 100.0 * r.timing.best_gflops / measured[r.threads];
    std::printf("  %5ld  %7d  %8.1f  %8.1f  %9.1f%%  %9.1f%%\n", static_cast<long>(r.n), r.threads,
                r.timing.best_gflops, r.timing.median_gflops, pm,
                100.0 * r.timing.best_gflops / computed(r.threads));
    if (r.n == 1024 && r.threads == 2) target_pct = pm;
  }
  std::printf("\ntarget: SGEMM 1024^3 on 2 threads >= 60%% of measured FP32 peak: %.1f%% -> %s\n",
              target_pct, target_pct >= 60.0 ? "met" : "NOT met");
  return 0;
}
