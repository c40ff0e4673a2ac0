// The training loop shared by the examples: epochs of SGD steps with a progress bar, test
// accuracy after each epoch, checkpoints (--save / --resume), CSV metrics and an SVG plot.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <octo/octo.h>

#include "common/cli.h"

namespace examples {

struct TrainSetup {
  std::string name;                         // printed, and the plot's title
  std::shared_ptr<octo::nn::Module> model;  // already on devices[0]; must be Cloneable for >1
  std::vector<octo::Device> devices;
  octo::optim::Optimizer* optimizer = nullptr;
  octo::optim::LRScheduler* scheduler = nullptr;   // optional; stepped after every batch
  octo::data::DataLoader* train_loader = nullptr;  // seeded with --seed, shuffled
  octo::data::DataLoader* test_loader = nullptr;
  octo::nn::functional::CrossEntropyOptions loss_options;
};

/// The first `limit` examples of `ds` (all of them when limit is 0 or >= its size).
std::shared_ptr<octo::data::TensorDataset> take(const octo::data::TensorDataset& ds, int64_t limit);

/// False on ranks other than 0 of a distributed run: they train silently.
bool is_main_rank();

/// The training loader's sampler: a DistributedSampler sharding the data over the ranks with
/// --distributed (seeded with --seed, reshuffled each epoch), else null (the loader's own).
std::shared_ptr<octo::data::Sampler> train_sampler(const TrainOptions& opts);

/// Runs (or resumes) training as the options say. Returns the process exit code.
int train(const TrainOptions& opts, TrainSetup& setup);

/// Runs `body` and turns octo and I/O errors into a message on stderr and exit code 1.
int guarded_main(const std::function<int()>& body);

}  // namespace examples
