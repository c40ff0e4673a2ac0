// Per-device generators over Philox.
#include "core/random.h"

#include <map>
#include <memory>

#include "core/philox.h"

namespace octo {

void Generator::manual_seed(uint64_t seed) {
  std::lock_guard<std::mutex> lock(mutex_);
  state_ = {seed, 0};
}
uint64_t Generator::seed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return state_.seed;
}
GeneratorState Generator::reserve(uint64_t count) {
  std::lock_guard<std::mutex> lock(mutex_);
  GeneratorState s = state_;
  state_.offset += count;
  return s;
}
GeneratorState Generator::state() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return state_;
}
void Generator::set_state(GeneratorState s) {
  std::lock_guard<std::mutex> lock(mutex_);
  state_ = s;
}
uint64_t Generator::next_u64() {
  GeneratorState s = reserve(1);
  uint32_t r[4];
  // Subsequence 1 keeps host draws apart from kernel draws (subsequence 0).
  Philox(s.seed)(s.offset, 1, r);
  return (uint64_t(r[0]) << 32) | r[1];
}
uint64_t Generator::randint(uint64_t n) {
  // Rejection sampling removes modulo bias.
  uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t x;
  do {
    x = next_u64();
  } while (x >= limit);
  return x % n;
}

namespace {
struct Registry {
  std::mutex mutex;
  uint64_t seed = Generator::kDefaultSeed;
  std::map<Device, std::unique_ptr<Generator>> generators;
};
Registry& registry() {
  static Registry* r = new Registry();
  return *r;
}
}  // namespace

Generator& default_generator(Device device) {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto& g = r.generators[device];
  if (!g) g = std::make_unique<Generator>(r.seed);
  return *g;
}

void manual_seed(uint64_t seed) {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.seed = seed;
  for (auto& [device, g] : r.generators) g->manual_seed(seed);
}

std::vector<std::pair<Device, GeneratorState>> get_rng_states() {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<std::pair<Device, GeneratorState>> out;
  for (auto& [device, g] : r.generators) out.emplace_back(device, g->state());
  return out;
}

void set_rng_states(const std::vector<std::pair<Device, GeneratorState>>& states) {
  for (const auto& [device, s] : states) default_generator(device).set_state(s);
}

}  // namespace octo
