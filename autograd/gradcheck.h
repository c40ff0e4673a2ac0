// gradcheck: compares autograd's gradients with central finite differences.
#pragma once

#include <functional>

#include "autograd/node.h"

namespace octo::autograd {

/// Checks every input's analytic Jacobian against central differences in float64, with
/// PyTorch's defaults. Inputs that require grad are checked (they must be float64); others are
/// constants. Returns true when all agree; otherwise throws (raise) or returns false, naming the
/// input, the element and both values:
///
///   auto x = octo::randn({3, 4}, {.dtype = octo::kFloat64, .requires_grad = true});
///   octo::autograd::gradcheck([](const TensorList& in) { return octo::tanh(in[0]); }, {x});
bool gradcheck(const std::function<Tensor(const TensorList&)>& fn, const TensorList& inputs,
               double eps = 1e-6, double atol = 1e-5, double rtol = 1e-3, bool raise = true);

/// Checks second derivatives the way gradcheck checks first ones (torch's gradgradcheck): with a
/// random float64 gradient v for fn's output, the function (inputs, v) -> d<fn(inputs), v>/d
/// inputs, computed by autograd::grad with create_graph, must have a Jacobian that matches
/// central differences. So the backward of every op fn uses must itself be differentiable, and
/// correct:
///
///   octo::autograd::gradgradcheck([](const TensorList& in) { return octo::tanh(in[0]); }, {x});
bool gradgradcheck(const std::function<Tensor(const TensorList&)>& fn, const TensorList& inputs,
                   double eps = 1e-6, double atol = 1e-5, double rtol = 1e-3, bool raise = true);

}  // namespace octo::autograd
