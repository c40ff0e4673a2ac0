// The backward engine: dependency counting, then nodes in reverse tape order.
//
// Note [Engine order]: a node runs once every node that feeds it a gradient has run (its
// dependency count reaches zero). Among ready nodes the one with the highest sequence_nr -- the
// latest on the tape -- runs first, so backward retraces the forward in reverse. Each node runs
// with its device made current (DeviceGuard). Ready nodes are kept per device so that the
// parallel layer can give each device its own worker (docs/internals/autograd.md).
#include "autograd/engine.h"

#include <map>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "autograd/grad_mode.h"
#include "core/device_hooks.h"
#include "core/error.h"
#include "tensor/autograd_meta.h"
#include "tensor/factories.h"

namespace octo::autograd {

namespace {

struct ByTapeOrder {
  bool operator()(const std::shared_ptr<Node>& a, const std::shared_ptr<Node>& b) const {
    return a->sequence_nr() < b->sequence_nr();  // max-heap: latest op first
  }
};

struct GraphTask {
  bool retain_graph = false;
  bool accumulate = true;  // false for grad(): leaves are captured, not accumulated
  std::unordered_map<Node*, int> dependencies;
  std::unordered_map<Node*, TensorList> buffers;
  // grad(): (node, input_nr) -> index into captured
  std::map<std::pair<Node*, int>, size_t> captures;
  TensorList captured;

  void add_to_buffer(const std::shared_ptr<Node>& node, int input_nr, const Tensor& g) {
    TensorList& buf = buffers[node.get()];
    if (buf.empty()) buf.resize(static_cast<size_t>(node->num_inputs()));
    Tensor& slot = buf.at(static_cast<size_t>(input_nr));
    if (!slot.defined()) {
      slot = g;
    } else {
      OCTO_CHECK_DEVICE(slot.device() == g.device(), "backward: gradients for ", node->name(),
                        " arrived on two devices, ", slot.device(), " and ", g.device());
      slot = slot + g;
    }
  }
};

void count_dependencies(GraphTask& task, const std::vector<std::shared_ptr<Node>>& roots) {
  std::vector<Node*> stack;
  std::unordered_set<Node*> seen;
  for (const auto& r : roots) {
    if (seen.insert(r.get()).second) stack.push_back(r.get());
  }
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->next_edges()) {
      if (!e.valid()) continue;
      task.dependencies[e.node.get()] += 1;
      if (seen.insert(e.node.get()).second) stack.push_back(e.node.get());
    }
  }
}

Tensor default_root_grad(const Tensor& root) {
  OCTO_CHECK(root.numel() == 1, "grad can be implicitly created only for scalar outputs; this "
             "output has shape ", root.sizes(), ". Pass a gradient of that shape to backward().");
  return ones_like(root);
}

void execute(GraphTask& task, const TensorList& roots, const TensorList& grad_roots) {
  OCTO_CHECK_VALUE(grad_roots.empty() || grad_roots.size() == roots.size(), "backward: got ",
                   roots.size(), " outputs but ", grad_roots.size(), " gradients");
  std::vector<std::shared_ptr<Node>> root_nodes;
  std::vector<std::pair<Edge, Tensor>> seeds;
  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& r = roots[i];
    OCTO_CHECK_VALUE(r.defined(), "backward: output ", i, " is an undefined tensor");
    OCTO_CHECK(r.requires_grad(), "element ", i, " of the outputs does not require grad and does "
               "not have a grad_fn: nothing was recorded for it (was it computed under NoGradGuard, "
               "or from tensors that do not require grad?)");
    Tensor g = (grad_roots.empty() || !grad_roots[i].defined()) ? default_root_grad(r)
                                                                 : grad_roots[i];
    OCTO_CHECK_VALUE(g.sizes() == r.sizes(), "backward: gradient of shape ", g.sizes(),
                     " for an output of shape ", r.sizes());
    detail::check_same_device({&r, &g});
    Edge e = gradient_edge(r);
    root_nodes.push_back(e.node);
    seeds.emplace_back(e, g);
  }
  count_dependencies(task, root_nodes);
  for (auto& [e, g] : seeds) task.add_to_buffer(e.node, e.input_nr, g);

  // Ready nodes, per device (Note [Engine order]); this loop serves them all in tape order.
  std::map<Device, std::priority_queue<std::shared_ptr<Node>, std::vector<std::shared_ptr<Node>>,
                                       ByTapeOrder>> ready;
  std::unordered_set<Node*> queued;
  for (const auto& n : root_nodes) {
    if (task.dependencies[n.get()] == 0 && queued.insert(n.get()).second) ready[n->device()].push(n);
  }

  NoGradGuard no_grad;  // backward formulas are not themselves recorded (no create_graph)
  while (true) {
    std::shared_ptr<Node> node;
    for (auto& [device, q] : ready) {
      if (!q.empty() && (!node || q.top()->sequence_nr() > node->sequence_nr())) node = q.top();
    }
    if (!node) break;
    ready[node->device()].pop();

    TensorList grads = std::move(task.buffers[node.get()]);
    task.buffers.erase(node.get());
    grads.resize(static_cast<size_t>(node->num_inputs()));
    node->run_pre_hooks(grads);
    for (size_t i = 0; i < grads.size(); ++i) {
      auto it = task.captures.find({node.get(), static_cast<int>(i)});
      if (it != task.captures.end() && grads[i].defined()) task.captured[it->second] = grads[i];
    }

    TensorList outputs;
    bool is_leaf_sink = dynamic_cast<AccumulateGrad*>(node.get()) != nullptr;
    if (!(is_leaf_sink && !task.accumulate)) {
      DeviceGuard guard(node->device());
      outputs = node->apply(std::move(grads));
    }
    if (!task.retain_graph) node->release_saved();

    const auto& edges = node->next_edges();
    for (size_t i = 0; i < edges.size(); ++i) {
      const Edge& e = edges[i];
      if (!e.valid()) continue;
      if (i < outputs.size() && outputs[i].defined()) task.add_to_buffer(e.node, e.input_nr, outputs[i]);
      int& deps = task.dependencies[e.node.get()];
      if (--deps == 0 && queued.insert(e.node.get()).second) ready[e.node->device()].push(e.node);
    }
  }
}

}  // namespace

void backward(const TensorList& roots, const TensorList& grad_roots, bool retain_graph) {
  GraphTask task;
  task.retain_graph = retain_graph;
  execute(task, roots, grad_roots);
}

TensorList grad(const TensorList& roots, const TensorList& inputs, const TensorList& grad_roots,
                bool retain_graph, bool allow_unused) {
  GraphTask task;
  task.retain_graph = retain_graph;
  task.accumulate = false;
  task.captured.resize(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    OCTO_CHECK_VALUE(inputs[i].defined() && inputs[i].requires_grad(), "autograd::grad: input ", i,
                     " does not require grad");
    Edge e = gradient_edge(inputs[i]);
    task.captures[{e.node.get(), e.input_nr}] = i;
  }
  execute(task, roots, grad_roots);
  for (size_t i = 0; i < inputs.size(); ++i) {
    OCTO_CHECK_VALUE(allow_unused || task.captured[i].defined(), "autograd::grad: input ", i,
                     " was not used in the graph of the outputs; pass allow_unused = true if "
                     "this is expected");
  }
  return task.captured;
}

}  // namespace octo::autograd
