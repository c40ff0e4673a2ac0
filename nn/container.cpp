// Sequential and ModuleList.
#include "nn/container.h"

#include <optional>
#include <typeinfo>

#include "nn/activation.h"
#include "nn/normalization.h"

namespace octo::nn {

Sequential::Sequential(std::initializer_list<std::shared_ptr<Module>> modules)
    : Sequential(std::vector<std::shared_ptr<Module>>(modules)) {}

Sequential::Sequential(const std::vector<std::shared_ptr<Module>>& modules)
    : Cloneable("Sequential") {
  for (const auto& m : modules) push_back(m);
}

void Sequential::push_back(std::shared_ptr<Module> module) {
  register_module(std::to_string(modules_.size()), module);
  modules_.push_back(std::move(module));
}

namespace {

/// m->forward_relu(x) when m is exactly a BatchNorm1d or BatchNorm2d (a subclass may override
/// forward), else nothing.
std::optional<Tensor> forward_relu_of(Module& m, const Tensor& x) {
  if (typeid(m) == typeid(BatchNorm2d)) return static_cast<BatchNorm2d&>(m).forward_relu(x);
  if (typeid(m) == typeid(BatchNorm1d)) return static_cast<BatchNorm1d&>(m).forward_relu(x);
  return std::nullopt;
}

}  // namespace

// Note [Sequential fusion]: a BatchNorm1d/2d directly followed by a ReLU runs as one
// forward_relu call (Note [Fused batch norm + ReLU] in autograd/ops/norm.cpp): the values, the
// gradients and every module's state are those of running the two in turn; only the tape differs
// (one BatchNormReluBackward node instead of two). Both must be exactly those classes: a
// subclass that overrides forward is run as written.
Tensor Sequential::forward(const Tensor& x) {
  Tensor h = x;
  for (size_t i = 0; i < modules_.size(); ++i) {
    if (i + 1 < modules_.size() && typeid(*modules_[i + 1]) == typeid(ReLU)) {
      if (std::optional<Tensor> y = forward_relu_of(*modules_[i], h)) {
        h = std::move(*y);
        ++i;  // the ReLU ran inside
        continue;
      }
    }
    h = modules_[i]->forward(h);
  }
  return h;
}

// A clone re-creates its children as clones of the original's: copy_state_from then copies
// their values (a no-op for freshly cloned state).
void Sequential::reset() {
  auto old = std::move(modules_);
  modules_.clear();
  for (const auto& m : old) push_back(m->clone());
}

ModuleList::ModuleList(std::initializer_list<std::shared_ptr<Module>> modules)
    : Cloneable("ModuleList") {
  for (const auto& m : modules) push_back(m);
}

void ModuleList::push_back(std::shared_ptr<Module> module) {
  register_module(std::to_string(modules_.size()), module);
  modules_.push_back(std::move(module));
}

void ModuleList::reset() {
  auto old = std::move(modules_);
  modules_.clear();
  for (const auto& m : old) push_back(m->clone());
}

}  // namespace octo::nn
