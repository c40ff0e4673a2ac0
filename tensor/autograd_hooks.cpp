// The hook through which autograd/ tells tensor/ a node's name (Note [Autograd hooks]).
#include "tensor/autograd_hooks.h"

#include <atomic>

namespace octo::detail {

namespace {
std::atomic<NodeNameFn> g_node_name{nullptr};  // constant-initialised: set before any use
}  // namespace

void set_node_name_hook(NodeNameFn fn) { g_node_name.store(fn, std::memory_order_release); }

std::string node_name(const autograd::Node& node) {
  NodeNameFn fn = g_node_name.load(std::memory_order_acquire);
  return fn ? fn(node) : std::string("unknown");
}

}  // namespace octo::detail
