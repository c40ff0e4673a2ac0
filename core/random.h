// Seeded random generators: one per device, all reseeded by octo::manual_seed.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include "core/device.h"

namespace octo {

/// The state of a counter-based generator: the seed and how many counters have been used.
/// Kernels draw element i of an op from Philox(seed)(offset + i), so results do not depend on
/// thread counts or launch order (see core/philox.h).
struct GeneratorState {
  uint64_t seed = 0;
  uint64_t offset = 0;
};

class Generator {
 public:
  explicit Generator(uint64_t seed = kDefaultSeed) : state_{seed, 0} {}
  void manual_seed(uint64_t seed);
  uint64_t seed() const;
  /// Reserves `count` counters and returns the state to draw them from (thread-safe).
  GeneratorState reserve(uint64_t count);
  GeneratorState state() const;
  void set_state(GeneratorState s);
  /// A random 64-bit word for host-side uses (shuffling, sampling).
  uint64_t next_u64();
  /// Uniform integer in [0, n).
  uint64_t randint(uint64_t n);

  static constexpr uint64_t kDefaultSeed = 67280421310721ull;  // PyTorch's default seed

 private:
  mutable std::mutex mutex_;
  GeneratorState state_;
};

/// The generator of a device. cpu:N and cuda:N each have their own, so replicas running in
/// parallel on different devices draw reproducibly.
Generator& default_generator(Device device = kCPU);
/// Seeds every device's generator (like torch.manual_seed).
void manual_seed(uint64_t seed);
/// All generators' states, for checkpoints, and restoring them.
std::vector<std::pair<Device, GeneratorState>> get_rng_states();
void set_rng_states(const std::vector<std::pair<Device, GeneratorState>>& states);

}  // namespace octo
