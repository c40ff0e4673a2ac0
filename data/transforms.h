// Batch transforms: uint8 -> float, per-channel normalisation, random crop with padding, flips.
#pragma once

#include <vector>

#include "core/random.h"
#include "tensor/tensor.h"

namespace octo::data {

/// uint8 images -> float32 in [0, 1] (divided by 255), like torchvision's ToTensor.
Tensor to_float(const Tensor& images);
/// (x - mean[c]) / std[c] per channel of [N, C, H, W] (or [C, H, W]) float images, as a new
/// tensor. uint8 images are read as x / 255 first, so normalize(u8, m, s) equals
/// normalize(to_float(u8), m, s) to float rounding, in one conversion and one pass (Note [One-pass
/// normalize]).
Tensor normalize(const Tensor& images, const std::vector<double>& mean,
                 const std::vector<double>& std);
/// Pads [N, C, H, W] images by `padding` zeros on each side, then crops a random size x size
/// window per image (the same offsets for all channels). Random draws come from `gen`.
Tensor random_crop(const Tensor& images, int64_t size, int64_t padding, Generator& gen);
/// Mirrors each image left-right with probability p.
Tensor random_horizontal_flip(const Tensor& images, double p, Generator& gen);

}  // namespace octo::data
