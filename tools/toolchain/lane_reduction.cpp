// Configure-time probe (meson.build): does this compiler vectorise a two-lane integer sum whose
// adds go through the unsigned type correctly? GCC 12.2 with -O3 and AVX2 or AVX-512 does not
// (Note [Integer lanes and GCC 12] in kernels/cpu/reduce.cpp). Exits 0 when the sum is right.
#include <cstdint>
#include <cstdio>

namespace {

using i64 = std::int64_t;
using u64 = std::uint64_t;

i64 wrap_add(i64 a, i64 b) { return static_cast<i64>(static_cast<u64>(a) + static_cast<u64>(b)); }

// Two lanes, each folded with a wrapping add, combined with a wrapping add: no undefined
// behaviour anywhere, and clang, g++ -O2 and g++ -O3 without AVX2 all get 2016.
__attribute__((noinline)) i64 two_lane_sum(const i64* p, i64 n) {
  i64 a0 = 0, a1 = 0;
  for (i64 i = 0; i + 2 <= n; i += 2) {
    a0 = wrap_add(a0, p[i]);
    a1 = wrap_add(a1, p[i + 1]);
  }
  return wrap_add(a0, a1);
}

}  // namespace

int main() {
  i64 x[64];
  for (i64 i = 0; i < 64; ++i) x[i] = i;
  const i64 got = two_lane_sum(x, 64), want = 64 * 63 / 2;
  if (got == want) return 0;
  std::printf("two-lane wrapping sum of 0..63: got %lld, expected %lld\n",
              static_cast<long long>(got), static_cast<long long>(want));
  return 1;
}
