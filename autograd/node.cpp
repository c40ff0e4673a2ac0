// Node bookkeeping, saved-tensor checks, the generic FunctionNode and AccumulateGrad.
#include "autograd/node.h"

#include <mutex>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "tensor/autograd_meta.h"

namespace octo::autograd {

namespace {
std::atomic<uint64_t> g_sequence_nr{0};
}

// Note [Saved tensors and double backward]: a backward formula sees its saved tensors through
// unpack(). In a plain backward (grad mode off) they are the detached values. With create_graph
// the formula's ops are recorded, and they must meet the saved tensors as the graph knows them:
// a leaf input that requires grad is the tensor itself (so its gradient reaches the same
// AccumulateGrad); a non-leaf input is an alias carrying the grad_fn and output_nr it had when it
// was saved; and an output of the saving node -- exp() saves its result -- is rebuilt as an alias
// whose grad_fn is that node. Holding a non-leaf or an output as itself would let a cycle form
// that is never freed: node -> tensor -> node for an output, and for an input, an in-place op
// that later rebases it onto the saving node's result (`a.copy_(maximum(a, b))` gives a a
// CopyBackward whose edge leads to MaximumBackward, which saves a). Such a saved input then fails
// unpack's version check anyway; the alias only keeps that failure from leaking the graph.
namespace {
/// A new tensor over `data`'s storage whose history is (grad_fn, output_nr).
Tensor alias_with_history(const Tensor& data, std::shared_ptr<Node> grad_fn, int output_nr) {
  Tensor alias = data.detach();
  auto& meta = alias.impl().autograd;
  meta = std::make_unique<AutogradMeta>();
  meta->requires_grad = true;
  meta->grad_fn = std::move(grad_fn);
  meta->output_nr = output_nr;
  return alias;
}
}  // namespace

SavedTensor::SavedTensor(const Tensor& t, int output_nr) {
  if (!t.defined()) return;
  data_ = t.detach();
  version_ = t.version();
  output_nr_ = output_nr;
  if (output_nr < 0 && t.requires_grad())
    original_ = t.grad_fn() ? alias_with_history(data_, t.grad_fn(), t.output_nr()) : t;
}

Tensor SavedTensor::unpack(const Node& owner) const {
  OCTO_CHECK(
      !released_,
      "Trying to backward through the graph a second time (or directly access saved tensors after they have already been freed): ",
      owner.name(),
      " needs a saved tensor that the previous backward freed. Saved intermediate values are freed when you call backward() or autograd::grad(); pass retain_graph = true if you need to backward through the graph a second time.");
  if (!data_.defined()) return data_;
  uint32_t now = data_.version();
  OCTO_CHECK(
      now == version_,
      "one of the variables needed for gradient computation has been modified by an inplace operation: [",
      data_.dtype(), " ", data_.sizes(), "], which is saved by ", owner.name(), ", is at version ",
      now, "; expected version ", version_, " instead.");
  if (!GradMode::is_enabled()) return data_;
  if (original_.defined()) return original_;
  if (output_nr_ >= 0 && is_floating(data_.dtype()))
    return alias_with_history(data_, std::const_pointer_cast<Node>(owner.shared_from_this()),
                              output_nr_);
  return data_;
}

void SavedTensor::release() {
  data_ = Tensor();
  original_ = Tensor();
  released_ = true;
}

Node::Node(std::string name, Device device)
    : name_(std::move(name)), sequence_nr_(g_sequence_nr.fetch_add(1)), device_(device) {}

void Node::add_pre_hook(int output_nr, std::function<Tensor(const Tensor&)> hook) {
  pre_hooks_.emplace_back(output_nr, std::move(hook));
}

void Node::run_pre_hooks(TensorList& grads) const {
  for (const auto& [nr, hook] : pre_hooks_) {
    if (nr >= static_cast<int>(grads.size()) || !grads[nr].defined()) continue;
    Tensor replaced = hook(grads[nr]);
    if (replaced.defined()) grads[nr] = replaced;
  }
}

FunctionNode::FunctionNode(std::string name, Device device, std::vector<SavedTensor> saved,
                           BackwardFn fn)
    : Node(std::move(name), device), saved_(std::move(saved)), fn_(std::move(fn)) {}

TensorList FunctionNode::apply(TensorList&& grads) {
  TensorList saved;
  saved.reserve(saved_.size());
  for (const auto& s : saved_) saved.push_back(s.unpack(*this));
  TensorList out = fn_(grads, saved);
  OCTO_INTERNAL_ASSERT(out.size() == next_edges().size(), name(), " returned ", out.size(),
                       " gradients for ", next_edges().size(), " inputs");
  return out;
}

void FunctionNode::release_saved() {
  for (auto& s : saved_) s.release();
}

std::vector<const SavedTensor*> FunctionNode::saved_tensors() const {
  std::vector<const SavedTensor*> out;
  for (const auto& s : saved_) out.push_back(&s);
  return out;
}

AccumulateGrad::AccumulateGrad(Tensor leaf)
    : Node("AccumulateGrad", leaf.device()), leaf_(std::move(leaf)) {
  set_num_inputs(1);
}

TensorList AccumulateGrad::apply(TensorList&& grads) {
  Tensor g = grads.at(0);
  if (!g.defined()) return {};
  OCTO_CHECK(g.sizes() == leaf_.sizes(), "AccumulateGrad: gradient of shape ", g.sizes(),
             " does not match the leaf's shape ", leaf_.sizes());
  OCTO_CHECK_DEVICE(g.device() == leaf_.device(), "AccumulateGrad: gradient on ", g.device(),
                    " for a leaf on ", leaf_.device());
  // Grad mode is the pass's create_graph (the engine sets it), for the hooks too.
  AutogradMeta& meta = *leaf_.impl().autograd;
  for (auto& hook : meta.hooks) {
    Tensor replaced = hook(g);
    if (replaced.defined()) g = replaced;
  }
  if (GradMode::is_enabled()) {
    // create_graph: the gradient keeps its history (a gradient penalty differentiates it), so
    // it is accumulated out of place.
    Tensor gd = g.dtype() == leaf_.dtype() ? g : g.to(leaf_.dtype());
    meta.grad = meta.grad.defined() ? meta.grad + gd : gd;
  } else if (!meta.grad.defined()) {
    // Take the incoming tensor when nobody else can see it; otherwise copy, so a later in-place
    // accumulation cannot change some other tensor.
    bool exclusive = g.impl_ptr().use_count() <= 2 && g.impl().storage.use_count() == 1 &&
                     g.is_contiguous() && g.dtype() == leaf_.dtype() && !g.requires_grad();
    meta.grad = exclusive ? g.detach() : g.to(leaf_.dtype()).clone();
  } else if (meta.grad.requires_grad()) {
    meta.grad = meta.grad.detach() + g;  // after a create_graph pass: no in-place on its graph
  } else {
    meta.grad.add_(g);
  }
  for (auto& hook : meta.post_accumulate_hooks) hook(leaf_);
  return {};
}

Edge gradient_edge(const Tensor& t) {
  if (!t.defined() || !t.requires_grad()) return {};
  AutogradMeta& meta = *t.impl().autograd;
  if (meta.grad_fn) return {meta.grad_fn, meta.output_nr};
  // Several device workers may record ops on one leaf at once (replicas reading a parameter):
  // its accumulator is created once, under a lock.
  static std::mutex accumulator_mutex;
  std::lock_guard<std::mutex> lock(accumulator_mutex);
  auto acc = meta.grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t);
    meta.grad_accumulator = acc;
  }
  return {acc, 0};
}

}  // namespace octo::autograd
