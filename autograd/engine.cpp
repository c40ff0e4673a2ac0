// The backward engine: dependency counting, then nodes in reverse tape order, one worker per
// device.
//
// Note [Engine order]: a node runs once every node that feeds it a gradient has run (its
// dependency count reaches zero). Among a device's ready nodes the one with the highest
// sequence_nr -- the latest on the tape -- runs first, so backward retraces the forward in
// reverse. Each node runs with its device current (DeviceGuard).
//
// Note [Engine threads]: when a graph spans one device (the usual case) the calling thread runs
// it. When it spans several (DataParallel replicas on cpu:0..cpu:3 or cuda:0..cuda:3), every
// device's ready queue is drained by that device's DeviceWorker, so the replicas' backward
// passes run concurrently, each CPU device with its share of the cores; the caller waits. The
// first exception stops the task and is rethrown in the caller.
//
// Note [create_graph]: backward formulas are written in differentiable tensor ops, and the
// engine normally runs them with grad mode off, so nothing is recorded. With create_graph it
// runs them with grad mode on: each formula records its own ops, the gradients it returns have a
// grad_fn, and they can be differentiated again (gradient penalties, Hessian-vector products).
// Saved tensors are then unpacked with their history (Note [Saved tensors and double backward]);
// a formula that calls a kernel directly records that call as an op with its own backward (e.g.
// conv2d's input gradient, softmax_backward).
//
// Note [Anomaly mode]: with DetectAnomalyGuard alive, every gradient a node returns is checked
// for NaN and Inf, and the first bad one throws naming the node (the forward op it belongs to is
// its name without "Backward"). record() also checks each recorded op's floating outputs, so an
// op that turns finite inputs into NaN or Inf is named at the forward (autograd/function.cpp).
#include "autograd/engine.h"

#include <condition_variable>
#include <map>
#include <mutex>
#include <queue>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "autograd/autocast.h"
#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "core/device_hooks.h"
#include "core/device_worker.h"
#include "core/error.h"
#include "core/threads.h"
#include "core/trace.h"
#include "tensor/autograd_meta.h"
#include "tensor/factories.h"

namespace octo::autograd {

namespace {

struct ByTapeOrder {
  bool operator()(const std::shared_ptr<Node>& a, const std::shared_ptr<Node>& b) const {
    return a->sequence_nr() < b->sequence_nr();  // max-heap: latest op first
  }
};
using ReadyQueue =
    std::priority_queue<std::shared_ptr<Node>, std::vector<std::shared_ptr<Node>>, ByTapeOrder>;

struct GraphTask {
  bool retain_graph = false;
  bool create_graph = false;
  bool accumulate = true;  // false for grad(): leaves are captured, not accumulated
  std::mutex mutex;        // guards everything below when several devices run
  std::condition_variable cv;
  std::unordered_map<Node*, int> dependencies;
  std::unordered_map<Node*, TensorList> buffers;
  std::map<Device, ReadyQueue> ready;
  size_t remaining = 0;  // nodes still to run
  std::exception_ptr error;
  // grad(): (node, input_nr) -> index into captured
  std::map<std::pair<Node*, int>, size_t> captures;
  TensorList captured;
  std::vector<std::function<void()>> final_callbacks;  // queue_callback()

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
  bool done() const { return remaining == 0 || error != nullptr; }
};

/// The task whose nodes the calling thread is running (for queue_callback).
thread_local GraphTask* current_task = nullptr;

struct CurrentTask {
  GraphTask* previous;
  explicit CurrentTask(GraphTask* task) : previous(current_task) { current_task = task; }
  ~CurrentTask() { current_task = previous; }
};

/// Runs the callbacks hooks queued during the pass, on the caller's thread, after the last node.
void run_final_callbacks(GraphTask& task) {
  for (size_t i = 0;; ++i) {
    std::function<void()> cb;
    {
      std::lock_guard<std::mutex> lock(task.mutex);
      if (i >= task.final_callbacks.size()) break;
      cb = std::move(task.final_callbacks[i]);
    }
    CurrentTask scope(&task);  // a callback may queue another
    cb();
  }
}

/// Counts, for each node reachable from the roots, how many edges lead into it.
std::vector<Node*> count_dependencies(GraphTask& task,
                                      const std::vector<std::shared_ptr<Node>>& roots) {
  std::vector<Node*> stack, all;
  std::unordered_set<Node*> seen;
  for (const auto& r : roots) {
    if (seen.insert(r.get()).second) stack.push_back(r.get());
  }
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    all.push_back(n);
    for (const Edge& e : n->next_edges()) {
      if (!e.valid()) continue;
      task.dependencies[e.node.get()] += 1;
      if (seen.insert(e.node.get()).second) stack.push_back(e.node.get());
    }
  }
  return all;
}

/// Note [Anomaly mode]: the first gradient with a NaN or Inf names the node that returned it.
void check_anomaly(const Node& node, const TensorList& outputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& g = outputs[i];
    if (all_finite(g)) continue;
    OCTO_THROW(Error, "Function '", node.name(), "' returned nan or inf values in its ", i,
               "th output (a gradient of shape ", g.sizes(), ")");
  }
}

/// Runs one node (outside the lock) and returns its output gradients.
TensorList run_node(GraphTask& task, const std::shared_ptr<Node>& node, TensorList grads) {
  grads.resize(static_cast<size_t>(node->num_inputs()));
  node->run_pre_hooks(grads);
  bool any = false;
  for (size_t i = 0; i < grads.size(); ++i) {
    if (!grads[i].defined()) continue;
    any = true;
    auto it = task.captures.find({node.get(), static_cast<int>(i)});
    if (it != task.captures.end()) {
      std::lock_guard<std::mutex> lock(task.mutex);
      task.captured[it->second] = grads[i];
    }
  }
  TensorList outputs;
  bool is_leaf_sink = dynamic_cast<AccumulateGrad*>(node.get()) != nullptr;
  // A node that received no gradient at all contributes none (its inputs get undefined ones).
  if (any && !(is_leaf_sink && !task.accumulate)) {
    DeviceGuard guard(node->device());
    outputs = node->apply(std::move(grads));
    if (AnomalyMode::is_enabled()) check_anomaly(*node, outputs);
  }
  if (!task.retain_graph) node->release_saved();
  return outputs;
}

/// Hands a finished node's gradients to the nodes it feeds; caller holds the lock when needed.
void propagate(GraphTask& task, const std::shared_ptr<Node>& node, const TensorList& outputs) {
  const auto& edges = node->next_edges();
  for (size_t i = 0; i < edges.size(); ++i) {
    const Edge& e = edges[i];
    if (!e.valid()) continue;
    if (i < outputs.size() && outputs[i].defined())
      task.add_to_buffer(e.node, e.input_nr, outputs[i]);
    if (--task.dependencies[e.node.get()] == 0) task.ready[e.node->device()].push(e.node);
  }
  --task.remaining;
}

/// Single-device (or nested) execution on the calling thread, in global tape order.
void run_inline(GraphTask& task) {
  CurrentTask scope(&task);
  while (!task.done()) {
    std::shared_ptr<Node> node;
    for (auto& [device, q] : task.ready) {
      if (!q.empty() && (!node || q.top()->sequence_nr() > node->sequence_nr())) node = q.top();
    }
    OCTO_INTERNAL_ASSERT(node != nullptr, "backward: no ready node but ", task.remaining,
                         " remain");
    task.ready[node->device()].pop();
    TensorList grads = std::move(task.buffers[node.get()]);
    task.buffers.erase(node.get());
    propagate(task, node, run_node(task, node, std::move(grads)));
  }
}

/// One device's loop in a multi-device task (Note [Engine threads]).
void drain_device(GraphTask& task, Device device) {
  GradModeGuard grad_mode(task.create_graph);
  amp::StateGuard no_autocast{amp::State{}};  // backward runs in forward's dtypes (Note [Autocast])
  TraceSpan span("backward", device);
  CurrentTask scope(&task);
  std::unique_lock<std::mutex> lock(task.mutex);
  while (true) {
    task.cv.wait(lock, [&] { return task.done() || !task.ready[device].empty(); });
    if (task.done()) return;
    std::shared_ptr<Node> node = task.ready[device].top();
    task.ready[device].pop();
    TensorList grads = std::move(task.buffers[node.get()]);
    task.buffers.erase(node.get());
    lock.unlock();
    TensorList outputs;
    try {
      outputs = run_node(task, node, std::move(grads));
    } catch (...) {
      lock.lock();
      if (!task.error) task.error = std::current_exception();
      task.cv.notify_all();
      return;
    }
    lock.lock();
    try {
      propagate(task, node, outputs);
    } catch (...) {
      if (!task.error) task.error = std::current_exception();
    }
    task.cv.notify_all();
  }
}

void run_threaded(GraphTask& task, const std::set<Device>& devices) {
  // One multi-device pass at a time: two passes from two threads would each hold one device's
  // worker in its loop while waiting for nodes queued behind the other's (a deadlock).
  static std::mutex one_at_a_time;
  std::lock_guard<std::mutex> serial(one_at_a_time);
  std::vector<Device> list(devices.begin(), devices.end());
  // Each device's loop runs on its worker, with that device's share of the cores.
  run_on_devices(list, [&](size_t i) { drain_device(task, list[i]); });
  if (task.error) std::rethrow_exception(task.error);
}

Tensor default_root_grad(const Tensor& root) {
  OCTO_CHECK(root.numel() == 1,
             "grad can be implicitly created only for scalar outputs; this output has shape ",
             root.sizes(), ". Pass a gradient of that shape to backward().");
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
    OCTO_CHECK(
        r.requires_grad(), "element ", i,
        " of the outputs does not require grad and does not have a grad_fn: nothing was recorded for it (was it computed under NoGradGuard, or from tensors that do not require grad?)");
    Tensor g =
        (grad_roots.empty() || !grad_roots[i].defined()) ? default_root_grad(r) : grad_roots[i];
    OCTO_CHECK_VALUE(g.sizes() == r.sizes(), "backward: gradient of shape ", g.sizes(),
                     " for an output of shape ", r.sizes());
    detail::check_same_device({&r, &g});
    Edge e = gradient_edge(r);
    root_nodes.push_back(e.node);
    seeds.emplace_back(e, g);
  }
  std::vector<Node*> all = count_dependencies(task, root_nodes);
  task.remaining = all.size();
  std::set<Device> devices;
  for (Node* n : all) devices.insert(n->device());
  {
    NoGradGuard no_grad;
    for (auto& [e, g] : seeds) task.add_to_buffer(e.node, e.input_nr, g);
  }
  std::unordered_set<Node*> queued;
  for (const auto& n : root_nodes) {
    if (task.dependencies[n.get()] == 0 && queued.insert(n.get()).second)
      task.ready[n->device()].push(n);
  }
  // One device, or a backward started on a device worker (a nested parallel region, Note [Nested
  // device work]): the calling thread runs every node, in tape order.
  if (devices.size() <= 1 || DeviceWorker::in_worker_thread()) {
    GradModeGuard grad_mode(task.create_graph);  // Note [create_graph]
    amp::StateGuard no_autocast{amp::State{}};   // Note [Autocast]
    TraceSpan span("backward", devices.empty() ? kCPU : *devices.begin());
    run_inline(task);
  } else {
    run_threaded(task, devices);
  }
  NoGradGuard no_grad;
  run_final_callbacks(task);
}

}  // namespace

void queue_callback(std::function<void()> callback) {
  OCTO_CHECK(current_task != nullptr,
             "autograd::queue_callback: called outside a backward pass (call it from a hook)");
  std::lock_guard<std::mutex> lock(current_task->mutex);
  current_task->final_callbacks.push_back(std::move(callback));
}

void backward(const TensorList& roots, const TensorList& grad_roots,
              std::optional<bool> retain_graph, bool create_graph) {
  GraphTask task;
  task.retain_graph = retain_graph.value_or(create_graph);
  task.create_graph = create_graph;
  execute(task, roots, grad_roots);
}

TensorList grad(const TensorList& roots, const TensorList& inputs, const TensorList& grad_roots,
                std::optional<bool> retain_graph, bool allow_unused, bool create_graph) {
  GraphTask task;
  task.retain_graph = retain_graph.value_or(create_graph);
  task.create_graph = create_graph;
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
    OCTO_CHECK_VALUE(
        allow_unused || task.captured[i].defined(), "autograd::grad: input ", i,
        " was not used in the graph of the outputs; pass allow_unused = true if this is expected");
  }
  return task.captured;
}

}  // namespace octo::autograd
