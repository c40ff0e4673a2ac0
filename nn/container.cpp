// Sequential and ModuleList.
#include "nn/container.h"

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

Tensor Sequential::forward(const Tensor& x) {
  Tensor h = x;
  for (const auto& m : modules_) h = m->forward(h);
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
