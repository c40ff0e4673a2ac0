// CPU max and average pooling (NCHW, any strides), forward and backward, parallel over planes.
//
// The window math is kernels/pool_math.h, shared with the CUDA backend (Note [Pooling kernels]).
// The forward calls it for each output; the backward scatters each output's gradient into its
// window (zeroing the plane first), the natural order on one thread and the reference the CUDA
// backend's gather form reproduces.
#include <algorithm>
#include <limits>

#include "core/threads.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/loops.h"
#include "kernels/float32_staging.h"
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

/// The common 2x2 window with stride 2 and no padding or dilation, over unit-stride rows: the
/// same comparisons as pool::max_at in the same order (a NaN wins, ties keep the first), with
/// the window bounds known, so the loop is four loads and compares per output.
template <typename T>
bool max_forward_2x2(const TensorArg& out, const TensorArg& indices, const TensorArg& input,
                     const Pool2dParams& p) {
  const bool plain = p.kernel[0] == 2 && p.kernel[1] == 2 && p.stride[0] == 2 && p.stride[1] == 2 &&
                     p.padding[0] == 0 && p.padding[1] == 0 && p.dilation[0] == 1 &&
                     p.dilation[1] == 1 && input.strides[3] == 1 && out.strides[3] == 1 &&
                     indices.strides[3] == 1;
  const int64_t H = input.sizes[2], W = input.sizes[3], OH = out.sizes[2], OW = out.sizes[3];
  if (!plain || 2 * OH > H || 2 * OW > W) return false;  // ceil_mode's partial windows
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
      for (int64_t ow = 0; ow < OW; ++ow) {
        const int64_t w = 2 * ow;
        T best = -std::numeric_limits<T>::infinity();
        int64_t at = base + w;
        const T v[4] = {r0[w], r0[w + 1], r1[w], r1[w + 1]};
        const int64_t i[4] = {base + w, base + w + 1, base + W + w, base + W + w + 1};
        for (int k = 0; k < 4; ++k) {
          // As pool::max_at (v != v: NaN), written as selects: the winner's place is random in
          // real data, so a branch here mispredicts about half the time.
          const bool take = v[k] > best || v[k] != v[k];
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
    for (int64_t h = 0; h < H; ++h)
      for (int64_t w = 0; w < W; ++w) gi.at(h, w) = T(0);
    for (int64_t oh = 0; oh < OH; ++oh) {
      for (int64_t ow = 0; ow < OW; ++ow) {
        const int64_t i = idx.at(oh, ow);
        OCTO_INTERNAL_ASSERT(i >= 0 && i < H * W, "max_pool2d_backward: index ", i,
                             " outside a plane of ", H, "x", W);
        gi.at(i / W, i % W) += go.at(oh, ow);
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

void CpuBackend::max_pool2d_forward(const TensorArg& out, const TensorArg& indices,
                                    const TensorArg& input, const Pool2dParams& p) {
  if (staged_max_pool2d_forward(*this, out, indices, input, p)) return;  // Note [16-bit kernels]
  check_4d(out, input, "max_pool2d_forward");
  OCTO_INTERNAL_ASSERT(indices.dtype == kInt64 && indices.ndim == 4);
  if (out.numel() == 0) return;
  OCTO_DISPATCH_FLOATING(input.dtype, "max_pool2d",
                         [&] { max_forward_impl<scalar_t>(out, indices, input, p); });
}

void CpuBackend::max_pool2d_backward(const TensorArg& grad_input, const TensorArg& grad_out,
                                     const TensorArg& indices, const Pool2dParams& p) {
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
