// sum_to and its backward, on the reduce kernel directly.
//
// Note [sum_to stands alone]: sum_to is used by elementwise.cpp's backwards, and reduce.cpp's
// backwards use elementwise ops, so sum_to cannot live in reduce.cpp without an include cycle
// between the two families. It needs nothing but the Sum kernel and expand(), so it has this file
// of its own; its forward is reduce.cpp's sum over a dim mask (same kernel, same "SumBackward").
#include "autograd/ops/sum_to.h"

#include <vector>

#include "autograd/function.h"
#include "core/error.h"
#include "kernels/backend.h"

namespace octo {

Tensor sum_to(const Tensor& x, const Shape& shape) {
  if (x.sizes() == shape) return x;
  const int64_t nd = x.dim(), lead = nd - static_cast<int64_t>(shape.size());
  OCTO_CHECK_VALUE(lead >= 0, "sum_to: cannot sum a tensor of shape ", x.sizes(), " to shape ",
                   shape, " with more dims");
  Shape keep = x.sizes();  // the keepdim form of the result: size 1 in every summed dim
  for (int64_t d = 0; d < nd; ++d) {
    if (d < lead) {
      keep[d] = 1;
      continue;
    }
    int64_t want = shape[d - lead];
    OCTO_CHECK_VALUE(want == x.sizes()[d] || want == 1, "sum_to: shape ", x.sizes(),
                     " cannot be summed to ", shape, " (dim ", d, " has size ", x.sizes()[d],
                     ", expected ", want, " or 1)");
    if (want != x.sizes()[d]) keep[d] = 1;
  }
  DType dtype = is_integral(x.dtype(), /*include_bool=*/true) ? kInt64 : x.dtype();
  Tensor out = detail::make_empty(keep, dtype, x.device());
  if (out.numel() > 0)
    kernels::backend(x.device()).reduce(kernels::ReduceOp::Sum, out.arg(), x.arg(), {});
  Tensor viewed = detail::make_view(out, shape, detail::contiguous_strides(shape), 0);
  Shape in_shape = x.sizes();
  return autograd::record("SumBackward", viewed, {x}, {},
                          [keep, in_shape](const autograd::TensorList& g,
                                           const autograd::TensorList&) -> autograd::TensorList {
                            // A 0-d gradient is expanded rather than reshaped (see keepdim_grad in
                            // reduce.cpp).
                            Tensor k = g[0].dim() == 0 ? g[0].expand(keep) : g[0].reshape(keep);
                            return {k.expand(in_shape)};
                          });
}

}  // namespace octo
