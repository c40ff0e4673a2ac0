// Gradient clipping: clip_grad_norm_ (rescale by the total norm) and clip_grad_value_ (clamp).
#pragma once

#include <limits>
#include <vector>

#include "tensor/tensor.h"

namespace octo::optim {

constexpr double kInf = std::numeric_limits<double>::infinity();

/// Rescales the gradients of `params` in place so that their total norm (the norm of all
/// gradients concatenated) is at most max_norm, as torch.nn.utils.clip_grad_norm_:
///   total_norm = norm([norm(g) for g in grads], norm_type)
///   clip_coef  = max_norm / (total_norm + 1e-6), applied to every gradient only if < 1.
/// norm_type is any p > 0 or kInf (max |g|). Parameters without a gradient are skipped.
/// Returns the total norm before clipping as a 0-d tensor (dtype and device of the first
/// gradient; 0 when there is no gradient). With error_if_nonfinite, a NaN or infinite total norm
/// throws ValueError instead of scaling.
///
///   loss.backward();
///   double norm = octo::optim::clip_grad_norm_(model->parameters(), 1.0).item<double>();
///   opt.step();
Tensor clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type = 2.0,
                       bool error_if_nonfinite = false);

/// Clamps every gradient of `params` into [-clip_value, clip_value] in place.
void clip_grad_value_(const std::vector<Tensor>& params, double clip_value);

}  // namespace octo::optim
