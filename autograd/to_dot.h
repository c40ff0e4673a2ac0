// to_dot: the recorded graph that backward would walk, as Graphviz DOT (for teaching and
// debugging).
#pragma once

#include <string>

#include "tensor/tensor.h"

namespace octo::autograd {

/// Describes the graph behind `t` in DOT: one box per node with its name, tape position (#seq),
/// device and saved tensors' dtypes and shapes; arrows point the way gradients flow.
/// Render with `dot -Tsvg graph.dot -o graph.svg`.
///
///   std::ofstream("graph.dot") << octo::autograd::to_dot(loss);
std::string to_dot(const Tensor& t);

}  // namespace octo::autograd
