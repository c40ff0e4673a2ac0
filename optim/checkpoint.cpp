// Checkpoints over safetensors: module weights, and full training state (model, optimizer,
// scheduler, loss scaler, epoch, random generators).
#include "optim/checkpoint.h"

#include <charconv>
#include <functional>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "core/random.h"
#include "tensor/factories.h"
#include "tensor/safetensors.h"

namespace octo {

namespace {

constexpr const char* kEpochKey = "octo.epoch";
constexpr int64_t kMaxEpoch = int64_t{1} << 40;  // far beyond any run, far below overflow

/// Splits "prefix.rest" entries of a loaded file by prefix.
nn::NamedTensors with_prefix(const std::vector<std::pair<std::string, Tensor>>& all,
                             const std::string& prefix) {
  nn::NamedTensors out;
  for (const auto& [name, t] : all)
    if (name.rfind(prefix, 0) == 0) out.emplace_back(name.substr(prefix.size()), t);
  return out;
}

/// Every device generator as "cpu:0" -> int64 [seed, offset].
nn::NamedTensors rng_state_dict() {
  nn::NamedTensors out;
  for (const auto& [device, s] : get_rng_states()) {
    std::vector<int64_t> v{static_cast<int64_t>(s.seed), static_cast<int64_t>(s.offset)};
    out.emplace_back(device.str(), from_vector(v, {2}));
  }
  return out;
}

/// Validates every "rng.*" entry and resolves its device's generator (an unknown or unavailable
/// device throws here), and returns what to set; setting it cannot fail.
std::vector<std::pair<Generator*, GeneratorState>> read_rng_state_dict(
    const nn::NamedTensors& state) {
  std::vector<std::pair<Generator*, GeneratorState>> states;
  for (const auto& [name, t] : state) {
    OCTO_CHECK_IO(t.dtype() == kInt64 && t.numel() == 2, "checkpoint: rng entry '", name,
                  "' must hold two int64 values (seed, offset), got ", t.dtype(), " ", t.sizes());
    auto v = t.to_vector<int64_t>();
    states.emplace_back(&default_generator(Device(name)),
                        GeneratorState{static_cast<uint64_t>(v[0]), static_cast<uint64_t>(v[1])});
  }
  return states;
}

}  // namespace

void save(const nn::Module& module, const std::string& path) {
  save_safetensors(module.state_dict(), path, {{"format", "pt"}});
}

void load(nn::Module& module, const std::string& path, bool strict) {
  SafetensorsFile file = load_safetensors(path);
  module.load_state_dict(file.tensors, strict);
}

void save_checkpoint(const TrainingState& state, const std::string& path) {
  OCTO_CHECK_VALUE(state.model != nullptr, "save_checkpoint: TrainingState.model is null");
  std::vector<std::pair<std::string, Tensor>> all;
  auto add = [&](const std::string& prefix, const nn::NamedTensors& entries) {
    for (const auto& [name, t] : entries) all.emplace_back(prefix + name, t);
  };
  add("model.", state.model->state_dict());
  if (state.optimizer) add("optimizer.", state.optimizer->state_dict());
  if (state.scheduler) add("scheduler.", state.scheduler->state_dict());
  if (state.scaler) add("scaler.", state.scaler->state_dict());
  add("rng.", rng_state_dict());
  auto metadata = state.metadata;
  metadata[kEpochKey] = std::to_string(state.epoch);
  save_safetensors(all, path, metadata);
}

void load_checkpoint(TrainingState& state, const std::string& path) {
  OCTO_CHECK_VALUE(state.model != nullptr, "load_checkpoint: TrainingState.model is null");
  SafetensorsFile file = load_safetensors(path);
  auto epoch = file.metadata.find(kEpochKey);
  OCTO_CHECK_IO(epoch != file.metadata.end(), "'", path,
                "' is not an octo training checkpoint (no ", kEpochKey,
                " in its metadata); use octo::load() for plain weights");
  // The epoch first, fully parsed and in range, before anything is restored.
  int64_t parsed = -1;
  const std::string& text = epoch->second;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), parsed);
  OCTO_CHECK_IO(
      ec == std::errc() && end == text.data() + text.size() && parsed >= 0 && parsed <= kMaxEpoch,
      "'", path, "': bad epoch '", text, "' in metadata (", kEpochKey,
      " must be a whole number in [0, ", kMaxEpoch, "])");
  // Note [All-or-nothing restore]: each part's load_state_dict checks everything before it
  // changes anything, so a refused part has changed nothing itself; the parts restored before it
  // are put back from snapshots. The model goes last, since a snapshot of it would be a copy of
  // every weight: the other parts' snapshots are their state_dict()s, whose tensors their loads
  // replace rather than write into, so they cost no copy. The generators are resolved (the check
  // that can fail) first and set (which cannot) at the end.
  const auto rng = read_rng_state_dict(with_prefix(file.tensors, "rng."));
  std::vector<std::function<void()>> undo;
  // Snapshots `part`, then loads its entries of the file.
  auto restore = [&](auto* part, const nn::NamedTensors& entries) {
    undo.push_back([part, sd = part->state_dict()] { part->load_state_dict(sd); });
    part->load_state_dict(entries);
  };
  try {
    if (state.optimizer) restore(state.optimizer, with_prefix(file.tensors, "optimizer."));
    if (state.scheduler) restore(state.scheduler, with_prefix(file.tensors, "scheduler."));
    if (state.scaler && state.scaler->is_enabled()) {
      const nn::NamedTensors scaler = with_prefix(file.tensors, "scaler.");
      OCTO_CHECK_VALUE(!scaler.empty(), "'", path,
                       "' holds no GradScaler state (it was saved without an enabled one); set "
                       "TrainingState.scaler to nullptr to keep the scaler's current scale");
      restore(state.scaler, scaler);
    }
    state.model->load_state_dict(with_prefix(file.tensors, "model."));
  } catch (...) {
    for (auto it = undo.rbegin(); it != undo.rend(); ++it) (*it)();
    throw;
  }
  for (const auto& [generator, s] : rng) generator->set_state(s);
  state.epoch = parsed;
  state.metadata = file.metadata;
  state.metadata.erase(kEpochKey);
}

}  // namespace octo
