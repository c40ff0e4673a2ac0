// im2col / col2im for one [C, H, W] image and the conv geometry the CPU conv kernels share.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/backend.h"

namespace octo::kernels::cpu {

/// Sizes of one conv2d call, read from the TensorArgs (input [N, C, H, W], weight
/// [K, C/G, kH, kW], output [N, K, OH, OW]). A "col" matrix for one sample and group is
/// [rows() = Cg*kH*kW, cols() = OH*OW], row r = (c*kH + i)*kW + j.
struct ConvGeometry {
  int64_t N = 0, C = 0, H = 0, W = 0;
  int64_t K = 0, kH = 0, kW = 0;
  int64_t OH = 0, OW = 0;
  int64_t G = 1, Cg = 0, Kg = 0;
  int64_t sH = 1, sW = 1, pH = 0, pW = 0, dH = 1, dW = 1;

  ConvGeometry(const TensorArg& input, const TensorArg& weight, const TensorArg& out,
               const Conv2dParams& p)
      : N(input.sizes[0]),
        C(input.sizes[1]),
        H(input.sizes[2]),
        W(input.sizes[3]),
        K(weight.sizes[0]),
        kH(weight.sizes[2]),
        kW(weight.sizes[3]),
        OH(out.sizes[2]),
        OW(out.sizes[3]),
        G(p.groups),
        Cg(weight.sizes[1]),
        Kg(weight.sizes[0] / p.groups),
        sH(p.stride[0]),
        sW(p.stride[1]),
        pH(p.padding[0]),
        pW(p.padding[1]),
        dH(p.dilation[0]),
        dW(p.dilation[1]) {}

  int64_t rows() const { return Cg * kH * kW; }
  int64_t cols() const { return OH * OW; }
  /// A 1x1 kernel with stride 1 and no padding: the image itself is the col matrix.
  bool pointwise() const { return kH == 1 && kW == 1 && sH == 1 && sW == 1 && pH == 0 && pW == 0; }
};

/// The output positions o in [lo, hi) whose input position start + o * stride lies in [0, n).
inline void valid_range(int64_t start, int64_t stride, int64_t n, int64_t out_n, int64_t& lo,
                        int64_t& hi) {
  // smallest o with start + o*stride >= 0; smallest o with start + o*stride >= n
  lo = start >= 0 ? 0 : (-start + stride - 1) / stride;
  hi = n - start <= 0 ? 0 : (n - start + stride - 1) / stride;
  lo = std::min(lo, out_n);
  hi = std::clamp(hi, lo, out_n);
}

/// col[Cg*kH*kW, OH*OW] = the patches of img[Cg, H, W] (contiguous), zeros where padded.
template <typename T>
void im2col(const T* img, T* col, const ConvGeometry& g) {
  const int64_t P = g.cols();
  for (int64_t c = 0; c < g.Cg; ++c) {
    const T* plane = img + c * g.H * g.W;
    for (int64_t i = 0; i < g.kH; ++i) {
      int64_t oh_lo, oh_hi;
      valid_range(i * g.dH - g.pH, g.sH, g.H, g.OH, oh_lo, oh_hi);
      for (int64_t j = 0; j < g.kW; ++j) {
        T* dst = col + ((c * g.kH + i) * g.kW + j) * P;
        const int64_t w0 = j * g.dW - g.pW;
        int64_t ow_lo, ow_hi;
        valid_range(w0, g.sW, g.W, g.OW, ow_lo, ow_hi);
        std::fill(dst, dst + oh_lo * g.OW, T(0));
        for (int64_t oh = oh_lo; oh < oh_hi; ++oh) {
          T* d = dst + oh * g.OW;
          const T* s = plane + (oh * g.sH + i * g.dH - g.pH) * g.W;
          std::fill(d, d + ow_lo, T(0));
          if (g.sW == 1) {
            std::memcpy(d + ow_lo, s + (w0 + ow_lo),
                        static_cast<size_t>(ow_hi - ow_lo) * sizeof(T));
          } else {
            for (int64_t ow = ow_lo; ow < ow_hi; ++ow) d[ow] = s[w0 + ow * g.sW];
          }
          std::fill(d + ow_hi, d + g.OW, T(0));
        }
        std::fill(dst + oh_hi * g.OW, dst + P, T(0));
      }
    }
  }
}

/// img[Cg, H, W] += the patches in col (the adjoint of im2col); padded positions are dropped.
template <typename T>
void col2im_add(const T* col, T* img, const ConvGeometry& g) {
  const int64_t P = g.cols();
  for (int64_t c = 0; c < g.Cg; ++c) {
    T* plane = img + c * g.H * g.W;
    for (int64_t i = 0; i < g.kH; ++i) {
      int64_t oh_lo, oh_hi;
      valid_range(i * g.dH - g.pH, g.sH, g.H, g.OH, oh_lo, oh_hi);
      for (int64_t j = 0; j < g.kW; ++j) {
        const T* src = col + ((c * g.kH + i) * g.kW + j) * P;
        const int64_t w0 = j * g.dW - g.pW;
        int64_t ow_lo, ow_hi;
        valid_range(w0, g.sW, g.W, g.OW, ow_lo, ow_hi);
        for (int64_t oh = oh_lo; oh < oh_hi; ++oh) {
          const T* s = src + oh * g.OW;
          T* d = plane + (oh * g.sH + i * g.dH - g.pH) * g.W;
          if (g.sW == 1) {
            for (int64_t ow = ow_lo; ow < ow_hi; ++ow) d[w0 + ow] += s[ow];
          } else {
            for (int64_t ow = ow_lo; ow < ow_hi; ++ow) d[w0 + ow * g.sW] += s[ow];
          }
        }
      }
    }
  }
}

}  // namespace octo::kernels::cpu
