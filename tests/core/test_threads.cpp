// The default thread count: OMP_NUM_THREADS parsed as OpenMP programs read it.
#include <catch2/catch.hpp>
#include <cstdlib>

#include <octo/octo.h>

TEST_CASE("parse_num_threads reads the first entry of a positive OMP_NUM_THREADS") {
  CHECK(octo::parse_num_threads("1") == 1);
  CHECK(octo::parse_num_threads("16") == 16);
  CHECK(octo::parse_num_threads(" 3 ") == 3);
  CHECK(octo::parse_num_threads("4,2") == 4);  // nested levels: the outer one is ours
  CHECK_FALSE(octo::parse_num_threads(nullptr).has_value());
  CHECK_FALSE(octo::parse_num_threads("").has_value());
  CHECK_FALSE(octo::parse_num_threads("0").has_value());
  CHECK_FALSE(octo::parse_num_threads("-2").has_value());
  CHECK_FALSE(octo::parse_num_threads("two").has_value());
  CHECK_FALSE(octo::parse_num_threads("2x").has_value());
  CHECK_FALSE(octo::parse_num_threads("99999999999").has_value());
}

// Meson runs this binary once with OMP_NUM_THREADS=2 (all cpu suites) and once with =1 (the
// `omp_num_threads` test), where all cores would be 2 or more on any machine octo is tested on.
TEST_CASE("Without set_num_threads, kernels use OMP_NUM_THREADS", "[omp_env]") {
  const char* env = std::getenv("OMP_NUM_THREADS");
  REQUIRE(env != nullptr);
  CHECK(octo::get_num_threads() == *octo::parse_num_threads(env));
  octo::ThreadLimitGuard limit(1);  // a per-thread limit still wins
  CHECK(octo::get_num_threads() == 1);
}
