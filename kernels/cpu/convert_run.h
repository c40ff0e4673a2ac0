// A contiguous run of one dtype conversion, `dst[i] = convert<D>(src[i])`, with AVX-512 loops for
// the conversions between float32 and the 16-bit floats, which autocast and the float32 staging
// of Note [16-bit kernels] run on every 16-bit op.
//
// The vector loops give the bits the element-wise conversion gives (kernels/convert.h and
// core/half.h), NaNs included: bfloat16 rounding is the same integer arithmetic on 16 lanes;
// float16 uses the F16C conversions Float16 itself uses and puts the portable path's NaNs in the
// lanes that hold one (tests/kernels/test_convert.cpp compares every 16-bit value and a sweep
// of floats). Without AVX-512 (a build without -march=native) the element loop runs.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/half.h"
#include "kernels/convert.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#include <immintrin.h>
#define OCTO_CONVERT_AVX512 1
#endif

namespace octo::kernels::cpu {

#if defined(OCTO_CONVERT_AVX512)
// GCC 12's AVX-512 intrinsics headers trip -Wmaybe-uninitialized (their _mm512_undefined_*): noise.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
namespace convert_detail {

/// 16 floats -> bfloat16 bits, as BFloat16(float): round to nearest even, NaN -> quiet NaN.
inline __m256i float_to_bf16(__m512i u) {
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i rounded =
      _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb)), 16);
  const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                                _mm512_set1_epi32(0x7f800000));
  return _mm512_cvtepi32_epi16(_mm512_mask_mov_epi32(rounded, nan, quiet));
}

/// 16 bfloat16 bits -> floats (exact).
inline __m512i bf16_to_float(__m256i h) { return _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16); }

/// 16 floats -> float16 bits, as Float16(float): F16C, NaN lanes as detail::float_to_half_bits.
inline __m256i float_to_f16(__m512 v) {
  const __m256i h = _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  if (!nan) return h;
  const __m512i sign =
      _mm512_and_si512(_mm512_srli_epi32(_mm512_castps_si512(v), 16), _mm512_set1_epi32(0x8000));
  const __m256i quiet = _mm512_cvtepi32_epi16(_mm512_or_si512(sign, _mm512_set1_epi32(0x7e00)));
  return _mm256_mask_blend_epi16(nan, h, quiet);
}

/// 16 float16 bits -> floats (exact): F16C, infinity and NaN lanes as detail::half_bits_to_float.
inline __m512 f16_to_float(__m256i h) {
  const __m512 f = _mm512_cvtph_ps(h);
  const __m512i b = _mm512_cvtepu16_epi32(h);
  const __m512i exp = _mm512_set1_epi32(0x7c00);
  const __mmask16 special = _mm512_cmpeq_epi32_mask(_mm512_and_si512(b, exp), exp);
  if (!special) return f;
  const __m512i sign = _mm512_slli_epi32(_mm512_and_si512(b, _mm512_set1_epi32(0x8000)), 16);
  const __m512i mant = _mm512_slli_epi32(_mm512_and_si512(b, _mm512_set1_epi32(0x3ff)), 13);
  const __m512i bits = _mm512_or_si512(_mm512_or_si512(sign, _mm512_set1_epi32(0x7f800000)), mant);
  return _mm512_mask_mov_ps(f, special, _mm512_castsi512_ps(bits));
}

}  // namespace convert_detail
#endif

/// dst[i] = convert<D>(src[i]) for i < n. Between different dtypes dst and src must not overlap;
/// a same-dtype run is a memmove.
template <typename D, typename S>
inline void convert_run(D* dst, const S* src, int64_t n) {
  if constexpr (std::is_same_v<D, S>) {
    if (n > 0) std::memmove(dst, src, static_cast<size_t>(n) * sizeof(D));
    return;
  }
  int64_t i = 0;
#if defined(OCTO_CONVERT_AVX512)
  namespace cd = convert_detail;
  if constexpr (std::is_same_v<S, float> && std::is_same_v<D, BFloat16>) {
    for (; i + 16 <= n; i += 16)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i),
                          cd::float_to_bf16(_mm512_loadu_si512(src + i)));
  } else if constexpr (std::is_same_v<S, BFloat16> && std::is_same_v<D, float>) {
    for (; i + 16 <= n; i += 16)
      _mm512_storeu_si512(
          dst + i,
          cd::bf16_to_float(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i))));
  } else if constexpr (std::is_same_v<S, float> && std::is_same_v<D, Float16>) {
    for (; i + 16 <= n; i += 16)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i),
                          cd::float_to_f16(_mm512_loadu_ps(src + i)));
  } else if constexpr (std::is_same_v<S, Float16> && std::is_same_v<D, float>) {
    for (; i + 16 <= n; i += 16)
      _mm512_storeu_ps(
          dst + i, cd::f16_to_float(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i))));
  }
#endif
  for (; i < n; ++i) dst[i] = convert<D>(src[i]);
}
#if defined(OCTO_CONVERT_AVX512)
#pragma GCC diagnostic pop
#endif

}  // namespace octo::kernels::cpu
