// nn::Module: registration, traversal, placement, state dicts, cloning and printing.
#include "nn/module.h"

#include <map>
#include <set>
#include <sstream>

#include "autograd/grad_mode.h"
#include "core/random.h"
#include "tensor/autograd_meta.h"

namespace octo::nn {

namespace {

void check_name(const std::string& name, const char* what) {
  OCTO_CHECK_VALUE(!name.empty() && name.find('.') == std::string::npos, what,
                   " name can't be empty or contain \".\", got \"", name, "\"");
}

}  // namespace

Tensor Module::forward(const Tensor&) {
  OCTO_THROW(NotImplementedError, type_name_, " does not implement forward(const Tensor&)");
}

Value Module::forward_values(const std::vector<Value>& inputs) {
  OCTO_CHECK_VALUE(inputs.size() == 1 && inputs[0].is_tensor(), type_name_,
                   ": forward takes one tensor; override forward_values() to accept ",
                   inputs.size(), " inputs");
  return forward(inputs[0].tensor());
}

Tensor& Module::register_parameter(const std::string& name, Tensor tensor, bool requires_grad) {
  check_name(name, "parameter");
  OCTO_CHECK_VALUE(find_parameter(name) == nullptr && find_buffer(name) == nullptr, "attribute \"",
                   name, "\" already registered in ", type_name_);
  if (tensor.defined()) {
    OCTO_CHECK_VALUE(tensor.is_leaf(), "register_parameter(\"", name,
                     "\"): a parameter must be a leaf tensor; use detach() on computed values");
    tensor.requires_grad_(requires_grad);
  }
  parameters_.emplace_back(name, std::move(tensor));
  return parameters_.back().second;
}

Tensor& Module::register_buffer(const std::string& name, Tensor tensor) {
  check_name(name, "buffer");
  OCTO_CHECK_VALUE(find_parameter(name) == nullptr && find_buffer(name) == nullptr, "attribute \"",
                   name, "\" already registered in ", type_name_);
  buffers_.emplace_back(name, std::move(tensor));
  return buffers_.back().second;
}

void Module::register_child(const std::string& name, std::shared_ptr<Module> module) {
  check_name(name, "submodule");
  OCTO_CHECK_VALUE(module != nullptr, "register_module(\"", name, "\"): module is null");
  for (const auto& [n, m] : children_)
    OCTO_CHECK_VALUE(n != name, "submodule \"", name, "\" already registered in ", type_name_);
  children_.emplace_back(name, std::move(module));
}

Tensor* Module::find_parameter(const std::string& name) {
  for (auto& [n, t] : parameters_)
    if (n == name) return &t;
  return nullptr;
}

Tensor* Module::find_buffer(const std::string& name) {
  for (auto& [n, t] : buffers_)
    if (n == name) return &t;
  return nullptr;
}

template <typename F>
void Module::visit_named(const std::string& prefix, bool recurse, bool params, F&& fn) const {
  for (const auto& [n, t] : params ? parameters_ : buffers_)
    if (t.defined()) fn(prefix + n, t);
  if (!recurse) return;
  for (const auto& [n, child] : children_) child->visit_named(prefix + n + ".", true, params, fn);
}

NamedTensors Module::named_parameters(bool recurse) const {
  NamedTensors out;
  visit_named("", recurse, true,
              [&](const std::string& n, const Tensor& t) { out.emplace_back(n, t); });
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_parameters(recurse)) out.push_back(t);
  return out;
}

NamedTensors Module::named_buffers(bool recurse) const {
  NamedTensors out;
  visit_named("", recurse, false,
              [&](const std::string& n, const Tensor& t) { out.emplace_back(n, t); });
  return out;
}

std::vector<Tensor> Module::buffers(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_buffers(recurse)) out.push_back(t);
  return out;
}

std::vector<std::shared_ptr<Module>> Module::children() const {
  std::vector<std::shared_ptr<Module>> out;
  for (const auto& [n, m] : children_) out.push_back(m);
  return out;
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_children() const {
  return children_;
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_modules() {
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> out{{"", shared_from_this()}};
  for (const auto& [n, child] : children_) {
    for (auto& [sub, m] : child->named_modules())
      out.emplace_back(sub.empty() ? n : n + "." + sub, m);
  }
  return out;
}

void Module::apply(const std::function<void(Module&)>& fn) {
  for (auto& [n, child] : children_) child->apply(fn);
  fn(*this);
}

int64_t Module::num_parameters(bool trainable_only) const {
  int64_t n = 0;
  for (const Tensor& p : parameters())
    if (!trainable_only || p.requires_grad()) n += p.numel();
  return n;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [n, child] : children_) child->train(on);
}

void Module::to(Device device, DType dtype) { place(device, dtype); }
void Module::to(Device device) { place(device, std::nullopt); }
void Module::to(DType dtype) { place(std::nullopt, dtype); }

// Moves and converts every parameter, gradient and buffer in place (the handles stay the same).
// Only floating tensors change dtype: integer buffers (num_batches_tracked) keep theirs.
void Module::place(std::optional<Device> device, std::optional<DType> dtype) {
  NoGradGuard no_grad;
  auto move = [&](const Tensor& t) {
    if (!t.defined()) return;
    Device d = device.value_or(t.device());
    DType type = dtype && is_floating(t.dtype()) ? *dtype : t.dtype();
    if (t.device() == d && t.dtype() == type) return;
    octo::detail::set_data(t, t.to(d, type));
    Tensor g = t.grad();
    if (g.defined()) octo::detail::set_data(g, g.to(d, type));
  };
  for (auto& [n, t] : parameters_) move(t);
  for (auto& [n, t] : buffers_) move(t);
  for (auto& [n, child] : children_) child->place(device, dtype);
}

void Module::zero_grad(bool set_to_none) {
  NoGradGuard no_grad;
  for (const Tensor& p : parameters()) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (set_to_none) {
      p.set_grad(Tensor());
    } else {
      g.zero_();
    }
  }
}

NamedTensors Module::state_dict() const {
  // PyTorch's order: each module's parameters, then its buffers, then its children's, so the
  // file lists keys exactly as torch's state_dict() does for the same structure.
  NamedTensors out;
  std::function<void(const Module&, const std::string&)> visit = [&](const Module& m,
                                                                     const std::string& prefix) {
    for (const auto& [n, t] : m.parameters_)
      if (t.defined()) out.emplace_back(prefix + n, t);
    for (const auto& [n, t] : m.buffers_)
      if (t.defined()) out.emplace_back(prefix + n, t);
    for (const auto& [n, child] : m.children_) visit(*child, prefix + n + ".");
  };
  visit(*this, "");
  return out;
}

void Module::load_state_dict(const NamedTensors& state, bool strict) {
  NoGradGuard no_grad;
  std::map<std::string, Tensor> mine;
  for (auto& [n, t] : state_dict()) mine.emplace(n, t);
  std::vector<std::string> unexpected, mismatched;
  std::set<std::string> seen;
  for (const auto& [name, value] : state) {
    auto it = mine.find(name);
    if (it == mine.end()) {
      unexpected.push_back(name);
      continue;
    }
    seen.insert(name);
    if (it->second.sizes() != value.sizes()) {
      mismatched.push_back("size mismatch for " + name + ": copying a param with shape " +
                           shape_str(value.sizes()) + ", the shape in current model is " +
                           shape_str(it->second.sizes()));
    } else if (value.defined() && it->second.defined() && value.dtype() != it->second.dtype()) {
      // Never converted silently: an int32 weight would load as float32 without a word.
      mismatched.push_back(
          "dtype mismatch for " + name + ": the state_dict holds " +
          std::string(dtype_name(value.dtype())) + ", the current model " +
          std::string(dtype_name(it->second.dtype())) +
          " (if a conversion is meant, convert the tensor with .to(dtype) before loading)");
    }
  }
  std::vector<std::string> missing;
  for (const auto& [name, t] : mine)
    if (!seen.count(name)) missing.push_back(name);
  bool fail = !mismatched.empty() || (strict && (!missing.empty() || !unexpected.empty()));
  if (fail) {
    std::ostringstream os;
    os << "Error(s) in loading state_dict for " << type_name_ << ":";
    auto list = [&](const char* what, const std::vector<std::string>& names) {
      if (names.empty()) return;
      os << "\n    " << what << ": ";
      for (size_t i = 0; i < names.size(); ++i) os << (i ? ", " : "") << '"' << names[i] << '"';
      os << ".";
    };
    if (strict) {
      list("Missing key(s) in state_dict", missing);
      list("Unexpected key(s) in state_dict", unexpected);
    }
    for (const auto& m : mismatched) os << "\n    " << m << ".";
    OCTO_THROW(ValueError, os.str());
  }
  for (const auto& [name, value] : state) {
    auto it = mine.find(name);
    if (it != mine.end()) it->second.copy_(value);
  }
}

std::shared_ptr<Module> Module::clone(std::optional<Device>) const {
  OCTO_THROW(
      NotImplementedError, type_name_,
      " cannot be cloned (DataParallel replicates models by cloning them): derive it from octo::nn::Cloneable<",
      type_name_,
      "> and create its layers in reset(), which the constructor calls. See docs/tutorial.md.");
}

void Module::reset() { OCTO_THROW(NotImplementedError, type_name_, " does not implement reset()"); }

void Module::clear_registrations() {
  parameters_.clear();
  buffers_.clear();
  children_.clear();
}

void Module::copy_state_from(const Module& other, std::optional<Device> device) {
  NoGradGuard no_grad;
  training_ = other.training_;
  auto copy_list = [&](std::vector<std::pair<std::string, Tensor>>& mine,
                       const std::vector<std::pair<std::string, Tensor>>& theirs, bool is_param) {
    OCTO_INTERNAL_ASSERT(mine.size() == theirs.size(), type_name_,
                         ": reset() registered a different structure than the original has");
    for (size_t i = 0; i < mine.size(); ++i) {
      const Tensor& src = theirs[i].second;
      if (!src.defined()) {
        mine[i].second = Tensor();
        continue;
      }
      Tensor data = src.to(device.value_or(src.device())).clone().detach();
      Tensor& slot = mine[i].second;
      if (slot.defined()) {
        octo::detail::set_data(slot, data);  // keep the handle reset() may have stored in a member
      } else {
        slot = data;
      }
      if (is_param) slot.requires_grad_(src.requires_grad());
    }
  };
  copy_list(parameters_, other.parameters_, true);
  copy_list(buffers_, other.buffers_, false);
  OCTO_INTERNAL_ASSERT(children_.size() == other.children_.size());
  for (size_t i = 0; i < children_.size(); ++i)
    children_[i].second->copy_state_from(*other.children_[i].second, device);
}

namespace detail {
void reset_preserving_rng(Module& m) {
  auto states = get_rng_states();
  NoGradGuard no_grad;
  m.reset();
  set_rng_states(states);
}
}  // namespace detail

void Module::pretty_print(std::ostream& os, int indent) const {
  os << type_name_ << '(' << extra_repr();
  if (children_.empty()) {
    os << ')';
    return;
  }
  os << '\n';
  std::string pad(static_cast<size_t>(indent + 2), ' ');
  for (const auto& [n, child] : children_) {
    os << pad << '(' << n << "): ";
    child->pretty_print(os, indent + 2);
    os << '\n';
  }
  os << std::string(static_cast<size_t>(indent), ' ') << ')';
}

std::ostream& operator<<(std::ostream& os, const Module& m) {
  m.pretty_print(os);
  return os;
}

}  // namespace octo::nn
