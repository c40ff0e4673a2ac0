// Batch transforms, written with tensor ops and per-image copies.
#include "data/transforms.h"

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "kernels/backend.h"
#include "tensor/factories.h"

namespace octo::data {

Tensor to_float(const Tensor& images) {
  OCTO_CHECK_VALUE(images.dtype() == kUInt8, "to_float: expected uint8 images, got ",
                   images.dtype());
  NoGradGuard no_grad;
  Tensor out = images.to(kFloat32);
  out.mul_(1.0 / 255.0);  // in place: one buffer, two passes
  return out;
}

// Note [One-pass normalize]
// A batch is normalised once per step, so its cost is per-batch overhead of every epoch: the
// composite (x / 255 - mean) * (1 / std) is four passes over the batch and three buffers. Here
// it is the conversion (for uint8) and one Affine pass per channel, x * scale + shift with
// scale = 1 / (255 std) and shift = -mean / std, in place on the converted batch (or from a float
// input into one new tensor). Affine is an entry of the op table (kernels/functors.h), so CUDA
// batches run the same math. A float input that requires grad under grad mode keeps the
// differentiable composite. The fused order rounds differently from the composite: within a few
// float ulps of it (tests/data/test_data.cpp).
Tensor normalize(const Tensor& images, const std::vector<double>& mean,
                 const std::vector<double>& std) {
  OCTO_CHECK_VALUE(images.dim() == 3 || images.dim() == 4,
                   "normalize: expected [C, H, W] or [N, C, H, W] images, got shape ",
                   images.sizes());
  const bool bytes = images.dtype() == kUInt8;
  OCTO_CHECK_VALUE(bytes || is_floating(images.dtype()),
                   "normalize: expected uint8 or floating-point images, got ", images.dtype());
  int64_t c_dim = images.dim() - 3;
  int64_t c = images.size(c_dim);
  OCTO_CHECK_VALUE(static_cast<int64_t>(mean.size()) == c && static_cast<int64_t>(std.size()) == c,
                   "normalize: images have ", c, " channels but got ", mean.size(), " means and ",
                   std.size(), " standard deviations");
  for (double s : std)
    OCTO_CHECK_VALUE(s > 0, "normalize: standard deviations must be positive, got ", s);
  const double in_scale = bytes ? 1.0 / 255.0 : 1.0;
  if (!bytes && images.requires_grad() &&
      autograd::GradMode::is_enabled()) {  // differentiable composite
    TensorOptions opts{.dtype = images.dtype(), .device = images.device()};
    std::vector<double> inv;
    for (double s : std) inv.push_back(1.0 / s);
    return (images - tensor(mean, {c, 1, 1}, opts)) * tensor(inv, {c, 1, 1}, opts);
  }
  NoGradGuard no_grad;
  Tensor out = bytes ? images.to(kFloat32) : empty_like(images);
  if (out.numel() == 0) return out;
  const Tensor& src = bytes ? out : images;
  kernels::Backend& backend = kernels::backend(out.device());
  for (int64_t ch = 0; ch < c; ++ch) {
    const Tensor in_c = c == 1 ? src : src.select(c_dim, ch);
    const Tensor out_c = c == 1 ? out : out.select(c_dim, ch);
    backend.unary(kernels::UnaryOp::Affine, out_c.arg(), in_c.arg(), Scalar(in_scale / std[ch]),
                  Scalar(-mean[ch] / std[ch]));
  }
  return out;
}

Tensor random_crop(const Tensor& images, int64_t size, int64_t padding, Generator& gen) {
  OCTO_CHECK_VALUE(images.dim() == 4, "random_crop: expected [N, C, H, W] images, got shape ",
                   images.sizes());
  OCTO_CHECK_VALUE(size > 0 && padding >= 0,
                   "random_crop: size must be positive and padding non-negative, got ", size,
                   " and ", padding);
  int64_t n = images.size(0), c = images.size(1), h = images.size(2), w = images.size(3);
  int64_t ph = h + 2 * padding, pw = w + 2 * padding;
  OCTO_CHECK_VALUE(size <= ph && size <= pw, "random_crop: crop ", size,
                   " is larger than the padded image ", ph, "x", pw);
  NoGradGuard no_grad;
  Tensor padded = zeros({n, c, ph, pw}, {.dtype = images.dtype(), .device = images.device()});
  padded.narrow(2, padding, h).narrow(3, padding, w).copy_(images);
  Tensor out = empty({n, c, size, size}, {.dtype = images.dtype(), .device = images.device()});
  for (int64_t i = 0; i < n; ++i) {
    auto top = static_cast<int64_t>(gen.randint(static_cast<uint64_t>(ph - size + 1)));
    auto left = static_cast<int64_t>(gen.randint(static_cast<uint64_t>(pw - size + 1)));
    out.select(0, i).copy_(padded.select(0, i).narrow(1, top, size).narrow(2, left, size));
  }
  return out;
}

Tensor random_horizontal_flip(const Tensor& images, double p, Generator& gen) {
  OCTO_CHECK_VALUE(images.dim() == 4,
                   "random_horizontal_flip: expected [N, C, H, W] images, got shape ",
                   images.sizes());
  OCTO_CHECK_VALUE(p >= 0 && p <= 1, "random_horizontal_flip: p must be in [0, 1], got ", p);
  NoGradGuard no_grad;
  Tensor out = images.clone();
  int64_t w = images.size(3);
  for (int64_t i = 0; i < images.size(0); ++i) {
    double u = static_cast<double>(gen.next_u64() >> 11) * (1.0 / 9007199254740992.0);
    if (u >= p) continue;
    Tensor src = images.select(0, i);
    Tensor dst = out.select(0, i);
    for (int64_t x = 0; x < w; ++x) dst.select(2, x).copy_(src.select(2, w - 1 - x));
  }
  return out;
}

}  // namespace octo::data
