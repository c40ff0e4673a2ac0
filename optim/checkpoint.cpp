// Checkpoints over safetensors: module weights, and full training state (model, optimizer,
// scheduler, epoch, random generators).
#include "optim/checkpoint.h"

#include <charconv>

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

void load_rng_state_dict(const nn::NamedTensors& state) {
  std::vector<std::pair<Device, GeneratorState>> states;
  for (const auto& [name, t] : state) {
    OCTO_CHECK_IO(t.dtype() == kInt64 && t.numel() == 2, "checkpoint: rng entry '", name,
                  "' must hold two int64 values (seed, offset), got ", t.dtype(), " ", t.sizes());
    auto v = t.to_vector<int64_t>();
    states.emplace_back(Device(name),
                        GeneratorState{static_cast<uint64_t>(v[0]), static_cast<uint64_t>(v[1])});
  }
  set_rng_states(states);
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
  state.model->load_state_dict(with_prefix(file.tensors, "model."));
  if (state.optimizer) state.optimizer->load_state_dict(with_prefix(file.tensors, "optimizer."));
  if (state.scheduler) state.scheduler->load_state_dict(with_prefix(file.tensors, "scheduler."));
  load_rng_state_dict(with_prefix(file.tensors, "rng."));
  state.epoch = parsed;
  state.metadata = file.metadata;
  state.metadata.erase(kEpochKey);
}

}  // namespace octo
