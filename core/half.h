// Float16 and BFloat16 storage types: 16-bit values with float conversions usable on host and
// device.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/macros.h"

// nvcc's host passes do not get F16C, so Float16's host conversions read differently in .cu
// files; both give the same bits (NaNs take the portable path everywhere). A release libocto.so
// holds no out-of-line copy of them (`nm -C` finds none: every call is inlined), so no .cu body
// can stand in for the F16C one.
#if !defined(__CUDACC__) && defined(__F16C__)
#include <immintrin.h>
#define OCTO_HOST_F16C 1  // the host converts binary16 with F16C instructions (see Float16)
#endif

namespace octo {

namespace detail {
OCTO_HOST_DEVICE inline uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}
OCTO_HOST_DEVICE inline float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}
}  // namespace detail

/// bfloat16: the top 16 bits of a float32, rounded to nearest even.
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  OCTO_HOST_DEVICE BFloat16(float f) {  // NOLINT: implicit like a builtin float type
    uint32_t u = detail::float_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) {  // NaN stays NaN
      bits = static_cast<uint16_t>((u >> 16) | 0x40);
    } else {
      u += 0x7fffu + ((u >> 16) & 1u);
      bits = static_cast<uint16_t>(u >> 16);
    }
  }
  OCTO_HOST_DEVICE operator float() const { return detail::bits_float(uint32_t(bits) << 16); }
};

namespace detail {
/// float -> IEEE 754 binary16 bits, round to nearest even, in portable integer code.
OCTO_HOST_DEVICE inline uint16_t float_to_half_bits(float f) {
  uint32_t x = float_bits(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t mant = x & 0x007fffffu;
  int32_t exp = int32_t((x >> 23) & 0xff) - 127 + 15;
  if (((x >> 23) & 0xff) == 0xff)  // inf or NaN
    return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0u));
  if (exp >= 0x1f) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (exp <= 0) {                                                 // subnormal or zero
    if (exp < -10) return static_cast<uint16_t>(sign);
    mant |= 0x00800000u;
    uint32_t shift = uint32_t(14 - exp);
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1u);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = (uint32_t(exp) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) ++half;  // may carry into exp: fine
  return static_cast<uint16_t>(sign | half);
}
/// IEEE 754 binary16 bits -> float (exact), in portable integer code.
OCTO_HOST_DEVICE inline float half_bits_to_float(uint16_t bits) {
  uint32_t sign = uint32_t(bits & 0x8000u) << 16;
  uint32_t exp = (bits >> 10) & 0x1fu;
  uint32_t mant = bits & 0x3ffu;
  if (exp == 0x1f) return bits_float(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    if (mant == 0) return bits_float(sign);
    int e = -1;  // subnormal: normalise
    do {
      ++e;
      mant <<= 1;
    } while ((mant & 0x400u) == 0);
    mant &= 0x3ffu;
    return bits_float(sign | (uint32_t(127 - 15 - e) << 23) | (mant << 13));
  }
  return bits_float(sign | ((exp + 127 - 15) << 23) | (mant << 13));
}
}  // namespace detail

/// IEEE 754 binary16. The conversions are the portable ones above, so host and device agree bit
/// for bit; host code built with F16C (x86 since Ivy Bridge, which -march=native finds) converts
/// every value but a NaN with one instruction instead -- the same rounding, so the same bits
/// (tests/core/test_dtype.cpp compares them over every binary16 value and a sweep of floats),
/// about ten times faster. NaNs keep the portable path, whose payloads the device shares.
struct Float16 {
  uint16_t bits = 0;
  Float16() = default;
  OCTO_HOST_DEVICE Float16(float f) {  // NOLINT
#if defined(OCTO_HOST_F16C)
    if ((detail::float_bits(f) & 0x7fffffffu) <= 0x7f800000u) {
      bits = static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
      return;
    }
#endif
    bits = detail::float_to_half_bits(f);
  }
  OCTO_HOST_DEVICE operator float() const {
#if defined(OCTO_HOST_F16C)
    if ((bits & 0x7c00u) != 0x7c00u) return _cvtsh_ss(bits);
#endif
    return detail::half_bits_to_float(bits);
  }
};

/// True for octo's 16-bit floating types, which compute through float.
template <typename T>
inline constexpr bool kIsHalfType = std::is_same_v<T, BFloat16> || std::is_same_v<T, Float16>;

}  // namespace octo
