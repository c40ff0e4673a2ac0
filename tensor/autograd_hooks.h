// What tensor/ asks of autograd/ at run time without including it: the name of a grad_fn node.
#pragma once

#include <string>

namespace octo {

namespace autograd {
class Node;
}

namespace detail {

// Note [Autograd hooks]: tensor/ sits above autograd/ in the layer table
// (docs/architecture.md), so it cannot include autograd/node.h, yet printing a tensor shows its
// grad_fn's name. Like core/device_hooks.h for CUDA, tensor/ declares the little it needs and
// the layer below fills it in: autograd/tensor_autograd.cpp installs the hook during static
// initialisation. That file also defines Tensor::grad_fn(), so any program that can hold a node
// has linked it, and the hook is installed before main() runs.

/// Returns a node's name ("AddBackward", "AccumulateGrad").
using NodeNameFn = const std::string& (*)(const autograd::Node& node);
/// Installs the hook (autograd/tensor_autograd.cpp does; nothing else should).
void set_node_name_hook(NodeNameFn fn);
/// The node's name through the hook; "unknown" if none is installed.
std::string node_name(const autograd::Node& node);

}  // namespace detail

}  // namespace octo
