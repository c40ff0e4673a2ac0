// The command-line flags shared by the training examples, and turning them into devices.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <octo/octo.h>
#include <CLI/CLI.hpp>

namespace examples {

struct TrainOptions {
  std::string model;
  std::string data;
  std::string device = "cpu";
  std::string devices;  // comma-separated; more than one -> DataParallel
  int64_t epochs = 3;
  int64_t batch_size = 128;
  double lr = 0.0;  // 0: the example's default
  uint64_t seed = 0;
  std::string save, resume, csv, plot;
  int threads = 0;         // 0: all cores
  int64_t limit = 0;       // 0: every example
  size_t workers = 0;      // 0: batches are prepared on the training thread (PyTorch's default)
  int64_t width = 0;       // 0: the example's default
  int64_t stop_after = 0;  // 0: run to --epochs
  bool detect_anomaly = false;  // octo::DetectAnomalyGuard for the whole run: names a NaN's op
  bool distributed = false;     // one process per device: DistributedDataParallel (mpirun / srun)
  std::string amp = "off";      // off, bf16 or fp16: octo::autocast (and a GradScaler for fp16)
};

/// --amp's dtype: none for "off".
std::optional<octo::DType> amp_dtype(const TrainOptions& opts);

/// Adds --data --device --devices --epochs --batch-size --lr --seed --save --resume --threads
/// --limit --csv --plot --workers --stop-after --distributed --detect-anomaly --amp to `app`.
void add_common_flags(CLI::App& app, TrainOptions& opts);

/// The devices to train on: --devices when given, else --device. Throws CLI::ValidationError
/// (exit code 2 through app.exit) for a malformed or unavailable device. With --distributed it
/// also starts the process group and returns this rank's device: cpu, or cuda:<local rank> when
/// --device names a CUDA device; --devices is then a usage error.
std::vector<octo::Device> resolve_devices(const TrainOptions& opts);

/// Prints CLI11's message for `e` (help, or the error and a hint) and returns the exit code:
/// 0 for --help, 2 for any usage error (as getopt-style tools do).
int exit_for(const CLI::App& app, const CLI::ParseError& e);

}  // namespace examples
