// softmax and log_softmax, forward and backward (the backward is itself a differentiable op).
#include "autograd/autocast.h"
#include "autograd/function.h"
#include "autograd/ops/elementwise.h"
#include "autograd/ops/nn_ops.h"
#include "autograd/ops/reduce.h"
#include "core/error.h"
#include "kernels/backend.h"

namespace octo {

using autograd::TensorList;

namespace {

/// grad_in of softmax (log = false) or log_softmax (log = true) from grad_out and the forward's
/// output y, as a recorded op so that double backward works:
///   softmax:     gi = y * (g - sum(g * y))
///   log_softmax: gi = g - exp(y) * sum(g)
Tensor softmax_backward(const Tensor& grad_out, const Tensor& y, int64_t dim, bool log) {
  detail::check_same_device({&grad_out, &y});
  OCTO_INTERNAL_ASSERT(grad_out.sizes() == y.sizes());
  Tensor g = grad_out.dtype() == y.dtype() ? grad_out : grad_out.to(y.dtype());
  Tensor gi = detail::make_empty(y.sizes(), y.dtype(), y.device());
  if (gi.numel() > 0) {
    kernels::backend(y.device())
        .softmax_backward(gi.arg(), g.arg(), y.arg(), static_cast<int>(dim), log);
  }
  const Shape dims = y.dim() == 0 ? Shape{} : Shape{dim};
  return autograd::record(log ? "LogSoftmaxBackwardBackward" : "SoftmaxBackwardBackward", gi,
                          {g, y}, {g, y},
                          [dims, log](const TensorList& gg, const TensorList& s) -> TensorList {
                            const Tensor& g = s[0];
                            const Tensor& y = s[1];
                            const Tensor& h = gg[0];  // gradient w.r.t. gi
                            if (log) {
                              Tensor ey = exp(y);
                              // d/dg: h - sum(h * exp(y)); d/dy: -h * exp(y) * sum(g)
                              return {h - sum(h * ey, dims, true), -(h * ey * sum(g, dims, true))};
                            }
                            // d/dg: y * (h - sum(h * y)); d/dy: h * (g - sum(g * y)) - g * sum(h *
                            // y)
                            Tensor hy = sum(h * y, dims, true);
                            return {y * (h - hy), h * (g - sum(g * y, dims, true)) - g * hy};
                          });
}

Tensor softmax_impl(const Tensor& x, int64_t dim, bool log) {
  const char* name = log ? "log_softmax" : "softmax";
  OCTO_CHECK_VALUE(x.is_floating_point(), name, ": expected a floating point input, got ",
                   x.dtype());
  int64_t d = detail::wrap_dim(dim, x.dim(), name);
  Tensor out = detail::make_empty(x.sizes(), x.dtype(), x.device());
  if (out.numel() > 0) {
    kernels::backend(x.device()).softmax(out.arg(), x.arg(), static_cast<int>(d), log);
  }
  return autograd::record(log ? "LogSoftmaxBackward" : "SoftmaxBackward", out, {x}, {out},
                          [d, log](const TensorList& g, const TensorList& s) -> TensorList {
                            return {softmax_backward(g[0], s[0], d, log)};
                          });
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) {
  if (amp::Cast cast{"softmax", x}) return softmax(cast(x), dim);  // Note [Autocast]
  return softmax_impl(x, dim, false);
}
Tensor log_softmax(const Tensor& x, int64_t dim) {
  if (amp::Cast cast{"log_softmax", x}) return log_softmax(cast(x), dim);  // Note [Autocast]
  return softmax_impl(x, dim, true);
}
Tensor Tensor::softmax(int64_t dim) const { return octo::softmax(*this, dim); }
Tensor Tensor::log_softmax(int64_t dim) const { return octo::log_softmax(*this, dim); }

}  // namespace octo
