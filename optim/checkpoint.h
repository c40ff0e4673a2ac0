// Checkpoints: a module's weights, or a whole training state, in one safetensors file.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "nn/module.h"
#include "optim/grad_scaler.h"
#include "optim/lr_scheduler.h"
#include "optim/optimizer.h"

namespace octo {

/// Writes module->state_dict() to `path` as safetensors (atomically: a crash never destroys the
/// previous file). Keys are PyTorch's state_dict keys, so `safetensors.torch.load_file` reads it
/// into a PyTorch model of the same structure.
void save(const nn::Module& module, const std::string& path);
/// Loads a file written by save() (or by PyTorch's safetensors) into `module`, onto the devices
/// its parameters already live on. strict: missing, unexpected and mis-shaped keys are reported
/// together by name.
void load(nn::Module& module, const std::string& path, bool strict = true);

/// Everything needed to resume training exactly where it stopped.
struct TrainingState {
  nn::Module* model = nullptr;
  optim::Optimizer* optimizer = nullptr;        // optional
  optim::LRScheduler* scheduler = nullptr;      // optional
  int64_t epoch = 0;                            // epochs completed
  std::map<std::string, std::string> metadata;  // free-form (command line, accuracy, ...)
  GradScaler* scaler = nullptr;  // optional (last, so that older brace-initialisations still
                                 // compile); a disabled one saves nothing
};

/// One safetensors file with keys "model.*", "optimizer.*", "scheduler.*", "scaler.*" and "rng.*"
/// (every device generator's seed and offset), and the epoch in __metadata__.
void save_checkpoint(const TrainingState& state, const std::string& path);
/// Restores model, optimizer, scheduler, scaler and generators; sets state.epoch and
/// state.metadata. All or nothing: when any part of the file is refused (IOError, ValueError
/// naming the key), none of them has changed (Note [All-or-nothing restore]).
void load_checkpoint(TrainingState& state, const std::string& path);

}  // namespace octo
