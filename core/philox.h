// Philox4x32-10: a counter-based random generator, the same on host and device.
#pragma once

#include <cstdint>

#include "core/macros.h"

namespace octo {

/// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11).
/// Output i of a stream depends only on (seed, counter), so a kernel can draw element i's
/// numbers without any shared state, in any order, on CPU or GPU, and get the same values.
struct Philox {
  uint32_t key[2];
  OCTO_HOST_DEVICE explicit Philox(uint64_t seed) : key{uint32_t(seed), uint32_t(seed >> 32)} {}

  /// Four 32-bit random words for the 128-bit counter (offset, subsequence).
  OCTO_HOST_DEVICE void operator()(uint64_t offset, uint64_t subsequence, uint32_t out[4]) const {
    uint32_t c[4] = {uint32_t(offset), uint32_t(offset >> 32), uint32_t(subsequence),
                     uint32_t(subsequence >> 32)};
    uint32_t k0 = key[0], k1 = key[1];
    for (int round = 0; round < 10; ++round) {
      uint64_t p0 = uint64_t(kMul0) * c[0];
      uint64_t p1 = uint64_t(kMul1) * c[2];
      uint32_t n0 = uint32_t(p1 >> 32) ^ c[1] ^ k0;
      uint32_t n2 = uint32_t(p0 >> 32) ^ c[3] ^ k1;
      c[0] = n0;
      c[1] = uint32_t(p1);
      c[2] = n2;
      c[3] = uint32_t(p0);
      k0 += kWeyl0;
      k1 += kWeyl1;
    }
    out[0] = c[0];
    out[1] = c[1];
    out[2] = c[2];
    out[3] = c[3];
  }

  static constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  static constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
};

/// A uniform float in [0, 1) from 24 random bits; a uniform double in [0, 1) from 53.
OCTO_HOST_DEVICE inline float uniform_float(uint32_t bits) {
  return float(bits >> 8) * (1.0f / 16777216.0f);
}
OCTO_HOST_DEVICE inline double uniform_double(uint32_t hi, uint32_t lo) {
  uint64_t x = (uint64_t(hi) << 21) ^ (uint64_t(lo) >> 11);
  return double(x & ((uint64_t(1) << 53) - 1)) * (1.0 / 9007199254740992.0);
}

}  // namespace octo
