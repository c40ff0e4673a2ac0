// Generators: reproducible by seed, per device, and counter-based.
#include <catch2/catch.hpp>

#include <octo/octo.h>

TEST_CASE("Philox matches the published known-answer test") {
  // Random123's kat_vectors: philox4x32_10 with counter 0 and key 0.
  octo::Philox p(0);
  uint32_t out[4];
  p(0, 0, out);
  CHECK(out[0] == 0x6627e8d5u);
  CHECK(out[1] == 0xe169c58du);
  CHECK(out[2] == 0xbc57ac4cu);
  CHECK(out[3] == 0x9b00dbd8u);
}

TEST_CASE("manual_seed makes generators reproducible") {
  octo::manual_seed(123);
  uint64_t a = octo::default_generator().next_u64();
  uint64_t b = octo::default_generator().next_u64();
  octo::manual_seed(123);
  CHECK(octo::default_generator().next_u64() == a);
  CHECK(octo::default_generator().next_u64() == b);
  CHECK(a != b);
}

TEST_CASE("each device has its own generator, all reseeded together") {
  octo::manual_seed(7);
  auto& g0 = octo::default_generator(octo::Device("cpu:0"));
  auto& g1 = octo::default_generator(octo::Device("cpu:1"));
  CHECK(&g0 != &g1);
  g0.reserve(100);
  CHECK(g1.state().offset == 0);
  octo::manual_seed(7);
  CHECK(g0.state().offset == 0);
  CHECK(g0.seed() == 7);
  CHECK(g1.seed() == 7);
}

TEST_CASE("rng states round-trip for checkpoints") {
  octo::manual_seed(99);
  octo::default_generator().reserve(5);
  auto states = octo::get_rng_states();
  uint64_t expected = octo::default_generator().next_u64();
  octo::set_rng_states(states);
  CHECK(octo::default_generator().next_u64() == expected);
}

TEST_CASE("randint on the host is unbiased enough to hit every value") {
  octo::manual_seed(1);
  int counts[5] = {};
  for (int i = 0; i < 5000; ++i) counts[octo::default_generator().randint(5)]++;
  for (int c : counts) CHECK(c > 850);  // expected 1000 each
}
