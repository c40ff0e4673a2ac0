// The FMA-bound loop that measures FP32 peak, and /proc/cpuinfo readers for the computed peak.
#include "fp32_peak.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <thread>
#include <vector>

namespace octo::bench {

namespace {

// Independent accumulators per thread. An FMA has a latency of 4 cycles and Xeons issue up to 2
// per cycle, so at least 8 chains are needed to keep both ports busy; 12 leaves slack and still
// fits the 16 (AVX2) or 32 (AVX-512) vector registers.
constexpr int kChains = 12;

// Explicit intrinsics: -std=c++20 implies -ffp-contract=off in GCC, so `a * b + c` would not
// become an FMA by itself.
#if defined(__AVX512F__)
using Vec = __m512;
inline Vec vset(float x) { return _mm512_set1_ps(x); }
inline Vec vfma(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
inline float vsum(Vec v) { return _mm512_reduce_add_ps(v); }
constexpr VectorIsa kIsa{16, "AVX-512F", true};
#elif defined(__AVX2__) && defined(__FMA__)
using Vec = __m256;
inline Vec vset(float x) { return _mm256_set1_ps(x); }
inline Vec vfma(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
inline float vsum(Vec v) {
  alignas(32) float f[8];
  _mm256_store_ps(f, v);
  float s = 0;
  for (float x : f) s += x;
  return s;
}
constexpr VectorIsa kIsa{8, "AVX2+FMA", true};
#else
using Vec = __m128;
inline Vec vset(float x) { return _mm_set1_ps(x); }
inline Vec vfma(Vec a, Vec b, Vec c) { return _mm_add_ps(_mm_mul_ps(a, b), c); }
inline float vsum(Vec v) {
  alignas(16) float f[4];
  _mm_store_ps(f, v);
  return f[0] + f[1] + f[2] + f[3];
}
constexpr VectorIsa kIsa{4, "SSE (no FMA)", false};
#endif

/// kChains independent chains acc = acc * m + c; converges to c / (1 - m), so no overflow and
/// no denormals. Returns a checksum so that nothing is optimised away.
__attribute__((noinline)) float fma_chains(long iterations, float seed) {
  Vec acc[kChains];
  for (int j = 0; j < kChains; ++j) acc[j] = vset(seed + 0.001f * static_cast<float>(j));
  const Vec m = vset(0.999f), c = vset(0.0001f);
  for (long i = 0; i < iterations; ++i) {
#pragma GCC unroll 12
    for (int j = 0; j < kChains; ++j) acc[j] = vfma(acc[j], m, c);
  }
  float s = 0;
  for (int j = 0; j < kChains; ++j) s += vsum(acc[j]);
  return s;
}

}  // namespace

VectorIsa vector_isa() { return kIsa; }

double fma_loop_gflops(int threads, long iterations, int repeats) {
  double best = 0;
  std::atomic<float> sink{0};
  for (int r = 0; r < repeats; ++r) {
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        ready.fetch_add(1);
        while (!go.load(std::memory_order_acquire)) {
        }
        float s = fma_chains(iterations, 1.0f + static_cast<float>(t));
        sink.store(sink.load() + s);
      });
    }
    while (ready.load() < threads) {
    }
    auto start = std::chrono::steady_clock::now();
    go.store(true, std::memory_order_release);
    for (auto& th : pool) th.join();
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    double flops = 2.0 * kIsa.lanes * kChains * static_cast<double>(iterations) * threads;
    best = std::max(best, flops / seconds * 1e-9);
  }
  if (sink.load() == 12345.0f) std::puts("");  // keeps the checksum alive
  return best;
}

double cpuinfo_mhz() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("cpu MHz", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) return std::atof(line.c_str() + colon + 1);
    }
  }
  return 0;
}

std::string cpuinfo_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  }
  return "unknown";
}

FmaUnits fma_units(const std::string& model, double gflops_1thread, double mhz) {
  FmaUnits u{2, ""};
  bool xeon = model.find("Xeon") != std::string::npos;
  if (kIsa.lanes == 16 && xeon) {
    u.reason =
        "assumed 2: Intel Xeon Scalable (Gold/Platinum, Skylake-SP and later, incl. Sapphire/Emerald Rapids) has two 512-bit FMA units per core (port 0+1 fused, port 5); Silver/Bronze parts have one";
  } else if (kIsa.fma) {
    u.reason = "assumed 2: Intel since Haswell and AMD since Zen 2 issue two vector FMAs per cycle";
  } else {
    u = {1, "assumed 1: no FMA instruction targeted (a mul and an add count as one FMA)"};
  }
  if (mhz > 0 && gflops_1thread > 0) {
    double flops_per_cycle = gflops_1thread * 1e3 / mhz;
    char buf[240];
    std::snprintf(
        buf, sizeof buf,
        ". Cross-check: the 1-thread FMA loop does %.1f flops per cpuinfo cycle = %.2f vector FMAs/cycle (above %d means the core runs faster than 'cpu MHz' says)",
        flops_per_cycle, flops_per_cycle / (2.0 * kIsa.lanes), u.units);
    u.reason += buf;
  }
  return u;
}

}  // namespace octo::bench
