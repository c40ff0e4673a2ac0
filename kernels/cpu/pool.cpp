// CPU max and average pooling (NCHW, any strides), forward and backward, parallel over planes.
//
// Window rules follow PyTorch's CPU kernels exactly: a max window covers the valid positions
// start + k * dilation (padding is -inf; NaN wins), its index is the flat h * W + w within the
// plane; an average window is clipped to [-pad, size + pad) for its divisor when
// count_include_pad, then to the input for its sum (and divisor otherwise).
#include <cmath>
#include <limits>

#include "core/threads.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/loops.h"

namespace octo::kernels {

namespace {

/// One [H, W] plane of a 4-d TensorArg: base pointer and the two inner strides.
template <typename T>
struct Plane {
  T* data;
  int64_t sh, sw;
  T& at(int64_t h, int64_t w) const { return data[h * sh + w * sw]; }
};

template <typename T>
Plane<T> plane(const TensorArg& a, int64_t n, int64_t c) {
  return {a.data_as<T>() + n * a.strides[0] + c * a.strides[1], a.strides[2], a.strides[3]};
}

/// Calls fn(n, c) for every plane of an [N, C, ...] tensor, in parallel; `work` is the cost of a
/// plane in elements touched, to pick a grain.
template <typename Fn>
void for_each_plane(int64_t N, int64_t C, int64_t work, Fn fn) {
  const int64_t grain = std::max<int64_t>(1, cpu::kGrain / std::max<int64_t>(work, 1));
  parallel_for(0, N * C, grain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) fn(i / C, i % C);
  });
}

/// The average window for output (oh, ow): its clipped bounds and divisor (0: empty window).
struct AvgWindow {
  int64_t h0, h1, w0, w1, divisor;
};

AvgWindow avg_window(int64_t oh, int64_t ow, int64_t H, int64_t W, const Pool2dParams& p) {
  int64_t h0 = oh * p.stride[0] - p.padding[0], w0 = ow * p.stride[1] - p.padding[1];
  int64_t h1 = std::min(h0 + p.kernel[0], H + p.padding[0]);
  int64_t w1 = std::min(w0 + p.kernel[1], W + p.padding[1]);
  const int64_t pool_size = (h1 - h0) * (w1 - w0);
  h0 = std::max<int64_t>(h0, 0);
  w0 = std::max<int64_t>(w0, 0);
  h1 = std::min(h1, H);
  w1 = std::min(w1, W);
  if (h0 >= h1 || w0 >= w1) return {h0, h1, w0, w1, 0};
  return {h0, h1, w0, w1, p.count_include_pad ? pool_size : (h1 - h0) * (w1 - w0)};
}

template <typename T>
void max_forward_impl(const TensorArg& out, const TensorArg& indices, const TensorArg& input,
                      const Pool2dParams& p) {
  const int64_t N = input.sizes[0], C = input.sizes[1], H = input.sizes[2], W = input.sizes[3];
  const int64_t OH = out.sizes[2], OW = out.sizes[3];
  const int64_t kH = p.kernel[0], kW = p.kernel[1], dH = p.dilation[0], dW = p.dilation[1];
  for_each_plane(N, C, OH * OW * kH * kW, [&](int64_t n, int64_t c) {
    const Plane<T> in = plane<T>(input, n, c);
    const Plane<T> o = plane<T>(out, n, c);
    const Plane<int64_t> idx = plane<int64_t>(indices, n, c);
    for (int64_t oh = 0; oh < OH; ++oh) {
      int64_t h0 = oh * p.stride[0] - p.padding[0];
      const int64_t h1 = std::min(h0 + (kH - 1) * dH + 1, H);
      while (h0 < 0) h0 += dH;
      for (int64_t ow = 0; ow < OW; ++ow) {
        int64_t w0 = ow * p.stride[1] - p.padding[1];
        const int64_t w1 = std::min(w0 + (kW - 1) * dW + 1, W);
        while (w0 < 0) w0 += dW;
        int64_t best = h0 * W + w0;
        T best_val = -std::numeric_limits<T>::infinity();
        for (int64_t h = h0; h < h1; h += dH) {
          for (int64_t w = w0; w < w1; w += dW) {
            const T v = in.at(h, w);
            if (v > best_val || std::isnan(v)) {
              best_val = v;
              best = h * W + w;
            }
          }
        }
        o.at(oh, ow) = best_val;
        idx.at(oh, ow) = best;
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
    const Plane<T> gi = plane<T>(grad_input, n, c);
    const Plane<T> go = plane<T>(grad_out, n, c);
    const Plane<int64_t> idx = plane<int64_t>(indices, n, c);
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
    const Plane<T> in = plane<T>(input, n, c);
    const Plane<T> o = plane<T>(out, n, c);
    for (int64_t oh = 0; oh < OH; ++oh) {
      for (int64_t ow = 0; ow < OW; ++ow) {
        const AvgWindow win = avg_window(oh, ow, H, W, p);
        if (win.divisor == 0) {
          o.at(oh, ow) = T(0);
          continue;
        }
        T sum = T(0);
        for (int64_t h = win.h0; h < win.h1; ++h)
          for (int64_t w = win.w0; w < win.w1; ++w) sum += in.at(h, w);
        o.at(oh, ow) = sum / static_cast<T>(win.divisor);
      }
    }
  });
}

template <typename T>
void avg_backward_impl(const TensorArg& grad_input, const TensorArg& grad_out,
                       const Pool2dParams& p) {
  const int64_t N = grad_input.sizes[0], C = grad_input.sizes[1], H = grad_input.sizes[2],
                W = grad_input.sizes[3];
  const int64_t OH = grad_out.sizes[2], OW = grad_out.sizes[3];
  for_each_plane(N, C, H * W + OH * OW * p.kernel[0] * p.kernel[1], [&](int64_t n, int64_t c) {
    const Plane<T> gi = plane<T>(grad_input, n, c);
    const Plane<T> go = plane<T>(grad_out, n, c);
    for (int64_t h = 0; h < H; ++h)
      for (int64_t w = 0; w < W; ++w) gi.at(h, w) = T(0);
    for (int64_t oh = 0; oh < OH; ++oh) {
      for (int64_t ow = 0; ow < OW; ++ow) {
        const AvgWindow win = avg_window(oh, ow, H, W, p);
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
  check_4d(out, input, "max_pool2d_forward");
  OCTO_INTERNAL_ASSERT(indices.dtype == kInt64 && indices.ndim == 4);
  if (out.numel() == 0) return;
  OCTO_DISPATCH_FLOATING(input.dtype, "max_pool2d",
                         [&] { max_forward_impl<scalar_t>(out, indices, input, p); });
}

void CpuBackend::max_pool2d_backward(const TensorArg& grad_input, const TensorArg& grad_out,
                                     const TensorArg& indices, const Pool2dParams&) {
  check_4d(grad_input, grad_out, "max_pool2d_backward");
  OCTO_INTERNAL_ASSERT(indices.dtype == kInt64 && indices.ndim == 4);
  if (grad_input.numel() == 0) return;
  OCTO_DISPATCH_FLOATING(grad_input.dtype, "max_pool2d_backward",
                         [&] { max_backward_impl<scalar_t>(grad_input, grad_out, indices); });
}

void CpuBackend::avg_pool2d_forward(const TensorArg& out, const TensorArg& input,
                                    const Pool2dParams& p) {
  check_4d(out, input, "avg_pool2d_forward");
  if (out.numel() == 0) return;
  OCTO_DISPATCH_FLOATING(input.dtype, "avg_pool2d",
                         [&] { avg_forward_impl<scalar_t>(out, input, p); });
}

void CpuBackend::avg_pool2d_backward(const TensorArg& grad_input, const TensorArg& grad_out,
                                     const Pool2dParams& p) {
  check_4d(grad_input, grad_out, "avg_pool2d_backward");
  if (grad_input.numel() == 0) return;
  OCTO_DISPATCH_FLOATING(grad_input.dtype, "avg_pool2d_backward",
                         [&] { avg_backward_impl<scalar_t>(grad_input, grad_out, p); });
}

}  // namespace octo::kernels
