// sum_to: the inverse of broadcasting, which every broadcasting op's backward needs.
#pragma once

#include "tensor/tensor.h"

namespace octo {

/// Sums x down to `shape` -- the inverse of broadcasting; every backward of a broadcasting op
/// uses it to give each input a gradient of its own shape.
///   sum_to(g, {3})   // g: [2, 3] -> [3]
Tensor sum_to(const Tensor& x, const Shape& shape);

}  // namespace octo
