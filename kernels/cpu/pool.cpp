// CPU max and average pooling (NCHW, any strides), forward and backward, parallel over planes.
//
// The window math is kernels/pool_math.h, shared with the CUDA backend (Note [Pooling kernels]).
// The forward calls it for each output; the backward scatters each output's gradient into its
// window (zeroing the plane first), the natural order on one thread and the reference the CUDA
// backend's gather form reproduces.
// GCC 12's AVX-512 intrinsics headers trip -Wmaybe-uninitialized (their _mm512_undefined_*): noise.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <algorithm>
#include <limits>
#include <type_traits>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "core/threads.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/loops.h"
#include "kernels/float32_staging.h"
#include "kernels/functors.h"
#include "kernels/pool_math.h"

namespace octo::kernels {

namespace {

using pool::plane;

/// Calls fn(n, c) for every plane of an [N, C, ...] tensor, in parallel; `work` is the cost of a
/// plane in elements touched, to pick a grain.
template <typename Fn>
void for_each_plane(int64_t N, int64_t C, int64_t work, Fn fn) {
  const int64_t grain = std::max<int64_t>(1, cpu::kGrain / std::max<int64_t>(work, 1));
  parallel_for(0, N * C, grain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) fn(i / C, i % C);
  });
}

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#define OCTO_POOL_AVX512 1

/// Up to 32 consecutive elements of a row of T as floats (lanes 0-15 in lo, 16-31 in hi) and as
/// their raw bits, zero-extended to 32-bit lanes; lanes past `mask` read nothing (zero).
template <typename T>
struct Row32 {
  __m512 lo, hi;
  __m512i lo_bits, hi_bits;
};

template <typename T>
inline Row32<T> load_row32(const T* p, uint32_t mask) {
  Row32<T> r;
  if constexpr (std::is_same_v<T, float>) {
    r.lo = _mm512_maskz_loadu_ps(static_cast<__mmask16>(mask), p);
    r.hi = _mm512_maskz_loadu_ps(static_cast<__mmask16>(mask >> 16), p + 16);
    r.lo_bits = _mm512_castps_si512(r.lo);
    r.hi_bits = _mm512_castps_si512(r.hi);
  } else {
    const __m512i raw = _mm512_maskz_loadu_epi16(mask, p);
    const __m256i lo16 = _mm512_castsi512_si256(raw), hi16 = _mm512_extracti64x4_epi64(raw, 1);
    r.lo_bits = _mm512_cvtepu16_epi32(lo16);
    r.hi_bits = _mm512_cvtepu16_epi32(hi16);
    if constexpr (std::is_same_v<T, BFloat16>) {
      r.lo = _mm512_castsi512_ps(_mm512_slli_epi32(r.lo_bits, 16));
      r.hi = _mm512_castsi512_ps(_mm512_slli_epi32(r.hi_bits, 16));
    } else {  // Float16: only compared, so F16C's widening of any value (NaNs stay NaN) is exact
      r.lo = _mm512_cvtph_ps(lo16);
      r.hi = _mm512_cvtph_ps(hi16);
    }
  }
  return r;
}

/// -inf's bits in T.
template <typename T>
constexpr int32_t kNegInfBits = std::is_same_v<T, float>      ? int32_t(0xff800000u)
                                : std::is_same_v<T, BFloat16> ? 0xff80
                                                              : 0xfc00;

/// Stores the low 16 bits (16-bit T) or all of each lane's bits under `mask`.
template <typename T>
inline void store_row16(T* p, __mmask16 mask, __m512i bits) {
  if constexpr (std::is_same_v<T, float>)
    _mm512_mask_storeu_epi32(p, mask, bits);
  else
    _mm512_mask_cvtepi32_storeu_epi16(p, mask, bits);
}

/// One output row of the 2x2 stride-2 max pool, 16 outputs at a time: rows r0, r1 of the input,
/// `base` the plane index of r0[0], W the plane's row length. The four candidates are taken in
/// pool::max_at's order with its rule (greater, or NaN, replaces), as masked moves; the output
/// is the winner's raw bits, so 16-bit values pass through unconverted.
template <typename T>
void max_2x2_row_avx512(const T* r0, const T* r1, T* out, int64_t* idx, int64_t OW, int64_t base,
                        int64_t W) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  const __m512i lane2 =
      _mm512_slli_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), 1);
  const int32_t w32 = static_cast<int32_t>(W);
  for (int64_t ow0 = 0; ow0 < OW; ow0 += 16) {
    const int64_t n = std::min<int64_t>(16, OW - ow0);
    const uint32_t in_mask = n == 16 ? 0xffffffffu : (1u << (2 * n)) - 1u;
    const __mmask16 out_mask = static_cast<__mmask16>((1u << n) - 1u);
    const Row32<T> a = load_row32(r0 + 2 * ow0, in_mask), b = load_row32(r1 + 2 * ow0, in_mask);
    const __m512 v[4] = {
        _mm512_permutex2var_ps(a.lo, even, a.hi), _mm512_permutex2var_ps(a.lo, odd, a.hi),
        _mm512_permutex2var_ps(b.lo, even, b.hi), _mm512_permutex2var_ps(b.lo, odd, b.hi)};
    const __m512i bits[4] = {_mm512_permutex2var_epi32(a.lo_bits, even, a.hi_bits),
                             _mm512_permutex2var_epi32(a.lo_bits, odd, a.hi_bits),
                             _mm512_permutex2var_epi32(b.lo_bits, even, b.hi_bits),
                             _mm512_permutex2var_epi32(b.lo_bits, odd, b.hi_bits)};
    // Offsets within the plane, relative to base: 2 * ow (+1) in r0, + W in r1.
    const __m512i col = _mm512_add_epi32(lane2, _mm512_set1_epi32(static_cast<int32_t>(2 * ow0)));
    const __m512i off[4] = {col, _mm512_add_epi32(col, _mm512_set1_epi32(1)),
                            _mm512_add_epi32(col, _mm512_set1_epi32(w32)),
                            _mm512_add_epi32(col, _mm512_set1_epi32(w32 + 1))};
    __m512 best = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
    __m512i best_bits = _mm512_set1_epi32(kNegInfBits<T>), at = off[0];
    for (int k = 0; k < 4; ++k) {
      const __mmask16 take =
          _mm512_cmp_ps_mask(v[k], best, _CMP_GT_OQ) | _mm512_cmp_ps_mask(v[k], v[k], _CMP_UNORD_Q);
      best = _mm512_mask_mov_ps(best, take, v[k]);
      best_bits = _mm512_mask_mov_epi32(best_bits, take, bits[k]);
      at = _mm512_mask_mov_epi32(at, take, off[k]);
    }
    // A window of four -inf takes none of them: -inf at offset 0, as the scalar loop.
    store_row16(out + ow0, out_mask, best_bits);
    const __m512i base64 = _mm512_set1_epi64(base);
    _mm512_mask_storeu_epi64(
        idx + ow0, static_cast<__mmask8>(out_mask),
        _mm512_add_epi64(base64, _mm512_cvtepi32_epi64(_mm512_castsi512_si256(at))));
    _mm512_mask_storeu_epi64(
        idx + ow0 + 8, static_cast<__mmask8>(out_mask >> 8),
        _mm512_add_epi64(base64, _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(at, 1))));
  }
}
#endif

/// The common 2x2 window with stride 2 and no padding or dilation, over unit-stride rows: the
/// same comparisons as pool::max_at in the same order (a NaN wins, ties keep the first), with
/// the window bounds known, so the loop is four loads and compares per output (16 outputs per
/// step with AVX-512). T may be a 16-bit float: the values are compared as floats and the
/// winner is stored unchanged, so the result is exact.
template <typename T>
bool max_forward_2x2(const TensorArg& out, const TensorArg& indices, const TensorArg& input,
                     const Pool2dParams& p) {
  const bool plain = p.kernel[0] == 2 && p.kernel[1] == 2 && p.stride[0] == 2 && p.stride[1] == 2 &&
                     p.padding[0] == 0 && p.padding[1] == 0 && p.dilation[0] == 1 &&
                     p.dilation[1] == 1 && input.strides[3] == 1 && out.strides[3] == 1 &&
                     indices.strides[3] == 1;
  const int64_t H = input.sizes[2], W = input.sizes[3], OH = out.sizes[2], OW = out.sizes[3];
  if (!plain || 2 * OH > H || 2 * OW > W) return false;  // ceil_mode's partial windows
#if defined(OCTO_POOL_AVX512)
  constexpr bool kVector = !std::is_same_v<T, double>;
  const bool vector = kVector && H * W < (int64_t{1} << 31);  // int32 offsets
#else
  const bool vector = false;
#endif
  for_each_plane(input.sizes[0], input.sizes[1], OH * OW * 4, [&](int64_t n, int64_t c) {
    const auto in = plane<const T>(input, n, c);
    const auto o = plane<T>(out, n, c);
    const auto idx = plane<int64_t>(indices, n, c);
    for (int64_t oh = 0; oh < OH; ++oh) {
      const T* r0 = &in.at(2 * oh, 0);
      const T* r1 = &in.at(2 * oh + 1, 0);
      T* orow = &o.at(oh, 0);
      int64_t* irow = &idx.at(oh, 0);
      const int64_t base = 2 * oh * W;
#if defined(OCTO_POOL_AVX512)
      if constexpr (kVector) {
        if (vector) {
          max_2x2_row_avx512<T>(r0, r1, orow, irow, OW, base, W);
          continue;
        }
      }
#endif
      (void)vector;
      for (int64_t ow = 0; ow < OW; ++ow) {
        const int64_t w = 2 * ow;
        using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
        T best = T(-std::numeric_limits<C>::infinity());
        int64_t at = base + w;
        const T v[4] = {r0[w], r0[w + 1], r1[w], r1[w + 1]};
        const int64_t i[4] = {base + w, base + w + 1, base + W + w, base + W + w + 1};
        for (int k = 0; k < 4; ++k) {
          // As pool::max_at (v != v: NaN), written as selects: the winner's place is random in
          // real data, so a branch here mispredicts about half the time.
          const C cv = static_cast<C>(v[k]);
          const bool take = cv > static_cast<C>(best) || cv != cv;
          best = take ? v[k] : best;
          at = take ? i[k] : at;
        }
        orow[ow] = best;
        irow[ow] = at;
      }
    }
  });
  return true;
}

template <typename T>
void max_forward_impl(const TensorArg& out, const TensorArg& indices, const TensorArg& input,
                      const Pool2dParams& p) {
  if (max_forward_2x2<T>(out, indices, input, p)) return;
  const int64_t N = input.sizes[0], C = input.sizes[1], H = input.sizes[2], W = input.sizes[3];
  const int64_t OH = out.sizes[2], OW = out.sizes[3];
  for_each_plane(N, C, OH * OW * p.kernel[0] * p.kernel[1], [&](int64_t n, int64_t c) {
    const auto in = plane<const T>(input, n, c);
    const auto o = plane<T>(out, n, c);
    const auto idx = plane<int64_t>(indices, n, c);
    for (int64_t oh = 0; oh < OH; ++oh) {
      for (int64_t ow = 0; ow < OW; ++ow) {
        const pool::MaxResult<T> m = pool::max_at(in, oh, ow, H, W, p);
        o.at(oh, ow) = m.value;
        idx.at(oh, ow) = m.index;
      }
    }
  });
}

template <typename T>
void max_backward_impl(const TensorArg& grad_input, const TensorArg& grad_out,
                       const TensorArg& indices) {
  const int64_t N = grad_input.sizes[0], C = grad_input.sizes[1], H = grad_input.sizes[2],
                W = grad_input.sizes[3];
  const int64_t OH = grad_out.sizes[2], OW = grad_out.sizes[3];
  for_each_plane(N, C, H * W + OH * OW, [&](int64_t n, int64_t c) {
    const auto gi = plane<T>(grad_input, n, c);
    const auto go = plane<const T>(grad_out, n, c);
    const auto idx = plane<const int64_t>(indices, n, c);
    const bool dense = gi.sw == 1 && gi.sh == W;
    for (int64_t h = 0; h < H; ++h) {
      if (gi.sw == 1)
        std::fill_n(&gi.at(h, 0), W, T(0));
      else
        for (int64_t w = 0; w < W; ++w) gi.at(h, w) = T(0);
    }
    for (int64_t oh = 0; oh < OH; ++oh) {
      for (int64_t ow = 0; ow < OW; ++ow) {
        const int64_t i = idx.at(oh, ow);
        OCTO_INTERNAL_ASSERT(i >= 0 && i < H * W, "max_pool2d_backward: index ", i,
                             " outside a plane of ", H, "x", W);
        T& g = dense ? gi.data[i] : gi.at(i / W, i % W);  // no division on dense planes
        g = T(static_cast<compute_t<T>>(g) + static_cast<compute_t<T>>(go.at(oh, ow)));
      }
    }
  });
}

template <typename T>
void avg_forward_impl(const TensorArg& out, const TensorArg& input, const Pool2dParams& p) {
  const int64_t N = input.sizes[0], C = input.sizes[1], H = input.sizes[2], W = input.sizes[3];
  const int64_t OH = out.sizes[2], OW = out.sizes[3];
  for_each_plane(N, C, OH * OW * p.kernel[0] * p.kernel[1], [&](int64_t n, int64_t c) {
    const auto in = plane<const T>(input, n, c);
    const auto o = plane<T>(out, n, c);
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) o.at(oh, ow) = pool::avg_at(in, oh, ow, H, W, p);
  });
}

template <typename T>
void avg_backward_impl(const TensorArg& grad_input, const TensorArg& grad_out,
                       const Pool2dParams& p) {
  const int64_t N = grad_input.sizes[0], C = grad_input.sizes[1], H = grad_input.sizes[2],
                W = grad_input.sizes[3];
  const int64_t OH = grad_out.sizes[2], OW = grad_out.sizes[3];
  for_each_plane(N, C, H * W + OH * OW * p.kernel[0] * p.kernel[1], [&](int64_t n, int64_t c) {
    const auto gi = plane<T>(grad_input, n, c);
    const auto go = plane<const T>(grad_out, n, c);
    for (int64_t h = 0; h < H; ++h)
      for (int64_t w = 0; w < W; ++w) gi.at(h, w) = T(0);
    for (int64_t oh = 0; oh < OH; ++oh) {
      for (int64_t ow = 0; ow < OW; ++ow) {
        const pool::AvgWindow win = pool::avg_window(oh, ow, H, W, p);
        if (win.divisor == 0) continue;
        const T g = go.at(oh, ow) / static_cast<T>(win.divisor);
        for (int64_t h = win.h0; h < win.h1; ++h)
          for (int64_t w = win.w0; w < win.w1; ++w) gi.at(h, w) += g;
      }
    }
  });
}

void check_4d(const TensorArg& a, const TensorArg& b, const char* op) {
  OCTO_INTERNAL_ASSERT(a.ndim == 4 && b.ndim == 4, op);
  OCTO_INTERNAL_ASSERT(a.sizes[0] == b.sizes[0] && a.sizes[1] == b.sizes[1], op);
}

}  // namespace

// Note [16-bit max pooling]: a max is exact in any precision, and so is its backward when no
// input lies in two windows (each input gets at most one gradient, added to zero once). Those
// cases run on 16-bit tensors directly -- the 2x2 stride-2 forward and the non-overlapping
// backward, which is what the examples' networks use -- with the bits staging through float32
// would give; other windows stage (Note [16-bit kernels]).
namespace {

bool is_16bit(DType t) { return t == kBFloat16 || t == kFloat16; }

bool windows_overlap(const Pool2dParams& p) {
  for (int d = 0; d < 2; ++d)
    if ((p.kernel[d] - 1) * p.dilation[d] + 1 > p.stride[d]) return true;
  return false;
}

}  // namespace

void CpuBackend::max_pool2d_forward(const TensorArg& out, const TensorArg& indices,
                                    const TensorArg& input, const Pool2dParams& p) {
  if (is_16bit(input.dtype) && out.dtype == input.dtype) {  // Note [16-bit max pooling]
    check_4d(out, input, "max_pool2d_forward");
    OCTO_INTERNAL_ASSERT(indices.dtype == kInt64 && indices.ndim == 4);
    if (out.numel() == 0) return;
    const bool done = input.dtype == kBFloat16 ? max_forward_2x2<BFloat16>(out, indices, input, p)
                                               : max_forward_2x2<Float16>(out, indices, input, p);
    if (done) return;
  }
  if (staged_max_pool2d_forward(*this, out, indices, input, p)) return;  // Note [16-bit kernels]
  check_4d(out, input, "max_pool2d_forward");
  OCTO_INTERNAL_ASSERT(indices.dtype == kInt64 && indices.ndim == 4);
  if (out.numel() == 0) return;
  OCTO_DISPATCH_FLOATING(input.dtype, "max_pool2d",
                         [&] { max_forward_impl<scalar_t>(out, indices, input, p); });
}

void CpuBackend::max_pool2d_backward(const TensorArg& grad_input, const TensorArg& grad_out,
                                     const TensorArg& indices, const Pool2dParams& p) {
  if (is_16bit(grad_input.dtype) && grad_out.dtype == grad_input.dtype &&
      !windows_overlap(p)) {  // Note [16-bit max pooling]
    check_4d(grad_input, grad_out, "max_pool2d_backward");
    OCTO_INTERNAL_ASSERT(indices.dtype == kInt64 && indices.ndim == 4);
    if (grad_input.numel() == 0) return;
    if (grad_input.dtype == kBFloat16)
      max_backward_impl<BFloat16>(grad_input, grad_out, indices);
    else
      max_backward_impl<Float16>(grad_input, grad_out, indices);
    return;
  }
  if (staged_max_pool2d_backward(*this, grad_input, grad_out, indices, p))
    return;  // Note [16-bit kernels]
  check_4d(grad_input, grad_out, "max_pool2d_backward");
  OCTO_INTERNAL_ASSERT(indices.dtype == kInt64 && indices.ndim == 4);
  if (grad_input.numel() == 0) return;
  OCTO_DISPATCH_FLOATING(grad_input.dtype, "max_pool2d_backward",
                         [&] { max_backward_impl<scalar_t>(grad_input, grad_out, indices); });
}

void CpuBackend::avg_pool2d_forward(const TensorArg& out, const TensorArg& input,
                                    const Pool2dParams& p) {
  if (staged_avg_pool2d_forward(*this, out, input, p)) return;  // Note [16-bit kernels]
  check_4d(out, input, "avg_pool2d_forward");
  if (out.numel() == 0) return;
  OCTO_DISPATCH_FLOATING(input.dtype, "avg_pool2d",
                         [&] { avg_forward_impl<scalar_t>(out, input, p); });
}

void CpuBackend::avg_pool2d_backward(const TensorArg& grad_input, const TensorArg& grad_out,
                                     const Pool2dParams& p) {
  if (staged_avg_pool2d_backward(*this, grad_input, grad_out, p)) return;  // Note [16-bit kernels]
  check_4d(grad_input, grad_out, "avg_pool2d_backward");
  if (grad_input.numel() == 0) return;
  OCTO_DISPATCH_FLOATING(grad_input.dtype, "avg_pool2d_backward",
                         [&] { avg_backward_impl<scalar_t>(grad_input, grad_out, p); });
}

}  // namespace octo::kernels
