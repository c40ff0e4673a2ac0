// Window math of 2-d max and average pooling for one element, shared by the CPU and CUDA backends.
//
// Note [Pooling kernels]
// Pooling runs on octo's own kernels on both devices, not on cuDNN: cuDNN's max pooling returns
// no argmax indices (octo's autograd saves them, as PyTorch's own CUDA max_pool2d kernels do) and
// cuDNN has no ceil_mode or dilation. Each backend only walks the elements (planes in parallel on
// the CPU, one thread per element on CUDA) and calls the OCTO_HOST_DEVICE functions below for
// each, so the CPU tests that CI runs check the arithmetic the GPU does.
//
// The rules are PyTorch's:
//  - max: output o along an axis reads positions o * stride - pad + k * dilation (k < kernel)
//    that lie in the input; padding counts as -inf, a NaN wins, ties keep the first position in
//    row-major order; the index is h * W + w within the plane.
//  - average: the window [o * stride - pad, + kernel) clipped to [-pad, size + pad) gives the
//    divisor when count_include_pad; clipped to the input it gives the summed elements (and the
//    divisor otherwise). The sum runs in T in row-major order, then one division.
//  - backward, gather form (the CUDA kernels): input position (h, w) adds the contributions of
//    the outputs whose windows can contain it, in row-major output order. That is the order in
//    which the CPU's scatter form adds them, so both give the same bits.
#pragma once

#include <cstdint>
#include <limits>

#include "core/macros.h"
#include "kernels/backend.h"
#include "kernels/tensor_arg.h"

namespace octo::kernels::pool {

/// One [H, W] plane of a 4-d tensor: its first element and the strides of its rows and columns.
template <typename T>
struct Plane {
  T* data;
  int64_t sh, sw;
  OCTO_HOST_DEVICE T& at(int64_t h, int64_t w) const { return data[h * sh + w * sw]; }
};

/// Plane (n, c) of a 4-d [N, C, H, W] TensorArg.
template <typename T>
OCTO_HOST_DEVICE inline Plane<T> plane(const TensorArg& a, int64_t n, int64_t c) {
  return {a.data_as<T>() + n * a.strides[0] + c * a.strides[1], a.strides[2], a.strides[3]};
}

OCTO_HOST_DEVICE inline int64_t min_i64(int64_t a, int64_t b) { return a < b ? a : b; }
OCTO_HOST_DEVICE inline int64_t max_i64(int64_t a, int64_t b) { return a > b ? a : b; }

/// Positions [begin, end) along one axis (every step-th one, where a step applies).
struct Range {
  int64_t begin, end;
};

// --- max pooling ---------------------------------------------------------------------------------

/// The input positions along one axis that output o's max window reads: begin, begin + dilation,
/// ... below end (empty when begin >= end).
OCTO_HOST_DEVICE inline Range max_window(int64_t o, int64_t size, int64_t kernel, int64_t stride,
                                         int64_t pad, int64_t dilation) {
  int64_t begin = o * stride - pad;
  const int64_t end = min_i64(begin + (kernel - 1) * dilation + 1, size);
  while (begin < 0) begin += dilation;
  return {begin, end};
}

template <typename T>
struct MaxResult {
  T value;
  int64_t index;  // h * W + w within the plane
};

/// Max pooling output (oh, ow) of an H x W input plane.
template <typename T>
OCTO_HOST_DEVICE inline MaxResult<T> max_at(const Plane<const T>& in, int64_t oh, int64_t ow,
                                            int64_t H, int64_t W, const Pool2dParams& p) {
  const Range hr = max_window(oh, H, p.kernel[0], p.stride[0], p.padding[0], p.dilation[0]);
  const Range wr = max_window(ow, W, p.kernel[1], p.stride[1], p.padding[1], p.dilation[1]);
  MaxResult<T> r{-std::numeric_limits<T>::infinity(), hr.begin * W + wr.begin};
  for (int64_t h = hr.begin; h < hr.end; h += p.dilation[0]) {
    for (int64_t w = wr.begin; w < wr.end; w += p.dilation[1]) {
      const T v = in.at(h, w);
      if (v > r.value || v != v) {  // v != v: NaN
        r.value = v;
        r.index = h * W + w;
      }
    }
  }
  return r;
}

// --- average pooling -----------------------------------------------------------------------------

/// The average window of output (oh, ow): its bounds clipped to the input and its divisor
/// (0: the window holds no input element).
struct AvgWindow {
  int64_t h0, h1, w0, w1, divisor;
};

OCTO_HOST_DEVICE inline AvgWindow avg_window(int64_t oh, int64_t ow, int64_t H, int64_t W,
                                             const Pool2dParams& p) {
  int64_t h0 = oh * p.stride[0] - p.padding[0], w0 = ow * p.stride[1] - p.padding[1];
  int64_t h1 = min_i64(h0 + p.kernel[0], H + p.padding[0]);
  int64_t w1 = min_i64(w0 + p.kernel[1], W + p.padding[1]);
  const int64_t pool_size = (h1 - h0) * (w1 - w0);
  h0 = max_i64(h0, 0);
  w0 = max_i64(w0, 0);
  h1 = min_i64(h1, H);
  w1 = min_i64(w1, W);
  if (h0 >= h1 || w0 >= w1) return {h0, h1, w0, w1, 0};
  return {h0, h1, w0, w1, p.count_include_pad ? pool_size : (h1 - h0) * (w1 - w0)};
}

/// Average pooling output (oh, ow) of an H x W input plane (0 for an empty window).
template <typename T>
OCTO_HOST_DEVICE inline T avg_at(const Plane<const T>& in, int64_t oh, int64_t ow, int64_t H,
                                 int64_t W, const Pool2dParams& p) {
  const AvgWindow win = avg_window(oh, ow, H, W, p);
  if (win.divisor == 0) return T(0);
  T sum = T(0);
  for (int64_t h = win.h0; h < win.h1; ++h)
    for (int64_t w = win.w0; w < win.w1; ++w) sum += in.at(h, w);
  return sum / static_cast<T>(win.divisor);
}

// --- backward, gather form -----------------------------------------------------------------------

/// The outputs [begin, end) along one axis whose windows, `span` positions from o * stride - pad
/// (span = (kernel - 1) * dilation + 1), contain input position x in [0, size); PyTorch's
/// p_start / p_end. With dilation > 1 a window may step over x; callers check.
OCTO_HOST_DEVICE inline Range covering_outputs(int64_t x, int64_t span, int64_t stride, int64_t pad,
                                               int64_t out_size) {
  const int64_t t = x + pad;  // x's distance from the first window's start
  const int64_t begin = t < span ? 0 : (t - span) / stride + 1;
  return {begin, min_i64(t / stride + 1, out_size)};
}

/// d(loss)/d(input(h, w)) of max pooling on one plane: the sum of grad_out over the outputs
/// whose argmax is h * W + w, in row-major output order. grad_out and indices are OH x OW.
template <typename T>
OCTO_HOST_DEVICE inline T max_grad_at(const Plane<const T>& grad_out,
                                      const Plane<const int64_t>& indices, int64_t h, int64_t w,
                                      int64_t W, int64_t OH, int64_t OW, const Pool2dParams& p) {
  const Range hr =
      covering_outputs(h, (p.kernel[0] - 1) * p.dilation[0] + 1, p.stride[0], p.padding[0], OH);
  const Range wr =
      covering_outputs(w, (p.kernel[1] - 1) * p.dilation[1] + 1, p.stride[1], p.padding[1], OW);
  const int64_t self = h * W + w;
  T grad = T(0);
  for (int64_t oh = hr.begin; oh < hr.end; ++oh)
    for (int64_t ow = wr.begin; ow < wr.end; ++ow)
      if (indices.at(oh, ow) == self) grad += grad_out.at(oh, ow);
  return grad;
}

/// d(loss)/d(input(h, w)) of average pooling on an H x W plane: the sum of grad_out / divisor
/// over the windows that contain (h, w), in row-major output order. grad_out is OH x OW.
template <typename T>
OCTO_HOST_DEVICE inline T avg_grad_at(const Plane<const T>& grad_out, int64_t h, int64_t w,
                                      int64_t H, int64_t W, int64_t OH, int64_t OW,
                                      const Pool2dParams& p) {
  const Range hr = covering_outputs(h, p.kernel[0], p.stride[0], p.padding[0], OH);
  const Range wr = covering_outputs(w, p.kernel[1], p.stride[1], p.padding[1], OW);
  T grad = T(0);
  for (int64_t oh = hr.begin; oh < hr.end; ++oh) {
    for (int64_t ow = wr.begin; ow < wr.end; ++ow) {
      const AvgWindow win = avg_window(oh, ow, H, W, p);
      if (h < win.h0 || h >= win.h1 || w < win.w0 || w >= win.w1) continue;
      grad += grad_out.at(oh, ow) / static_cast<T>(win.divisor);
    }
  }
  return grad;
}

}  // namespace octo::kernels::pool
