// Trains an MLP or a LeNet-style CNN on MNIST / Fashion-MNIST, on one device or data-parallel.
//
//   build/examples/mnist/mnist --model cnn --epochs 3
//   build/examples/mnist/mnist --model mlp --devices cpu:0,cpu:1 --save ckpt.safetensors
#include <filesystem>
#include <iostream>

#include <octo/octo.h>
#include <CLI/CLI.hpp>

#include "common/cli.h"
#include "common/train.h"
#include "mnist/models.h"

namespace nn = octo::nn;
using examples::LeNet;
using examples::Mlp;

static bool has_mnist(const std::string& dir) {
  namespace fs = std::filesystem;
  return fs::exists(dir + "/train-images-idx3-ubyte") ||
         fs::exists(dir + "/train-images-idx3-ubyte.gz");
}

int main(int argc, char** argv) {
  CLI::App app{"Train an MLP or a LeNet-style CNN on MNIST or Fashion-MNIST."};
  examples::TrainOptions opts;
  opts.model = "cnn";
  bool no_batchnorm = false;
  app.add_option("--model", opts.model, "mlp or cnn")
      ->check(CLI::IsMember({"mlp", "cnn"}))
      ->capture_default_str();
  app.add_option("--width", opts.width,
                 "CNN channel multiplier: 6 and 16 channels times this (default 2)")
      ->check(CLI::Range(int64_t{1}, int64_t{64}));
  app.add_flag("--no-batchnorm", no_batchnorm, "CNN without BatchNorm");
  examples::add_common_flags(app, opts);
  std::vector<octo::Device> devices;
  try {
    app.parse(argc, argv);
    devices = examples::resolve_devices(opts);
  } catch (const CLI::ParseError& e) {
    return examples::exit_for(app, e);
  }

  return examples::guarded_main([&] {
    if (opts.data.empty()) {
      for (const char* dir : {"data/mnist", "/usr/share/datasets/fashion-mnist"})
        if (has_mnist(dir)) {
          opts.data = dir;
          break;
        }
      if (opts.data.empty()) {
        std::cerr
            << "error: no MNIST data found in data/mnist or /usr/share/datasets/fashion-mnist.\n"
               "Get it with tools/get_data.sh (downloads MNIST into data/mnist), or\n"
               "`sudo apt install dataset-fashion-mnist` (Debian/Ubuntu), or pass --data DIR.\n";
        return 1;
      }
    }
    if (opts.threads > 0) octo::set_num_threads(opts.threads);
    if (opts.width == 0) opts.width = 2;  // 12 and 32 channels: >= 90% on Fashion-MNIST in 3 epochs
    if (opts.lr == 0) opts.lr = opts.model == "cnn" ? 0.2 : 0.05;
    octo::manual_seed(opts.seed);

    octo::data::MNIST train_full(opts.data, true), test_full(opts.data, false);
    if (examples::is_main_rank()) std::cout << "data: " << train_full.images_path() << "\n";
    auto train_set = examples::take(train_full, opts.limit);
    auto test_set = examples::take(test_full, opts.limit);
    auto to_input = [](octo::data::Example b, octo::Generator&) {
      b.data = octo::data::normalize(b.data, {0.5}, {0.5});  // uint8 -> float32, one pass
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
                                         .transform = to_input},
                                        examples::train_sampler(opts));
    octo::data::DataLoader test_loader(test_set, {.batch_size = 1000,
                                                  .num_workers = opts.workers,
                                                  .pin_memory = pin,
                                                  .seed = opts.seed,
                                                  .transform = to_input});

    std::shared_ptr<nn::Module> model;
    if (opts.model == "mlp")
      model = std::make_shared<Mlp>();
    else
      model = std::make_shared<LeNet>(opts.width, !no_batchnorm);
    model->to(devices[0]);
    octo::optim::SGD opt(model->parameters(),
                         {.lr = opts.lr, .momentum = 0.9, .weight_decay = 5e-4, .nesterov = true});
    // At least 8 steps, so the warm-up phase is never empty on tiny test runs.
    int64_t steps = std::max<int64_t>(opts.epochs * int64_t(train_loader.size()), 8);
    octo::optim::OneCycleLR sched(opt, opts.lr, steps, {.pct_start = 0.25});

    examples::TrainSetup setup{.name = "mnist-" + opts.model,
                               .model = model,
                               .devices = devices,
                               .optimizer = &opt,
                               .scheduler = &sched,
                               .train_loader = &train_loader,
                               .test_loader = &test_loader,
                               .loss_options = {}};
    return examples::train(opts, setup);
  });
}
