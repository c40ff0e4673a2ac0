// optim::Optimizer: groups, zero_grad, options by name, and the flat state_dict format.
#include "optim/optimizer.h"

#include <charconv>
#include <cmath>
#include <map>
#include <set>
#include <unordered_map>

#include "autograd/grad_mode.h"
#include "autograd/ops/elementwise.h"
#include "autograd/ops/reduce.h"
#include "tensor/factories.h"

namespace octo::optim {

namespace {

/// Splits "param_groups.12.betas.0" after `prefix` into (12, "betas.0"); nullopt when the name
/// does not have that form.
std::optional<std::pair<int64_t, std::string>> split_key(const std::string& name,
                                                         const std::string& prefix) {
  if (name.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  size_t dot = name.find('.', prefix.size());
  if (dot == std::string::npos || dot == prefix.size() || dot + 1 == name.size())
    return std::nullopt;
  int64_t index = -1;
  const char* first = name.data() + prefix.size();
  const char* last = name.data() + dot;
  auto [ptr, ec] = std::from_chars(first, last, index);
  if (ec != std::errc() || ptr != last || index < 0) return std::nullopt;
  return std::make_pair(index, name.substr(dot + 1));
}

Tensor scalar_f64(double v) { return scalar_tensor(v, {.dtype = kFloat64}); }

double read_scalar(const std::string& key, const Tensor& t) {
  OCTO_CHECK_VALUE(t.defined() && t.numel() == 1, "load_state_dict: expected '", key,
                   "' to hold one number, got a tensor of shape ",
                   t.defined() ? t.sizes() : Shape{});
  double v = t.to(kCPU).to(kFloat64).item<double>();
  OCTO_CHECK_VALUE(std::isfinite(v), "load_state_dict: '", key, "' is ", v,
                   "; every hyper-parameter and counter must be a finite number");
  return v;
}

}  // namespace

Tensor Optimizer::step(const std::function<Tensor()>& closure) {
  Tensor loss;
  {
    EnableGradGuard enable_grad;
    loss = closure();
  }
  step();
  return loss;
}

void Optimizer::zero_grad(bool set_to_none) {
  NoGradGuard no_grad;
  for (int64_t g = 0; g < num_param_groups(); ++g) {
    for (const Tensor& p : group_params(g)) {
      Tensor grad = p.grad();
      if (!grad.defined()) continue;
      if (set_to_none) {
        p.set_grad(Tensor());
      } else {
        grad.zero_();
      }
    }
  }
}

std::vector<Tensor> Optimizer::parameters() const {
  std::vector<Tensor> out;
  for (int64_t g = 0; g < num_param_groups(); ++g) {
    const auto& ps = group_params(g);
    out.insert(out.end(), ps.begin(), ps.end());
  }
  return out;
}

int64_t Optimizer::num_params() const { return static_cast<int64_t>(state_.size()); }

void Optimizer::check_group(int64_t group) const {
  OCTO_CHECK_INDEX(group >= 0 && group < num_param_groups(), name_, ": parameter group ", group,
                   " out of range (the optimizer has ", num_param_groups(), " groups)");
}

void Optimizer::register_group_params(const std::vector<Tensor>& params) {
  std::set<const TensorImpl*> seen;
  for (int64_t g = 0; g < num_param_groups(); ++g)
    for (const Tensor& p : group_params(g)) seen.insert(p.impl_ptr().get());
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i];
    OCTO_CHECK_VALUE(p.defined(), name_, ": parameter ", i, " of a group is an undefined tensor");
    OCTO_CHECK_VALUE(p.is_leaf(), name_, ": can't optimize a non-leaf tensor (parameter ", i,
                     " of a group has a grad_fn); pass leaves such as module parameters");
    OCTO_CHECK_VALUE(p.is_floating_point(), name_, ": parameters must be floating point, got ",
                     dtype_name(p.dtype()), " for parameter ", i, " of a group");
    OCTO_CHECK_VALUE(
        seen.insert(p.impl_ptr().get()).second, name_,
        ": some parameters appear more than once (in two parameter groups, or twice in one); parameter ",
        i, " of the new group is already in the optimizer");
  }
  state_.resize(state_.size() + params.size());
  written_version_.resize(state_.size());
  initial_lr_.resize(static_cast<size_t>(num_param_groups()) + 1);
}

const ParamState& Optimizer::state(int64_t index) const {
  OCTO_CHECK_INDEX(index >= 0 && index < num_params(), name_, ": state index ", index,
                   " out of range (the optimizer has ", num_params(), " parameters)");
  return state_[static_cast<size_t>(index)];
}

bool Optimizer::has_option(const std::string& name) const {
  if (num_param_groups() == 0) return false;
  for (const auto& r : option_refs(0))
    if (name == r.name) return true;
  return false;
}

double Optimizer::get_option(int64_t group, const std::string& name) const {
  check_group(group);
  std::vector<std::string> known;
  for (const auto& r : option_refs(group)) {
    if (name == r.name) return r.get();
    known.emplace_back(r.name);
  }
  OCTO_THROW(ValueError, name_, ": no option '", name, "'; the options are ", known);
}

void Optimizer::set_option(int64_t group, const std::string& name, double value, bool validate) {
  check_group(group);
  for (const auto& r : option_refs(group)) {
    if (name != r.name) continue;
    double old = r.get();
    r.set(value);
    if (!validate) return;
    try {
      validate_group(group);
    } catch (...) {
      r.set(old);
      throw;
    }
    return;
  }
  (void)get_option(group, name);  // throws, naming the known options
}

std::optional<double> Optimizer::initial_lr(int64_t group) const {
  check_group(group);
  return initial_lr_[static_cast<size_t>(group)];
}

void Optimizer::set_initial_lr(int64_t group, double lr) {
  check_group(group);
  initial_lr_[static_cast<size_t>(group)] = lr;
}

NamedTensors Optimizer::state_dict() const {
  NamedTensors out;
  int64_t index = 0;
  for (int64_t g = 0; g < num_param_groups(); ++g) {
    const std::string prefix = "param_groups." + std::to_string(g) + ".";
    const int64_t n = static_cast<int64_t>(group_params(g).size());
    std::vector<int64_t> ids(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = index + i;
    index += n;
    out.emplace_back(prefix + "params", from_vector(ids, {n}));
    for (const auto& r : option_refs(g)) out.emplace_back(prefix + r.name, scalar_f64(r.get()));
    if (auto lr0 = initial_lr_[static_cast<size_t>(g)]) {
      out.emplace_back(prefix + "initial_lr", scalar_f64(*lr0));
    }
  }
  for (size_t i = 0; i < state_.size(); ++i)
    for (const auto& [key, t] : state_[i])
      out.emplace_back("state." + std::to_string(i) + "." + key, t);
  return out;
}

// Note [Loading a state dict]: load_state_dict reads and checks everything into a Loading before
// it changes anything, in four steps: sort the keys into groups and per-parameter state (anything
// else is an error); read each group's parameter ids and options; read and check each parameter's
// state; then set the options, validate them (rolling back on failure) and commit.
struct Optimizer::Loading {
  using Entries = std::map<std::string, Tensor>;
  std::map<int64_t, Entries> groups;                 // "param_groups.<g>.<rest>" by g, then rest
  std::map<int64_t, Entries> states;                 // "state.<i>.<key>" by i, then key
  std::unordered_map<int64_t, int64_t> id_to_index;  // saved parameter id -> our index
  int64_t next_index = 0;
  std::vector<std::vector<std::pair<detail::OptionRef, double>>> options;  // per group
  std::vector<std::optional<double>> initial_lr;                           // per group
  std::vector<ParamState> state;                                           // per parameter
};

void Optimizer::load_state_dict(const NamedTensors& sd) {
  Loading loading = sort_keys(sd);
  for (int64_t g = 0; g < num_param_groups(); ++g) read_group(g, loading);
  read_param_states(loading);
  commit(loading);
}

Optimizer::Loading Optimizer::sort_keys(const NamedTensors& sd) const {
  Loading loading;
  for (const auto& [key, t] : sd) {
    if (auto gk = split_key(key, "param_groups.")) {
      OCTO_CHECK_VALUE(loading.groups[gk->first].emplace(gk->second, t).second, name_,
                       ".load_state_dict: duplicate key '", key, "'");
    } else if (auto sk = split_key(key, "state.")) {
      OCTO_CHECK_VALUE(loading.states[sk->first].emplace(sk->second, t).second, name_,
                       ".load_state_dict: duplicate key '", key, "'");
    } else {
      OCTO_THROW(ValueError, name_, ".load_state_dict: unexpected key '", key,
                 "' (expected param_groups.<g>.<option> or state.<i>.<name>)");
    }
  }
  // Groups must be numbered 0 .. n-1 (keys are distinct and sorted, so the largest says it all;
  // no arithmetic on a saved index, which may be anything up to INT64_MAX).
  const auto& groups = loading.groups;
  OCTO_CHECK_VALUE(groups.empty() || groups.rbegin()->first == int64_t(groups.size()) - 1, name_,
                   ".load_state_dict: parameter group indices must be 0..", groups.size() - 1,
                   ", got a group numbered ", groups.empty() ? 0 : groups.rbegin()->first);
  OCTO_CHECK_VALUE(static_cast<int64_t>(groups.size()) == num_param_groups(), name_,
                   ".load_state_dict: loaded state dict has ", groups.size(),
                   " parameter groups, but the optimizer has ", num_param_groups());
  loading.options.resize(groups.size());
  loading.initial_lr.resize(groups.size());
  return loading;
}

void Optimizer::read_group(int64_t g, Loading& loading) const {
  Loading::Entries& entries = loading.groups[g];
  const std::string prefix = "param_groups." + std::to_string(g) + ".";
  auto it = entries.find("params");
  OCTO_CHECK_VALUE(it != entries.end(), name_, ".load_state_dict: missing key '", prefix,
                   "params'");
  const Tensor& ids_t = it->second;
  OCTO_CHECK_VALUE(ids_t.defined() && ids_t.dim() == 1, name_, ".load_state_dict: expected '",
                   prefix, "params' to be a 1-d tensor of parameter indices");
  const auto ids = ids_t.to(kCPU).to(kInt64).to_vector<int64_t>();
  const int64_t n = static_cast<int64_t>(group_params(g).size());
  OCTO_CHECK_VALUE(static_cast<int64_t>(ids.size()) == n, name_,
                   ".load_state_dict: loaded state dict has ", ids.size(), " parameters in group ",
                   g, ", but the optimizer's group has ", n,
                   " (a state dict for a different model?)");
  for (int64_t id : ids) {
    OCTO_CHECK_VALUE(loading.id_to_index.emplace(id, loading.next_index++).second, name_,
                     ".load_state_dict: parameter id ", id, " appears twice in '", prefix,
                     "params'");
  }
  entries.erase(it);
  for (const auto& r : option_refs(g)) {
    auto opt = entries.find(r.name);
    OCTO_CHECK_VALUE(opt != entries.end(), name_, ".load_state_dict: missing key '", prefix, r.name,
                     "' (a state dict of another optimizer?)");
    loading.options[static_cast<size_t>(g)].emplace_back(r,
                                                         read_scalar(prefix + r.name, opt->second));
    entries.erase(opt);
  }
  if (auto lr0 = entries.find("initial_lr"); lr0 != entries.end()) {
    loading.initial_lr[static_cast<size_t>(g)] = read_scalar(prefix + "initial_lr", lr0->second);
    entries.erase(lr0);
  }
  OCTO_CHECK_VALUE(entries.empty(), name_, ".load_state_dict: unexpected key '", prefix,
                   entries.empty() ? "" : entries.begin()->first, "'");
}

void Optimizer::read_param_states(Loading& loading) const {
  const std::vector<Tensor> params = parameters();
  loading.state.assign(params.size(), {});
  for (auto& [id, entries] : loading.states) {
    auto it = loading.id_to_index.find(id);
    OCTO_CHECK_VALUE(it != loading.id_to_index.end(), name_,
                     ".load_state_dict: state for parameter ", id,
                     ", which is in no parameter group of the state dict (the optimizer has ",
                     params.size(), " parameters)");
    const Tensor& p = params[static_cast<size_t>(it->second)];
    ParamState& state = loading.state[static_cast<size_t>(it->second)];
    // A 16-bit parameter's state is float32 beside a master copy (Note [Master weights]).
    const DType state_dtype =
        entries.count("master_weight") && p.dtype() != kFloat64 ? kFloat32 : p.dtype();
    for (auto& [key, t] : entries) {
      OCTO_CHECK_VALUE(t.defined(), name_, ".load_state_dict: 'state.", id, ".", key,
                       "' is an undefined tensor");
      if (key == "step") {
        const double step = read_scalar("state." + std::to_string(id) + ".step", t);
        OCTO_CHECK_VALUE(step >= 0 && step <= 9007199254740992.0 && step == std::floor(step), name_,
                         ".load_state_dict: 'state.", id, ".step' is ", step,
                         "; expected a whole number of steps in [0, 2^53]");
        state[key] = scalar_f64(step);
        continue;
      }
      OCTO_CHECK_VALUE(t.sizes() == p.sizes(), name_, ".load_state_dict: 'state.", id, ".", key,
                       "' has shape ", t.sizes(), " but parameter ", it->second, " has shape ",
                       p.sizes());
      OCTO_CHECK_VALUE(t.is_floating_point(), name_, ".load_state_dict: 'state.", id, ".", key,
                       "' holds ", t.dtype(), "; optimizer state is floating point");
      state[key] = t.to(p.device(), state_dtype).clone();
    }
  }
}

void Optimizer::commit(Loading& loading) {
  const int64_t num_groups = num_param_groups();
  std::vector<std::vector<double>> old_options(static_cast<size_t>(num_groups));
  for (int64_t g = 0; g < num_groups; ++g)
    for (auto& [r, v] : loading.options[static_cast<size_t>(g)]) {
      old_options[static_cast<size_t>(g)].push_back(r.get());
      r.set(v);
    }
  try {
    for (int64_t g = 0; g < num_groups; ++g) validate_group(g);
  } catch (...) {
    for (int64_t g = 0; g < num_groups; ++g) {
      size_t k = 0;
      for (auto& [r, v] : loading.options[static_cast<size_t>(g)])
        r.set(old_options[static_cast<size_t>(g)][k++]);
    }
    throw;
  }
  // As PyTorch's load_state_dict replaces the groups: a group saved without initial_lr has none.
  for (int64_t g = 0; g < num_groups; ++g)
    initial_lr_[static_cast<size_t>(g)] = loading.initial_lr[static_cast<size_t>(g)];
  state_ = std::move(loading.state);
  written_version_.assign(state_.size(), std::nullopt);  // loaded masters are checked against p
}

// Note [Master weights]: a bfloat16 parameter cannot take an update smaller than half its ulp
// (2^-8 of its value): lr * grad below that rounds away, and a long run of small steps is lost.
// With `master_weights` set in its group, the optimizer keeps a float32 copy of each 16-bit
// parameter as state ("master_weight"), applies the update there with the gradient widened to
// float32, and writes the result back to the parameter rounded once. Momentum and Adam's
// moments are then float32 too (they are made like the tensor they update). The forward and
// backward passes still read and write 16-bit tensors; only the optimizer is wide.
//
// The master copy is the truth only while the parameter holds its rounding. A parameter changed
// outside the optimizer (a module loaded from a checkpoint, a manual fill_) must win, so each
// step compares the parameter's version counter with the one finish_update left; when they
// differ (or after load_state_dict, which forgets them), the master is kept only if it still
// rounds to the parameter exactly, and is made again from the parameter otherwise.

namespace {
/// True when float32 `master` rounded to p's dtype is p, element for element (NaN never is).
bool rounds_to(const Tensor& master, const Tensor& p) {
  return sum(ne(master.to(p.dtype()), p).to(kFloat32)).item<float>() == 0.0f;
}
}  // namespace

Tensor Optimizer::update_target(int64_t index, const Tensor& p, bool master, Tensor* grad) {
  if (!master || !(p.dtype() == kBFloat16 || p.dtype() == kFloat16)) return p;
  ParamState& state = mutable_state(index);
  const std::optional<uint32_t>& written = written_version_[static_cast<size_t>(index)];
  auto it = state.find("master_weight");
  const bool keep =
      it != state.end() && ((written && *written == p.version()) || rounds_to(it->second, p));
  if (!keep) state["master_weight"] = p.detach().to(kFloat32).contiguous();
  *grad = grad->to(kFloat32);
  return state.at("master_weight");
}

void Optimizer::finish_update(int64_t index, const Tensor& p, const Tensor& target) {
  if (target.impl_ptr() == p.impl_ptr()) return;
  p.copy_(target);
  written_version_[static_cast<size_t>(index)] = p.version();
}

}  // namespace octo::optim
