// DType sizes, names, promotion, and the 16-bit storage types' conversions.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include <octo/octo.h>

#include "core/half.h"

TEST_CASE("dtype sizes and names") {
  CHECK(octo::itemsize(octo::kFloat32) == 4);
  CHECK(octo::itemsize(octo::kFloat64) == 8);
  CHECK(octo::itemsize(octo::kInt64) == 8);
  CHECK(octo::itemsize(octo::kInt32) == 4);
  CHECK(octo::itemsize(octo::kUInt8) == 1);
  CHECK(octo::itemsize(octo::kBool) == 1);
  CHECK(octo::itemsize(octo::kBFloat16) == 2);
  CHECK(octo::itemsize(octo::kFloat16) == 2);
  for (auto t : {octo::kFloat32, octo::kFloat64, octo::kInt64, octo::kInt32, octo::kUInt8,
                 octo::kBool, octo::kBFloat16, octo::kFloat16})
    CHECK(octo::dtype_from_name(octo::dtype_name(t)) == t);
  CHECK_THROWS_AS(octo::dtype_from_name("float128"), octo::ValueError);
}

TEST_CASE("type promotion follows PyTorch") {
  using namespace octo;
  CHECK(promote_types(kInt64, kFloat32) == kFloat32);
  CHECK(promote_types(kFloat32, kFloat64) == kFloat64);
  CHECK(promote_types(kBool, kUInt8) == kUInt8);
  CHECK(promote_types(kInt32, kInt64) == kInt64);
  CHECK(promote_types(kFloat16, kBFloat16) == kFloat32);
  CHECK(promote_types(kBFloat16, kFloat32) == kFloat32);
}

TEST_CASE("bfloat16 and float16 round to nearest even and keep specials") {
  CHECK(static_cast<float>(octo::BFloat16(1.0f)) == 1.0f);
  CHECK(static_cast<float>(octo::BFloat16(3.140625f)) == 3.140625f);
  CHECK(octo::BFloat16(1.0f + 1.0f / 256).bits == octo::BFloat16(1.0f).bits);  // tie -> even
  CHECK(std::isnan(static_cast<float>(octo::BFloat16(NAN))));
  CHECK(static_cast<float>(octo::Float16(1.0f)) == 1.0f);
  CHECK(static_cast<float>(octo::Float16(65504.0f)) == 65504.0f);
  CHECK(std::isinf(static_cast<float>(octo::Float16(70000.0f))));
  CHECK(static_cast<float>(octo::Float16(5.9604645e-08f)) == 5.9604645e-08f);  // smallest subnormal
  CHECK(octo::Float16(0.1f).bits == 0x2e66);
  CHECK(std::fabs(static_cast<float>(octo::Float16(-2.5f)) + 2.5f) == 0.0f);
}

TEST_CASE("Scalar from inf or NaN is defined: saturated or 0 as an integer") {
  // Found by fuzz_checkpoint: the constructor used to cast every double to int64 (undefined
  // behaviour for inf, NaN and |x| >= 2^63; UBSan reports it).
  const double inf = std::numeric_limits<double>::infinity();
  CHECK(octo::Scalar(inf).to_int() == INT64_MAX);
  CHECK(octo::Scalar(-inf).to_int() == INT64_MIN);
  CHECK(octo::Scalar(std::nan("")).to_int() == 0);
  CHECK(octo::Scalar(1e300).to_int() == INT64_MAX);
  CHECK(octo::Scalar(-2.7).to_int() == -2);
  CHECK(std::isinf(octo::Scalar(inf).to_double()));
  CHECK(octo::full({2}, inf, {.dtype = octo::kInt64}).max().item<int64_t>() == INT64_MAX);
}

TEST_CASE("dispatch_dtypes calls f with the dtype's type and names op and dtype otherwise") {
  std::vector<octo::DType> seen;
  for (auto t : {octo::kFloat32, octo::kFloat64, octo::kBFloat16, octo::kFloat16}) {
    octo::dispatch_dtypes<octo::FloatingTypes>(
        t, "probe", [&](auto tag) { seen.push_back(octo::dtype_of<decltype(tag)>); });
  }
  CHECK(seen ==
        std::vector<octo::DType>{octo::kFloat32, octo::kFloat64, octo::kBFloat16, octo::kFloat16});
  bool called = false;
  auto never = [&](auto) { called = true; };
  CHECK_THROWS_WITH(
      octo::dispatch_dtypes<octo::FloatingTypes>(octo::kInt64, "probe", never),
      Catch::StartsWith(
          "probe: unsupported dtype int64; expected one of float32, float64, bfloat16, float16"));
  CHECK_THROWS_AS(octo::dispatch_dtypes<octo::FloatingTypes>(octo::kBool, "probe", never),
                  octo::ValueError);
  CHECK_THROWS_AS(octo::dispatch_dtypes<octo::Float32And64>(octo::kFloat16, "probe", never,
                                                            octo::DTypeError::NotImplemented),
                  octo::NotImplementedError);
  CHECK_THROWS_WITH(
      octo::dispatch_dtypes<octo::Float32And64>(octo::kInt32, "probe", never,
                                                octo::DTypeError::NotImplemented),
      Catch::StartsWith(
          "probe is not implemented for dtype int32 on this backend yet (float32, float64 are)"));
  CHECK_FALSE(called);
}

TEST_CASE("Float16's conversions equal the portable ones bit for bit (F16C or not)") {
  // Every binary16 value to float and back (NaNs excepted: their payloads are the portable path's
  // by construction).
  int widen_bad = 0, round_trip_bad = 0;
  for (uint32_t b = 0; b < 0x10000u; ++b) {
    octo::Float16 h;
    h.bits = static_cast<uint16_t>(b);
    const float f = h, want = octo::detail::half_bits_to_float(h.bits);
    if (std::isnan(want)) continue;
    if (std::memcmp(&f, &want, sizeof f) != 0) ++widen_bad;
    if (octo::Float16(f).bits != h.bits) ++round_trip_bad;
  }
  CHECK(widen_bad == 0);
  CHECK(round_trip_bad == 0);
  // Floats in and around binary16's range, including ties, subnormals, overflow and infinities.
  int narrow_bad = 0;
  for (uint64_t u = 0; u <= 0xffffffffu; u += 4099) {
    const uint32_t x = static_cast<uint32_t>(u);
    float f;
    std::memcpy(&f, &x, sizeof f);
    if (std::isnan(f)) continue;
    if (octo::Float16(f).bits != octo::detail::float_to_half_bits(f)) ++narrow_bad;
  }
  for (float f : {65504.0f, 65520.0f, 65519.99f, 6.1035156e-05f, 5.9604645e-08f, 2.9802322e-08f,
                  1.0f + 0x1p-11f, 1.0f + 0x3p-11f, -0.0f, std::numeric_limits<float>::infinity()})
    if (octo::Float16(f).bits != octo::detail::float_to_half_bits(f)) ++narrow_bad;
  CHECK(narrow_bad == 0);
}
