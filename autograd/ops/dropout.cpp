// dropout, forward and backward: a Bernoulli mask from the device's generator, scaled by 1/(1-p).
#include "autograd/function.h"
#include "autograd/ops/elementwise.h"
#include "autograd/ops/nn_ops.h"
#include "core/error.h"
#include "core/random.h"
#include "kernels/backend.h"
#include "tensor/factories.h"

namespace octo {

using autograd::TensorList;

Tensor dropout(const Tensor& input, double p, bool training) {
  OCTO_CHECK_VALUE(input.defined(), "dropout: expected a defined tensor");
  OCTO_CHECK_VALUE(p >= 0.0 && p <= 1.0, "dropout: probability has to be between 0 and 1, but got ",
                   p);
  if (!training || p == 0.0) return input;  // unchanged, so nothing is recorded
  OCTO_CHECK_VALUE(input.is_floating_point(), "dropout: expected a floating point tensor, got ",
                   input.dtype());
  if (p == 1.0) {  // everything dropped: zeros, and a zero gradient
    return autograd::record(
        "DropoutBackward", zeros_like(input), {input}, {},
        [](const TensorList& g, const TensorList&) -> TensorList { return {zeros_like(g[0])}; });
  }
  // mask = bernoulli(1 - p) / (1 - p), drawn from the input device's generator (Philox counters).
  Tensor mask = detail::make_empty(input.sizes(), input.dtype(), input.device());
  auto state = default_generator(input.device()).reserve(static_cast<uint64_t>(mask.numel()));
  if (mask.numel() > 0) {
    kernels::Backend& b = kernels::backend(input.device());
    b.bernoulli(mask.arg(), 1.0 - p, state);
    b.unary(kernels::UnaryOp::MulScalar, mask.arg(), mask.arg(), 1.0 / (1.0 - p), {});
  }
  Tensor out;
  {
    NoGradGuard no_grad;
    out = input * mask;
  }
  return autograd::record(
      "DropoutBackward", out, {input}, {mask},
      [](const TensorList& g, const TensorList& s) -> TensorList { return {g[0] * s[0]}; });
}

}  // namespace octo
