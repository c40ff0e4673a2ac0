// nn::Module: parameters, buffers and children registered by name; train/eval, to(), clone().
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "nn/value.h"
#include "tensor/tensor.h"

namespace octo::nn {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

/// The base of every layer and model. Register state by name in the constructor (or in reset(),
/// see Cloneable) and write forward():
///
///   struct Net : octo::nn::Cloneable<Net> {
///     Net() { reset(); }
///     void reset() override {
///       fc1 = register_module("fc1", std::make_shared<octo::nn::Linear>(784, 128));
///       fc2 = register_module("fc2", std::make_shared<octo::nn::Linear>(128, 10));
///     }
///     octo::Tensor forward(const octo::Tensor& x) override {
///       return fc2->forward(octo::relu(fc1->forward(x.flatten(1))));
///     }
///     std::shared_ptr<octo::nn::Linear> fc1, fc2;
///   };
///
/// Modules are held by std::shared_ptr, as in libtorch. Names of nested state are dotted
/// ("features.0.weight") and match PyTorch's state_dict keys for the same structure.
class Module : public std::enable_shared_from_this<Module> {
 public:
  explicit Module(std::string type_name = "Module") : type_name_(std::move(type_name)) {}
  virtual ~Module() = default;

  /// The computation. Most modules take and return one tensor; override this.
  virtual Tensor forward(const Tensor& input);
  /// Call syntax: (*model)(x).
  Tensor operator()(const Tensor& input) { return forward(input); }
  /// The general form, for modules with several or nested inputs and outputs (DataParallel calls
  /// this). The default passes a single tensor input to forward(const Tensor&).
  virtual Value forward_values(const std::vector<Value>& inputs);

  // --- registration ---------------------------------------------------------------------------
  /// Registers a parameter (a leaf that requires grad unless requires_grad is false).
  Tensor& register_parameter(const std::string& name, Tensor tensor, bool requires_grad = true);
  /// Registers a buffer: state that is saved and moved with the module but not trained
  /// (BatchNorm's running statistics). An undefined tensor registers an empty slot.
  Tensor& register_buffer(const std::string& name, Tensor tensor);
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    register_child(name, module);
    return module;
  }

  // --- access ---------------------------------------------------------------------------------
  std::vector<Tensor> parameters(bool recurse = true) const;
  NamedTensors named_parameters(bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  NamedTensors named_buffers(bool recurse = true) const;
  std::vector<std::shared_ptr<Module>> children() const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const;
  /// This module and all below it, depth first, with dotted names ("" for this one).
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_modules();
  /// Calls fn on every module below and including this one (children first, like PyTorch).
  void apply(const std::function<void(Module&)>& fn);
  /// The total number of parameter elements (trainable_only: those that require grad).
  int64_t num_parameters(bool trainable_only = false) const;

  // --- mode and placement ---------------------------------------------------------------------
  virtual void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  /// Moves (or converts) every parameter and buffer in place: the Tensor handles stay the same
  /// objects (so optimizers built before keep working) and now refer to data on `device`.
  void to(Device device);
  void to(DType dtype);
  void to(Device device, DType dtype);
  /// Clears gradients: set_to_none drops them (the default, like PyTorch 2), else zeroes them.
  void zero_grad(bool set_to_none = true);

  // --- state ----------------------------------------------------------------------------------
  /// Parameters then buffers, recursively, with dotted names.
  virtual NamedTensors state_dict() const;
  /// Copies values in by name. strict: every key must match a parameter or buffer and vice versa;
  /// mismatches are reported together by name (missing, unexpected, wrong shape).
  virtual void load_state_dict(const NamedTensors& state, bool strict = true);

  /// A deep copy of the structure and state (the basis of DataParallel's replicate), optionally
  /// on another device. Modules support it by deriving from Cloneable<Derived>.
  virtual std::shared_ptr<Module> clone(std::optional<Device> device = std::nullopt) const;
  /// (Re)creates this module's parameters, buffers and children. Cloneable modules implement it;
  /// their constructors call it.
  virtual void reset();

  // --- printing -------------------------------------------------------------------------------
  const std::string& type_name() const { return type_name_; }
  /// The text inside the parentheses of this module's line in the summary, e.g.
  /// "in_features=784, out_features=10, bias=True".
  virtual std::string extra_repr() const { return ""; }
  /// PyTorch-style module tree.
  void pretty_print(std::ostream& os, int indent = 0) const;

 protected:
  void register_child(const std::string& name, std::shared_ptr<Module> module);
  /// Used by Cloneable: forget registrations before reset() re-creates them.
  void clear_registrations();
  /// Copies parameters, buffers, training mode and requires_grad flags from `other`, which has
  /// the same structure; children recurse.
  void copy_state_from(const Module& other, std::optional<Device> device);
  Tensor* find_parameter(const std::string& name);
  Tensor* find_buffer(const std::string& name);

 private:
  void place(std::optional<Device> device, std::optional<DType> dtype);
  template <typename F>
  void visit_named(const std::string& prefix, bool recurse, bool params, F&& fn) const;

  std::string type_name_;
  bool training_ = true;
  std::vector<std::pair<std::string, Tensor>> parameters_;
  std::vector<std::pair<std::string, Tensor>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

std::ostream& operator<<(std::ostream& os, const Module& m);

/// CRTP base that gives a module clone(): copy-construct Derived (copying its options), clear
/// the copied registrations, call reset() to re-create fresh parameters and children (with the
/// random generators' states restored afterwards, so cloning never changes later random draws),
/// then copy the original's values in.
template <typename Derived>
class Cloneable : public Module {
 public:
  using Module::Module;
  std::shared_ptr<Module> clone(std::optional<Device> device = std::nullopt) const override {
    auto copy = std::make_shared<Derived>(static_cast<const Derived&>(*this));
    copy->clear_registrations();
    reset_preserving_rng(*copy);
    copy->copy_state_from(*this, device);
    return copy;
  }

 private:
  static void reset_preserving_rng(Module& m);
};

namespace detail {
void reset_preserving_rng(Module& m);
}
template <typename Derived>
void Cloneable<Derived>::reset_preserving_rng(Module& m) {
  detail::reset_preserving_rng(m);
}

}  // namespace octo::nn
