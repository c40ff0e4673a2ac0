// optim::Optimizer: parameter groups with their own options, per-parameter state, state_dict.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "tensor/tensor.h"

namespace octo::optim {

/// A flat list of named tensors: what state_dict() returns and what a safetensors file holds.
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
/// One parameter's optimizer state by name ("momentum_buffer", "step", "exp_avg", ...).
using ParamState = std::map<std::string, Tensor>;

namespace detail {
/// A named hyperparameter of a parameter group ("lr", "momentum", "betas.0", "nesterov"), so
/// that schedulers and state_dict() can read and write options without knowing the optimizer.
/// Booleans read as 0 / 1.
struct OptionRef {
  OptionRef(const char* n, double* v) : name(n), d(v) {}
  OptionRef(const char* n, bool* v) : name(n), b(v) {}
  const char* name;
  double* d = nullptr;
  bool* b = nullptr;
  double get() const { return d ? *d : (*b ? 1.0 : 0.0); }
  void set(double v) const {
    if (d) {
      *d = v;
    } else {
      *b = v != 0.0;
    }
  }
};
}  // namespace detail

/// The base of every optimizer. Parameters are held in groups, each with its own options
/// (learning rate, ...); state lives per parameter, indexed by the parameter's position when all
/// groups' parameters are listed in order (as in PyTorch's state_dict). step() updates the
/// parameters in place under NoGradGuard from their .grad(); parameters without a gradient are
/// skipped.
///
///   octo::optim::SGD opt(model->parameters(), {.lr = 0.1, .momentum = 0.9});
///   for (...) { opt.zero_grad(); loss(...).backward(); opt.step(); }
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  /// One update of every parameter that has a gradient.
  virtual void step() = 0;
  /// Re-evaluates the model (closure runs with grad mode on and returns the loss), then steps.
  Tensor step(const std::function<Tensor()>& closure);
  /// Clears the gradients: set_to_none drops them (the default, as in PyTorch 2), else zeroes.
  void zero_grad(bool set_to_none = true);

  /// "SGD", "Adam", "AdamW": used in error messages.
  const std::string& name() const { return name_; }
  virtual int64_t num_param_groups() const = 0;
  virtual const std::vector<Tensor>& group_params(int64_t group) const = 0;
  /// All parameters, group after group: the order state indices refer to.
  std::vector<Tensor> parameters() const;
  int64_t num_params() const;

  // --- options by name (what schedulers use) ---------------------------------------------------
  /// True when groups of this optimizer have the option ("lr", "momentum", "betas.0", ...).
  bool has_option(const std::string& name) const;
  /// The option of one group; ValueError naming the known options when there is no such option.
  double get_option(int64_t group, const std::string& name) const;
  /// Sets an option of one group (booleans from 0 / 1) and, with `validate`, checks the group's
  /// options (restoring the old value on failure). Schedulers set values without the check, as
  /// PyTorch does: OneCycleLR's linear schedule ends slightly below 0 at its last step, which is
  /// fine as long as no optimizer step follows; step() validates every group before updating.
  void set_option(int64_t group, const std::string& name, double value, bool validate = true);
  double lr(int64_t group = 0) const { return get_option(group, "lr"); }
  void set_lr(int64_t group, double lr, bool validate = true) {
    set_option(group, "lr", lr, validate);
  }
  /// The learning rate a scheduler started from (PyTorch's group["initial_lr"]); set by the first
  /// scheduler attached and saved in state_dict.
  std::optional<double> initial_lr(int64_t group) const;
  void set_initial_lr(int64_t group, double lr);

  // --- state ------------------------------------------------------------------------------------
  /// The state of parameter `index` (see parameters()); empty until a step has touched it.
  const ParamState& state(int64_t index) const;
  /// The options and state as named tensors:
  ///   "param_groups.<g>.params"   int64 [n]: the indices of the group's parameters
  ///   "param_groups.<g>.<option>" 0-d float64 ("lr", "betas.0", "nesterov" as 0 / 1, ...)
  ///   "state.<i>.<key>"           the state tensors of parameter i ("state.3.exp_avg")
  /// State tensors are the optimizer's own (as in PyTorch): save them or clone() them before the
  /// next step if a snapshot is needed.
  NamedTensors state_dict() const;
  /// Loads a state_dict() of an optimizer of the same kind over the same parameter layout:
  /// options are set, state tensors copied onto each parameter's device and dtype ("step" stays
  /// float64 on the cpu). Everything is checked before anything changes; ValueError on a
  /// different number of groups or parameters, missing or unexpected keys, wrong shapes.
  void load_state_dict(const NamedTensors& state_dict);

 protected:
  explicit Optimizer(std::string name) : name_(std::move(name)) {}
  /// The named options of a group (pointers into the group's options struct).
  virtual std::vector<detail::OptionRef> option_refs(int64_t group) = 0;
  std::vector<detail::OptionRef> option_refs(int64_t group) const {
    return const_cast<Optimizer*>(this)->option_refs(group);
  }
  /// Throws ValueError when a group's options are invalid.
  virtual void validate_group(int64_t group) const = 0;
  /// Checks the parameters of a new group (defined, leaves, not already in the optimizer) and
  /// makes room for their state. Derived classes call it for every group they add.
  void register_group_params(const std::vector<Tensor>& params);
  /// The state of parameter `index`, created empty on first use.
  ParamState& mutable_state(int64_t index) { return state_[static_cast<size_t>(index)]; }
  void check_group(int64_t group) const;

  /// Note [Master weights]: the tensor a step updates for parameter `index`, p itself unless
  /// `master` is set and p is bfloat16 or float16; then its float32 master copy, the state
  /// "master_weight", made from p on first use and made again when p was changed outside the
  /// optimizer. *grad is widened to float32 to match. finish_update rounds the master back into
  /// p. Derived optimizers call the pair around each parameter's update.
  Tensor update_target(int64_t index, const Tensor& p, bool master, Tensor* grad);
  void finish_update(int64_t index, const Tensor& p, const Tensor& target);

 private:
  /// load_state_dict's steps, over what has been read so far (defined in optimizer.cpp).
  struct Loading;
  Loading sort_keys(const NamedTensors& state_dict) const;
  void read_group(int64_t group, Loading& loading) const;
  void read_param_states(Loading& loading) const;
  void commit(Loading& loading);

  std::string name_;
  std::vector<ParamState> state_;
  std::vector<std::optional<double>> initial_lr_;
  /// Per parameter: its version counter just after finish_update wrote it from the master copy.
  std::vector<std::optional<uint32_t>> written_version_;
};

/// A group of parameters with the options they are optimized with:
///   octo::optim::SGD::Group{head->parameters(), {.lr = 0.1, .momentum = 0.9}}
/// Each group carries complete options; fields not set take the options struct's defaults.
template <typename Options>
struct ParamGroup {
  std::vector<Tensor> params;
  Options options{};
};

/// The part shared by optimizers whose options struct is `Options` (which provides
/// `std::vector<detail::OptionRef> refs()` and `void validate(const std::string& who) const`).
template <typename Options>
class OptimizerBase : public Optimizer {
 public:
  using Group = ParamGroup<Options>;
  using Optimizer::step;

  int64_t num_param_groups() const override { return static_cast<int64_t>(groups_.size()); }
  const std::vector<Tensor>& group_params(int64_t group) const override {
    check_group(group);
    return groups_[static_cast<size_t>(group)].params;
  }
  const std::vector<Group>& param_groups() const { return groups_; }
  /// A group's options, to read or change between steps (step() validates them).
  Options& options(int64_t group = 0) {
    check_group(group);
    return groups_[static_cast<size_t>(group)].options;
  }
  const Options& options(int64_t group = 0) const {
    check_group(group);
    return groups_[static_cast<size_t>(group)].options;
  }
  /// Adds a group (e.g. layers unfrozen during fine-tuning); its state indices follow the
  /// existing parameters.
  void add_param_group(Group group) {
    group.options.validate(name());
    register_group_params(group.params);
    groups_.push_back(std::move(group));
  }

 protected:
  OptimizerBase(std::string name, std::vector<Group> groups) : Optimizer(std::move(name)) {
    size_t total = 0;
    for (const Group& g : groups) total += g.params.size();
    OCTO_CHECK_VALUE(total > 0, this->name(), ": optimizer got an empty parameter list");
    for (Group& g : groups) add_param_group(std::move(g));
  }
  std::vector<detail::OptionRef> option_refs(int64_t group) override {
    check_group(group);
    return groups_[static_cast<size_t>(group)].options.refs();
  }
  using Optimizer::option_refs;
  void validate_group(int64_t group) const override {
    check_group(group);
    groups_[static_cast<size_t>(group)].options.validate(name());
  }
  void validate_all() const {
    for (int64_t g = 0; g < num_param_groups(); ++g) validate_group(g);
  }

  std::vector<Group> groups_;
};

}  // namespace octo::optim
