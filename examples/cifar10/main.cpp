// Trains a small ResNet-9-style network on CIFAR-10 (binary version) with augmentation, label
// smoothing, SGD with Nesterov momentum and a one-cycle learning rate.
//
//   build/examples/cifar10/cifar10 --data data/cifar-10-batches-bin --epochs 10 --width 32
#include <iostream>

#include <octo/octo.h>
#include <CLI/CLI.hpp>

#include "cifar10/models.h"
#include "common/cli.h"
#include "common/train.h"

namespace nn = octo::nn;
using examples::ResNet9;
using octo::Tensor;

int main(int argc, char** argv) {
  CLI::App app{"Train a ResNet-9-style network on CIFAR-10 (binary version)."};
  examples::TrainOptions opts;
  opts.model = "resnet9";
  opts.data = "data/cifar-10-batches-bin";
  opts.batch_size = 256;
  opts.width = 16;
  double label_smoothing = 0.2, weight_decay = 5e-4;
  app.add_option("--model", opts.model, "resnet9 (the only one)")
      ->check(CLI::IsMember({"resnet9"}))
      ->capture_default_str();
  app.add_option("--width", opts.width, "Channels of the first layer (64 in the original)")
      ->check(CLI::Range(int64_t{1}, int64_t{512}))
      ->capture_default_str();
  app.add_option("--label-smoothing", label_smoothing)
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--weight-decay", weight_decay)
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  examples::add_common_flags(app, opts);
  std::vector<octo::Device> devices;
  try {
    app.parse(argc, argv);
    devices = examples::resolve_devices(opts);
  } catch (const CLI::ParseError& e) {
    return examples::exit_for(app, e);
  }

  return examples::guarded_main([&] {
    if (opts.threads > 0) octo::set_num_threads(opts.threads);
    if (opts.lr == 0) opts.lr = 0.2;
    octo::manual_seed(opts.seed);
    octo::data::CIFAR10 train_full(opts.data, true), test_full(opts.data, false);
    auto train_set = examples::take(train_full, opts.limit);
    auto test_set = examples::take(test_full, opts.limit);
    const std::vector<double> mean{0.4914, 0.4822, 0.4465}, stdev{0.2470, 0.2435, 0.2616};
    auto augment = [&](octo::data::Example b, octo::Generator& gen) {
      Tensor x = octo::data::random_crop(b.data, 32, 4, gen);
      x = octo::data::random_horizontal_flip(x, 0.5, gen);
      b.data = octo::data::normalize(x, mean, stdev);  // uint8 -> float32, one pass
      return b;
    };
    auto plain = [&](octo::data::Example b, octo::Generator&) {
      b.data = octo::data::normalize(b.data, mean, stdev);
      return b;
    };
    // Pinned batches make the upload to a GPU asynchronous (no effect on CPU devices).
    const bool pin = devices[0].is_cuda();
    octo::data::DataLoader train_loader(train_set,
                                        {.batch_size = size_t(opts.batch_size),
                                         .shuffle = !opts.distributed,  // else the sampler shuffles
                                         .num_workers = opts.workers,
                                         .pin_memory = pin,
                                         .seed = opts.seed,
                                         .transform = augment},
                                        examples::train_sampler(opts));
    octo::data::DataLoader test_loader(test_set, {.batch_size = 500,
                                                  .num_workers = opts.workers,
                                                  .pin_memory = pin,
                                                  .seed = opts.seed,
                                                  .transform = plain});

    auto model = std::make_shared<ResNet9>(opts.width);
    model->to(devices[0]);
    octo::optim::SGD opt(
        model->parameters(),
        {.lr = opts.lr, .momentum = 0.9, .weight_decay = weight_decay, .nesterov = true});
    // At least 8 steps, so the warm-up phase is never empty on tiny test runs.
    int64_t steps = std::max<int64_t>(opts.epochs * int64_t(train_loader.size()), 8);
    octo::optim::OneCycleLR sched(
        opt, opts.lr, steps,
        {.pct_start = 0.25, .anneal_strategy = octo::optim::AnnealStrategy::Linear});
    examples::TrainSetup setup{.name = "cifar10-resnet9",
                               .model = model,
                               .devices = devices,
                               .optimizer = &opt,
                               .scheduler = &sched,
                               .train_loader = &train_loader,
                               .test_loader = &test_loader,
                               .loss_options = {.label_smoothing = label_smoothing}};
    return examples::train(opts, setup);
  });
}
