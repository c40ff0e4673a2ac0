// Tensor's autograd methods: requires_grad_, grad, backward, hooks, detach, version counter.
#include "autograd/engine.h"
#include "autograd/inplace.h"
#include "autograd/node.h"
#include "core/error.h"
#include "tensor/autograd_hooks.h"
#include "tensor/autograd_meta.h"
#include "tensor/tensor.h"

namespace octo {

namespace {
// Tells tensor/'s printing a grad_fn's name (Note [Autograd hooks] in tensor/autograd_hooks.h).
const bool kNodeNameHookInstalled = [] {
  detail::set_node_name_hook(
      [](const autograd::Node& node) -> const std::string& { return node.name(); });
  return true;
}();

AutogradMeta& meta_of(const Tensor& t) {
  auto& m = t.impl().autograd;
  if (!m) m = std::make_unique<AutogradMeta>();
  return *m;
}
}  // namespace

bool Tensor::requires_grad() const {
  autograd::refresh_view(
      *this);  // a view whose base changed in place (Note [In-place ops on views])
  const auto& m = impl().autograd;
  return m && (m->requires_grad || m->grad_fn);
}

Tensor& Tensor::requires_grad_(bool requires_grad) {
  OCTO_CHECK(
      is_leaf() || requires_grad,
      "you can only change requires_grad flags of leaf tensors; use detach() to get a tensor that does not require grad");
  OCTO_CHECK_VALUE(
      !requires_grad || is_floating(dtype()),
      "only tensors of floating point dtype can require gradients, but this tensor has dtype ",
      dtype());
  meta_of(*this).requires_grad = requires_grad;
  return *this;
}

Tensor Tensor::grad() const {
  const auto& m = impl().autograd;
  return m ? m->grad : Tensor();
}

void Tensor::set_grad(const Tensor& grad) const {
  if (grad.defined()) {
    OCTO_CHECK_VALUE(grad.sizes() == sizes(), "set_grad: gradient of shape ", grad.sizes(),
                     " for a tensor of shape ", sizes());
    detail::check_same_device({this, &grad});
  }
  meta_of(*this).grad = grad;
}

std::shared_ptr<autograd::Node> Tensor::grad_fn() const {
  autograd::refresh_view(*this);
  const auto& m = impl().autograd;
  return m ? m->grad_fn : nullptr;
}

int Tensor::output_nr() const {
  const auto& m = impl().autograd;
  return m ? m->output_nr : 0;
}

bool Tensor::is_leaf() const { return grad_fn() == nullptr; }

void Tensor::backward(const Tensor& grad, std::optional<bool> retain_graph,
                      bool create_graph) const {
  autograd::backward({*this}, {grad}, retain_graph, create_graph);
}

void Tensor::retain_grad() const {
  OCTO_CHECK(requires_grad(),
             "retain_grad: can't retain_grad on a tensor that does not require grad");
  if (is_leaf()) return;  // leaves keep their grad anyway
  AutogradMeta& m = meta_of(*this);
  if (m.retains_grad) return;
  m.retains_grad = true;
  std::weak_ptr<TensorImpl> weak = impl_ptr();
  grad_fn()->add_pre_hook(output_nr(), [weak](const Tensor& g) -> Tensor {
    auto impl = weak.lock();
    if (!impl) return {};
    Tensor self(impl);
    Tensor current = self.grad();
    self.impl().autograd->grad = current.defined() ? current + g : g.clone();
    return {};
  });
}

Tensor Tensor::detach() const {
  return detail::make_view(*this, sizes(), strides(), storage_offset());
}

void Tensor::register_hook(std::function<Tensor(const Tensor&)> fn) const {
  OCTO_CHECK(requires_grad(), "cannot register a hook on a tensor that doesn't require gradient");
  if (auto fn_node = grad_fn()) {
    fn_node->add_pre_hook(output_nr(), std::move(fn));
  } else {
    meta_of(*this).hooks.push_back(std::move(fn));  // run by AccumulateGrad
  }
}

void Tensor::register_post_accumulate_grad_hook(std::function<void(Tensor&)> fn) const {
  OCTO_CHECK(is_leaf() && requires_grad(),
             "post accumulate grad hooks can only be registered on leaf tensors that require grad");
  meta_of(*this).post_accumulate_hooks.push_back(std::move(fn));
}

uint32_t Tensor::version() const { return impl().storage->version.load(); }
void Tensor::bump_version() const { impl().storage->version.fetch_add(1); }

}  // namespace octo
