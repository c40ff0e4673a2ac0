// Helpers shared by the GPU tests: the device under test and comparisons against the CPU backend.
#pragma once

// First: it defines CATCH_CONFIG_RUNNER before Catch is included.
#include "gpu/gpu_main.h"

#include <cmath>
#include <vector>

#include <octo/octo.h>

namespace gpu_test {

inline const octo::Device kGpu(octo::DeviceType::CUDA, 0);

/// t's values as doubles in row-major order (moved to the CPU first).
inline std::vector<double> values(const octo::Tensor& t) {
  return t.to(octo::kCPU, octo::kFloat64).contiguous().to_vector<double>();
}

/// gpu (a tensor on kGpu) equals cpu (on the CPU) elementwise within atol + rtol * |cpu|, exactly
/// when both are 0. NaN matches NaN and an infinity the same infinity. Reports the first mismatch.
inline void check_match(const octo::Tensor& gpu, const octo::Tensor& cpu, double rtol = 0,
                        double atol = 0) {
  REQUIRE(gpu.defined());
  REQUIRE(cpu.defined());
  REQUIRE(gpu.device() == kGpu);
  REQUIRE(cpu.device() == octo::kCPU);
  REQUIRE(gpu.sizes() == cpu.sizes());
  REQUIRE(gpu.dtype() == cpu.dtype());
  const std::vector<double> g = values(gpu), c = values(cpu);
  size_t bad = g.size();
  for (size_t i = 0; i < g.size() && bad == g.size(); ++i) {
    const bool ok = std::isnan(c[i])   ? std::isnan(g[i])
                    : std::isinf(c[i]) ? g[i] == c[i]
                                       : std::abs(g[i] - c[i]) <= atol + rtol * std::abs(c[i]);
    if (!ok) bad = i;
  }
  INFO("first mismatch at element " << bad << " of " << g.size() << ": gpu "
                                    << (bad < g.size() ? g[bad] : 0.0) << ", cpu "
                                    << (bad < g.size() ? c[bad] : 0.0));
  CHECK(bad == g.size());
}

}  // namespace gpu_test
