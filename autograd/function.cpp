// record(): connecting an op's outputs to a new FunctionNode on the tape.
#include "autograd/function.h"

#include "core/error.h"
#include "tensor/autograd_meta.h"

namespace octo::autograd {

bool needs_grad(std::initializer_list<const Tensor*> inputs) {
  if (!GradMode::is_enabled()) return false;
  for (const Tensor* t : inputs)
    if (t->defined() && t->requires_grad()) return true;
  return false;
}

bool needs_grad(const TensorList& inputs) {
  if (!GradMode::is_enabled()) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

TensorList record_multi(const char* name, TensorList outs, const TensorList& inputs,
                        const TensorList& saved, FunctionNode::BackwardFn backward) {
  if (!needs_grad(inputs)) return outs;
  std::vector<SavedTensor> saved_tensors;
  saved_tensors.reserve(saved.size());
  for (const Tensor& s : saved) saved_tensors.emplace_back(s);
  Device device = outs.empty() ? inputs.front().device() : outs.front().device();
  auto node =
      std::make_shared<FunctionNode>(name, device, std::move(saved_tensors), std::move(backward));
  for (const Tensor& in : inputs) node->add_next_edge(gradient_edge(in));
  node->set_num_inputs(static_cast<int>(outs.size()));
  for (size_t i = 0; i < outs.size(); ++i) {
    Tensor& out = outs[i];
    if (!out.defined()) continue;
    // Integer outputs (argmax indices, comparisons) are not differentiable.
    if (!is_floating(out.dtype())) continue;
    auto& meta = out.impl().autograd;
    if (!meta) meta = std::make_unique<AutogradMeta>();
    meta->requires_grad = true;
    meta->grad_fn = node;
    meta->output_nr = static_cast<int>(i);
  }
  return outs;
}

Tensor record(const char* name, Tensor out, const TensorList& inputs, const TensorList& saved,
              FunctionNode::BackwardFn backward) {
  if (!needs_grad(inputs)) return out;
  return record_multi(name, {std::move(out)}, inputs, saved, std::move(backward))[0];
}

void check_inplace(const Tensor& self) {
  if (!GradMode::is_enabled()) return;
  OCTO_CHECK(!(self.is_leaf() && self.requires_grad()),
             "a leaf Variable that requires grad is "
             "being used in an in-place operation; do it under NoGradGuard, or on a clone()");
}

void record_inplace(const char* name, const Tensor& self, const TensorList& others,
                    const TensorList& saved, FunctionNode::BackwardFn backward) {
  TensorList inputs{self};
  inputs.insert(inputs.end(), others.begin(), others.end());
  const bool record = needs_grad(inputs);
  // Saved tensors record their version before the op's own bump, as in PyTorch: a saved tensor
  // that is or aliases self (b in a.mul_(b), b = a or a.detach()) was overwritten by the op, and
  // unpacking it at backward reports that.
  std::vector<SavedTensor> saved_tensors;
  if (record) {
    for (const Tensor& s : saved) saved_tensors.emplace_back(s);
  }
  self.bump_version();
  if (!record) return;
  // Edges are taken from self's history before it is replaced.
  auto node = std::make_shared<FunctionNode>(name, self.device(), std::move(saved_tensors),
                                             std::move(backward));
  for (const Tensor& in : inputs) node->add_next_edge(gradient_edge(in));
  node->set_num_inputs(1);
  auto& meta = self.impl().autograd;
  if (!meta) meta = std::make_unique<AutogradMeta>();
  meta->requires_grad = true;
  meta->grad_fn = node;
  meta->output_nr = 0;
}

}  // namespace octo::autograd
