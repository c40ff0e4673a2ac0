// The shared command-line flags of the training examples.
#include "common/cli.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <sstream>

namespace examples {

// CLI::PositiveNumber prints DBL_MAX's 309 digits as the range; say it in words.
static CLI::Validator positive_number() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        char* end = nullptr;
        double v = std::strtod(text.c_str(), &end);
        if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(v) || v <= 0)
          return "expected a positive number, got '" + text + "'";
        return "";
      },
      "POSITIVE");
}

void add_common_flags(CLI::App& app, TrainOptions& o) {
  app.add_option("--data", o.data, "Dataset directory");
  app.add_option("--device", o.device, "cpu, cpu:N, cuda or cuda:N")->capture_default_str();
  app.add_option("--devices", o.devices,
                 "Comma-separated devices for data parallelism, e.g. cpu:0,cpu:1");
  app.add_option("--epochs", o.epochs, "Epochs to train (in total, also when resuming)")
      ->check(CLI::Range(int64_t{1}, int64_t{100000}))
      ->capture_default_str();
  app.add_option("--batch-size", o.batch_size, "Examples per batch")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->capture_default_str();
  app.add_option("--lr", o.lr, "Learning rate (peak learning rate for one-cycle schedules)")
      ->check(positive_number());
  app.add_option("--seed", o.seed, "Seed for initialisation, shuffling and augmentation")
      ->capture_default_str();
  app.add_option("--save", o.save, "Write a training checkpoint here after each epoch");
  app.add_option("--resume", o.resume, "Continue from this training checkpoint")
      ->check(CLI::ExistingFile);
  app.add_option("--threads", o.threads, "CPU threads for the kernels (0: all cores)")
      ->check(CLI::Range(0, 4096));
  app.add_option("--limit", o.limit, "Use only the first N training and test examples")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--csv", o.csv, "Append per-epoch metrics to this CSV file");
  app.add_option("--plot", o.plot, "Write loss and accuracy curves to this SVG file");
  app.add_option("--workers", o.workers, "DataLoader worker threads")
      ->check(CLI::Range(0, 64))
      ->capture_default_str();
  app.add_option("--stop-after", o.stop_after,
                 "Stop after this epoch, as if interrupted (the schedule still spans --epochs)")
      ->check(CLI::NonNegativeNumber);
  app.add_flag(
      "--detect-anomaly", o.detect_anomaly,
      "Check every op's output and gradient for NaN/Inf and name the first op that makes one (slow; for debugging)");
  app.add_flag(
      "--distributed", o.distributed,
      "One process per device, started by mpirun or srun: DistributedDataParallel over MPI (cpu) or NCCL (--device cuda); --batch-size is per process");
  app.add_option(
         "--amp", o.amp,
         "Mixed precision: off, bf16 or fp16 (octo::autocast: convolutions and linear layers in 16 bits, the loss in float32; fp16 adds a GradScaler)")
      ->check(CLI::IsMember({"off", "bf16", "fp16"}))
      ->capture_default_str();
}

std::optional<octo::DType> amp_dtype(const TrainOptions& o) {
  if (o.amp == "bf16") return octo::kBFloat16;
  if (o.amp == "fp16") return octo::kFloat16;
  return std::nullopt;
}

static octo::Device parse_device(const std::string& spec, const std::string& flag) {
  try {
    octo::Device d(spec);
    if (d.is_cuda() &&
        (octo::cuda::device_count() == 0 || d.index() >= octo::cuda::device_count())) {
      throw CLI::ValidationError(flag, "device " + spec + " is not available (" +
                                           std::to_string(octo::cuda::device_count()) +
                                           " CUDA devices visible)");
    }
    return d;
  } catch (const octo::Error& e) {
    throw CLI::ValidationError(flag, "bad device '" + spec + "': " + e.msg());
  }
}

// --save: the folder must exist and be writable, and the target (if it exists) a regular file,
// checked before training starts rather than after the first epoch.
static void check_save_target(const std::string& path) {
  namespace fs = std::filesystem;
  if (path.empty()) return;
  fs::path p(path);
  fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw CLI::ValidationError("--save", "folder '" + dir.string() + "' does not exist");
  if (::access(dir.c_str(), W_OK) != 0)
    throw CLI::ValidationError("--save", "folder '" + dir.string() + "' is not writable");
  if (fs::exists(p, ec) && !fs::is_regular_file(p, ec))
    throw CLI::ValidationError("--save", "'" + path + "' exists and is not a regular file");
}

std::vector<octo::Device> resolve_devices(const TrainOptions& o) {
  std::vector<octo::Device> out;
  if (o.distributed) {
    if (!o.devices.empty())
      throw CLI::ValidationError(
          "--devices",
          "cannot be combined with --distributed (each process uses one device; start one process per device)");
    check_save_target(o.save);
    octo::Device wanted = parse_device(o.device, "--device");
    namespace dist = octo::distributed;
    if (!dist::is_available())
      throw CLI::ValidationError("--distributed", "octo was built without MPI");
    dist::init_process_group({.backend = wanted.is_cuda() ? "nccl" : "mpi"});
    // Each process gets its share of the cores unless --threads or OMP_NUM_THREADS says otherwise.
    if (o.threads == 0 && std::getenv("OMP_NUM_THREADS") == nullptr)
      octo::set_num_threads(
          std::max(1, octo::hardware_concurrency() / dist::rank_info().local_size));
    out.push_back(dist::default_group()->device());
    return out;
  }
  check_save_target(o.save);
  if (o.devices.empty()) {
    out.push_back(parse_device(o.device, "--device"));
  } else {
    std::stringstream ss(o.devices);
    std::string item;
    while (std::getline(ss, item, ',')) {
      if (item.empty())
        throw CLI::ValidationError("--devices", "empty entry in '" + o.devices + "'");
      octo::Device d = parse_device(item, "--devices");
      if (std::find(out.begin(), out.end(), d) != out.end())
        throw CLI::ValidationError("--devices",
                                   "device " + d.str() + " is listed twice in '" + o.devices + "'");
      out.push_back(d);
    }
  }
  return out;
}

int exit_for(const CLI::App& app, const CLI::ParseError& e) {
  int code = app.exit(e);
  return code == 0 ? 0 : 2;
}

}  // namespace examples
