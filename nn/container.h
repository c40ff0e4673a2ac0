// Sequential and ModuleList: modules that hold other modules by index.
#pragma once

#include <initializer_list>

#include "nn/module.h"

namespace octo::nn {

/// Runs its children in order: Sequential({conv, relu, pool}). Children are named "0", "1", ...
/// so state_dict keys read "features.0.weight", as in PyTorch.
class Sequential : public Cloneable<Sequential> {
 public:
  Sequential() : Cloneable("Sequential") {}
  Sequential(std::initializer_list<std::shared_ptr<Module>> modules);
  explicit Sequential(const std::vector<std::shared_ptr<Module>>& modules);
  void push_back(std::shared_ptr<Module> module);
  Tensor forward(const Tensor& x) override;
  void reset() override;
  size_t size() const { return modules_.size(); }
  std::shared_ptr<Module> operator[](size_t i) const { return modules_.at(i); }

 private:
  std::vector<std::shared_ptr<Module>> modules_;
};

/// A list of modules registered as children "0", "1", ...; forward is the owner's business.
class ModuleList : public Cloneable<ModuleList> {
 public:
  ModuleList() : Cloneable("ModuleList") {}
  ModuleList(std::initializer_list<std::shared_ptr<Module>> modules);
  void push_back(std::shared_ptr<Module> module);
  void reset() override;
  size_t size() const { return modules_.size(); }
  std::shared_ptr<Module> operator[](size_t i) const { return modules_.at(i); }
  auto begin() const { return modules_.begin(); }
  auto end() const { return modules_.end(); }

 private:
  std::vector<std::shared_ptr<Module>> modules_;
};

}  // namespace octo::nn
