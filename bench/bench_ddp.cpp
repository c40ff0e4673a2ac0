// DistributedDataParallel throughput: the MNIST example's CNN trained on fixed random batches.
//
//   mpirun -np 2 build/bench/bench_ddp                      # DDP, each rank one thread
//   build/bench/bench_ddp --data-parallel cpu:0,cpu:1       # one process, DataParallel
//   tools/bench_ddp.sh                                      # both, 1 and 2 ranks, and PyTorch
//
// Every configuration runs the same step as tools/bench_torch_ddp.py: LeNet width 2 with
// BatchNorm, cross-entropy, backward, SGD (lr 0.01, momentum 0.9, weight decay 5e-4, Nesterov) on
// batch B per rank (per device for DataParallel), W warm-up steps, then S timed steps between two
// barriers. Rank 0 prints one markdown row; --json FILE also writes it as JSON.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <octo/octo.h>

#include "examples/mnist/models.h"

namespace dist = octo::distributed;
namespace F = octo::nn::functional;
using octo::Tensor;

namespace {

struct Args {
  int64_t batch = 128, warmup = 5, steps = 30;
  double max_seconds = 60;
  std::string data_parallel, json;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(
      stderr,
      "bench_ddp: %s\nusage: bench_ddp [--batch B] [--warmup W] [--steps S] [--max-seconds T] [--data-parallel cpu:0,cpu:1] [--json FILE]\n",
      why.c_str());
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    if (i + 1 >= argc) usage("missing value after " + k);
    std::string v = argv[++i];
    auto number = [&](double lo) {
      char* end = nullptr;
      double x = std::strtod(v.c_str(), &end);
      if (end == v.c_str() || *end != '\0' || !(x >= lo)) usage("bad value for " + k + ": " + v);
      return x;
    };
    if (k == "--batch")
      a.batch = static_cast<int64_t>(number(1));
    else if (k == "--warmup")
      a.warmup = static_cast<int64_t>(number(0));
    else if (k == "--steps")
      a.steps = static_cast<int64_t>(number(1));
    else if (k == "--max-seconds")
      a.max_seconds = number(0.1);
    else if (k == "--data-parallel")
      a.data_parallel = v;
    else if (k == "--json")
      a.json = v;
    else
      usage("unknown flag " + k);
  }
  return a;
}

std::vector<octo::Device> parse_devices(const std::string& list) {
  std::vector<octo::Device> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    std::string item = list.substr(start, comma == std::string::npos ? comma : comma - start);
    out.emplace_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  Args a = parse(argc, argv);
  const bool distributed = a.data_parallel.empty();
  std::vector<octo::Device> devices{octo::kCPU};
  int ranks = 1;
  if (distributed) {
    octo::set_num_threads(1);
    dist::init_process_group({.backend = "mpi"});
    ranks = dist::get_world_size();
  } else {
    devices = parse_devices(a.data_parallel);
  }
  const bool main_rank = !distributed || dist::get_rank() == 0;
  const int64_t per_step = a.batch * (distributed ? ranks : static_cast<int64_t>(devices.size()));

  octo::manual_seed(0);
  auto model = std::make_shared<examples::LeNet>(2, true);
  model->to(devices[0]);
  std::shared_ptr<octo::nn::Module> fwd;
  if (distributed)
    fwd = std::make_shared<dist::DistributedDataParallel>(model);
  else
    fwd = std::make_shared<octo::parallel::DataParallel>(model, devices);
  octo::optim::SGD opt(model->parameters(),
                       {.lr = 0.01, .momentum = 0.9, .weight_decay = 5e-4, .nesterov = true});
  // This rank's batch (DataParallel: the whole batch, split across the devices).
  octo::manual_seed(1 + (distributed ? dist::get_rank() : 0));
  int64_t local = distributed ? a.batch : per_step;
  Tensor x = octo::randn({local, 1, 28, 28}).to(devices[0]);
  Tensor y = octo::randint(0, 10, {local}).to(devices[0]);
  auto step = [&] {
    opt.zero_grad();
    F::cross_entropy(fwd->forward(x), y).backward();
    opt.step();
  };
  auto barrier = [&] {
    if (distributed) dist::default_group()->barrier()->wait();
  };
  for (int64_t i = 0; i < a.warmup; ++i) step();
  barrier();
  auto t0 = std::chrono::steady_clock::now();
  int64_t done = 0;
  while (done < a.steps) {
    step();
    ++done;
    // Every rank must run the same number of steps: stop on rank 0's clock, agreed by all
    // every fifth step (a broadcast of one number).
    if (done % 5 != 0) continue;
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double stop = elapsed > a.max_seconds ? 1.0 : 0.0;
    if (distributed) {
      Tensor flag = octo::full({1}, stop);
      dist::default_group()->broadcast(flag, 0)->wait();
      stop = flag.item<float>();
    }
    if (stop > 0) break;
  }
  barrier();
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  double rate = static_cast<double>(per_step * done) / secs;
  if (main_rank) {
    std::string what = distributed ? "octo DDP (mpi)" : "octo DataParallel";
    std::string config =
        distributed
            ? std::to_string(ranks) + (ranks == 1 ? " rank" : " ranks") + " x 1 thread"
            : a.data_parallel + ", " + std::to_string(octo::get_num_threads()) + " threads in all";
    std::printf("| %s | %s | batch %lld/%s | %.1f |\n", what.c_str(), config.c_str(),
                static_cast<long long>(a.batch), distributed ? "rank" : "device", rate);
    if (!a.json.empty()) {
      FILE* f = std::fopen(a.json.c_str(), "w");
      if (f) {
        std::fprintf(
            f,
            "{\"framework\":\"octo\",\"mode\":\"%s\",\"ranks\":%d,\"devices\":\"%s\",\"batch_per_rank\":%lld,\"steps\":%lld,\"seconds\":%.6f,\"samples_per_s\":%.3f}\n",
            distributed ? "ddp" : "data_parallel", ranks, a.data_parallel.c_str(),
            static_cast<long long>(a.batch), static_cast<long long>(done), secs, rate);
        std::fclose(f);
      }
    }
  }
  fwd.reset();
  if (distributed) dist::destroy_process_group();
  return 0;
}
