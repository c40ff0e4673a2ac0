// The machine's FP32 peak, measured (an FMA-bound loop) and computed (width x FMA units x clock).
#pragma once

#include <string>

namespace octo::bench {

/// What the compiler targets for the FMA loop: float lanes per vector and the ISA's name.
struct VectorIsa {
  int lanes;         // floats per vector register (16 for AVX-512, 8 for AVX2, 4 for SSE)
  const char* name;  // "AVX-512F", "AVX2+FMA", ...
  bool fma;          // whether a fused multiply-add instruction is used
};
VectorIsa vector_isa();

/// Runs `threads` threads, each doing `iterations` rounds of kChains independent vector FMA
/// chains (enough to cover FMA latency x ports), and returns GFLOP/s (an FMA counts 2 flops).
/// Best of `repeats` timings.
double fma_loop_gflops(int threads, long iterations = 20'000'000, int repeats = 5);

/// 'cpu MHz' of the first processor in /proc/cpuinfo (0 when unreadable).
double cpuinfo_mhz();
/// 'model name' of the first processor in /proc/cpuinfo ("unknown" when unreadable).
std::string cpuinfo_model();

/// FMA units per core assumed for the computed peak, and why.
struct FmaUnits {
  int units;
  std::string reason;
};
/// FMA units per core for the computed peak: assumed from the CPU model and the ISA, with the
/// measured single-thread loop (flops per 'cpu MHz' cycle) quoted as a cross-check.
FmaUnits fma_units(const std::string& model, double measured_1thread_gflops, double mhz);

}  // namespace octo::bench
