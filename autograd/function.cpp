// record(): connecting an op's outputs to a new FunctionNode on the tape.
#include "autograd/function.h"

#include <cmath>
#include <string_view>

#include "core/error.h"
#include "tensor/autograd_meta.h"

namespace octo::autograd {

namespace {

/// Which of `outs` the saved tensor `s` is (the same TensorImpl), or -1 for an input.
int output_index(const Tensor& s, const TensorList& outs) {
  if (!s.defined()) return -1;
  for (size_t i = 0; i < outs.size(); ++i)
    if (outs[i].defined() && &outs[i].impl() == &s.impl()) return static_cast<int>(i);
  return -1;
}

/// Note [Anomaly mode]: an op whose inputs are finite and whose output is not is named here, at
/// the forward, where the NaN first appears.
void check_forward_anomaly(const char* name, const TensorList& outs, const TensorList& inputs) {
  for (size_t i = 0; i < outs.size(); ++i) {
    if (all_finite(outs[i])) continue;
    // The inputs are looked at only now, when an output is bad: NaN in, NaN out is not the op's
    // doing.
    for (const Tensor& in : inputs)
      if (!all_finite(in)) return;
    const Tensor& out = outs[i];
    std::string_view op(name);
    if (op.size() > 8 && op.substr(op.size() - 8) == "Backward") op.remove_suffix(8);
    OCTO_THROW(Error, "anomaly mode: the op recorded as ", name, " (", op,
               ") produced nan or inf values in its output ", i, " (shape ", out.sizes(),
               ") from finite inputs");
  }
}

}  // namespace

bool all_finite(const Tensor& t) {
  if (!t.defined() || !is_floating(t.dtype()) || t.numel() == 0) return true;
  NoGradGuard no_grad;
  // A float64 host copy is scanned directly: this file sits below the op library (the op
  // library records through it), so it may not call sum() or mul().
  Tensor host = t.to(kCPU, kFloat64).contiguous();
  const double* p = host.data_ptr<double>();
  for (int64_t i = 0; i < host.numel(); ++i)
    if (!std::isfinite(p[i])) return false;
  return true;
}

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
  if (AnomalyMode::is_enabled()) check_forward_anomaly(name, outs, inputs);
  std::vector<SavedTensor> saved_tensors;
  saved_tensors.reserve(saved.size());
  for (const Tensor& s : saved) saved_tensors.emplace_back(s, output_index(s, outs));
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

}  // namespace octo::autograd
