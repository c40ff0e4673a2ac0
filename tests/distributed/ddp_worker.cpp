// One rank of the distributed tests, started by run_mpi.py under mpirun: `ddp_worker SCENARIO`.
// Each scenario checks itself on every rank, prints "ok: ..." lines and exits 0, or prints
// "FAIL: ..." and exits 1. Equivalence scenarios compare DDP over N ranks (per-rank batch B)
// with this same process training a copy of the model on the whole batch of N*B.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <thread>

#include <octo/octo.h>

#include "../examples/example_helpers.h"
#include "../parallel/models.h"

namespace dist = octo::distributed;
namespace F = octo::nn::functional;
namespace nn = octo::nn;
using octo::Tensor;

namespace {

int rank() { return dist::get_rank(); }
int world() { return dist::get_world_size(); }

[[noreturn]] void fail(const std::string& what) {
  std::printf("FAIL: rank %d: %s\n", rank(), what.c_str());
  std::fflush(stdout);
  dist::abort_job(1);
}

void expect(bool cond, const std::string& what) {
  if (!cond) fail(what);
}

void ok(const std::string& what) {
  std::printf("ok: rank %d: %s\n", rank(), what.c_str());
  std::fflush(stdout);
}

/// max |a - b| / max(max |b|, tiny): a relative error over the whole tensor.
double rel_err(const Tensor& a, const Tensor& b) {
  Tensor da = a.to(octo::kFloat64).to(octo::kCPU), db = b.to(octo::kFloat64).to(octo::kCPU);
  double diff = (da - db).abs().max().item<double>();
  double scale = db.abs().max().item<double>();
  return diff / std::max(scale, 1e-30);
}

/// An MLP with two hidden layers: six parameters, so small bucket caps give several buckets.
struct Net : nn::Cloneable<Net> {
  explicit Net(bool with_unused = false) : Cloneable("Net"), with_unused(with_unused) { reset(); }
  void reset() override {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(12, 32));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(32, 16));
    fc3 = register_module("fc3", std::make_shared<nn::Linear>(16, 4));
    if (with_unused) unused = register_module("unused", std::make_shared<nn::Linear>(4, 4));
  }
  Tensor forward(const Tensor& x) override {
    return fc3->forward(octo::tanh(fc2->forward(octo::relu(fc1->forward(x)))));
  }
  bool with_unused;
  std::shared_ptr<nn::Linear> fc1, fc2, fc3, unused;
};

/// The same global batch on every rank (seeded), and this rank's rows of it.
struct Batch {
  Tensor x, y, mine_x, mine_y;
};
Batch make_batch(int64_t per_rank, uint64_t seed) {
  octo::manual_seed(seed);
  Batch b;
  int64_t n = per_rank * world();
  b.x = octo::randn({n, 12});
  b.y = octo::randint(0, 4, {n});
  b.mine_x = b.x.narrow(0, rank() * per_rank, per_rank).contiguous();
  b.mine_y = b.y.narrow(0, rank() * per_rank, per_rank).contiguous();
  return b;
}

/// Trains DDP and a single-process reference side by side; returns the final DDP weights.
std::vector<Tensor> train_both(double bucket_mb, const std::string& optimizer, int steps,
                               double tol) {
  octo::manual_seed(7);
  auto model = std::make_shared<Net>();
  auto reference = std::static_pointer_cast<Net>(model->clone());
  dist::DistributedDataParallel ddp(model, {.bucket_cap_mb = bucket_mb});
  std::unique_ptr<octo::optim::Optimizer> opt, ref_opt;
  if (optimizer == "sgd") {
    opt = std::make_unique<octo::optim::SGD>(model->parameters(),
                                             octo::optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
    ref_opt = std::make_unique<octo::optim::SGD>(
        reference->parameters(), octo::optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
  } else {
    opt = std::make_unique<octo::optim::Adam>(model->parameters(),
                                              octo::optim::AdamOptions{.lr = 1e-2});
    ref_opt = std::make_unique<octo::optim::Adam>(reference->parameters(),
                                                  octo::optim::AdamOptions{.lr = 1e-2});
  }
  for (int step = 0; step < steps; ++step) {
    Batch b = make_batch(8, 100 + static_cast<uint64_t>(step));
    opt->zero_grad();
    F::cross_entropy(ddp.forward(b.mine_x), b.mine_y).backward();
    ref_opt->zero_grad();
    F::cross_entropy(reference->forward(b.x), b.y).backward();
    auto p = model->named_parameters();
    auto q = reference->named_parameters();
    for (size_t i = 0; i < p.size(); ++i) {
      double e = rel_err(p[i].second.grad(), q[i].second.grad());
      expect(e <= tol, "step " + std::to_string(step) + ": gradient of " + p[i].first +
                           " differs from the single-process one by " + std::to_string(e));
    }
    opt->step();
    ref_opt->step();
  }
  auto p = model->named_parameters();
  auto q = reference->named_parameters();
  std::vector<Tensor> out;
  for (size_t i = 0; i < p.size(); ++i) {
    double e = rel_err(p[i].second, q[i].second);
    expect(e <= tol, optimizer + ": weight " + p[i].first + " after " + std::to_string(steps) +
                         " steps differs from the single-process one by " + std::to_string(e));
    out.push_back(p[i].second.clone());
  }
  return out;
}

void scenario_equivalence() {
  for (const char* optimizer : {"sgd", "adam"}) {
    auto one_bucket = train_both(25, optimizer, 5, 1e-5);
    auto many = train_both(0.0005, optimizer, 5, 1e-5);  // 512 B: a bucket per parameter or two
    for (size_t i = 0; i < one_bucket.size(); ++i)
      expect(rel_err(one_bucket[i], many[i]) == 0.0,
             std::string(optimizer) + ": weights depend on the bucket size");
    ok(std::string(optimizer) + ": DDP over " + std::to_string(world()) +
       " ranks equals one process on the whole batch (5 steps, within 1e-5), bucket size does not change a bit");
  }
}

void scenario_buckets() {
  octo::manual_seed(7);
  auto model = std::make_shared<Net>();
  dist::DistributedDataParallel one(model, {.bucket_cap_mb = 25});
  expect(one.bucket_indices().size() == 1, "25 MB cap: expected one bucket");
  dist::DistributedDataParallel small(model, {.bucket_cap_mb = 0.002});  // 2 KiB
  auto buckets = small.bucket_indices();
  expect(buckets.size() > 2,
         "2 KiB cap: expected several buckets, got " + std::to_string(buckets.size()));
  expect(buckets.front().front() == model->parameters().size() - 1,
         "the first bucket must start with the last parameter (reverse order)");
  ok("bucket layout: " + std::to_string(buckets.size()) + " buckets at 2 KiB, reverse order");

  // Ranks that start from different weights hold rank 0's after construction.
  octo::manual_seed(100 + static_cast<uint64_t>(rank()));
  auto own = std::make_shared<Net>();
  Tensor before = own->fc2->weight.clone();
  dist::DistributedDataParallel wrapped(own);
  auto pg = dist::default_group();
  Tensor lo = own->fc2->weight.clone(), hi = own->fc2->weight.clone();
  pg->all_reduce(lo, dist::ReduceOp::Min)->wait();
  pg->all_reduce(hi, dist::ReduceOp::Max)->wait();
  expect(rel_err(lo, hi) == 0.0, "after construction every rank must hold the same weights");
  expect(rank() == 0 ? rel_err(own->fc2->weight, before) == 0.0
                     : rel_err(own->fc2->weight, before) > 0.0,
         "the weights must be rank 0's");
  ok("construction broadcasts rank 0's parameters");
}

void scenario_no_sync() {
  octo::manual_seed(7);
  auto model = std::make_shared<Net>();
  auto reference = std::static_pointer_cast<Net>(model->clone());
  dist::DistributedDataParallel ddp(model, {.bucket_cap_mb = 0.001});
  Batch b1 = make_batch(8, 1), b2 = make_batch(8, 2);
  {
    auto guard = ddp.no_sync();
    F::cross_entropy(ddp.forward(b1.mine_x), b1.mine_y).backward();
  }
  // Not synchronised yet: the gradient is this rank's own.
  auto local = std::static_pointer_cast<Net>(reference->clone());
  F::cross_entropy(local->forward(b1.mine_x), b1.mine_y).backward();
  expect(rel_err(model->fc1->weight.grad(), local->fc1->weight.grad()) < 1e-6,
         "inside no_sync the gradient must stay local");
  F::cross_entropy(ddp.forward(b2.mine_x), b2.mine_y).backward();
  F::cross_entropy(reference->forward(b1.x), b1.y).backward();
  F::cross_entropy(reference->forward(b2.x), b2.y).backward();
  auto p = model->named_parameters();
  auto q = reference->named_parameters();
  for (size_t i = 0; i < p.size(); ++i)
    expect(rel_err(p[i].second.grad(), q[i].second.grad()) <= 1e-5,
           "no_sync then sync: " + p[i].first + " differs from the accumulated reference");
  ok("no_sync accumulates locally, then one synchronising backward averages the sum");
}

void scenario_unused() {
  octo::manual_seed(7);
  auto model = std::make_shared<Net>(/*with_unused=*/true);
  Batch b = make_batch(4, 3);
  {
    dist::DistributedDataParallel ddp(model);
    std::string message;
    try {
      F::cross_entropy(ddp.forward(b.mine_x), b.mine_y).backward();
    } catch (const dist::DistributedError& e) {
      message = e.msg();
    }
    expect(message.find("unused.weight") != std::string::npos &&
               message.find("unused.bias") != std::string::npos &&
               message.find("find_unused_parameters") != std::string::npos,
           "expected an error naming unused.weight and unused.bias, got: '" + message + "'");
    ok("without find_unused_parameters: " + message.substr(0, 90) + "...");
  }
  model->zero_grad();
  auto reference = std::static_pointer_cast<Net>(model->clone());
  dist::DistributedDataParallel ddp(model,
                                    {.bucket_cap_mb = 0.001, .find_unused_parameters = true});
  for (int step = 0; step < 2; ++step) {
    model->zero_grad();
    reference->zero_grad();
    F::cross_entropy(ddp.forward(b.mine_x), b.mine_y).backward();
    F::cross_entropy(reference->forward(b.x), b.y).backward();
    expect(!model->unused->weight.grad().defined(), "a globally unused parameter keeps no grad");
    expect(rel_err(model->fc1->weight.grad(), reference->fc1->weight.grad()) <= 1e-5,
           "find_unused_parameters: fc1.weight's gradient differs from the reference");
  }
  ok("find_unused_parameters: used gradients match, unused.weight keeps no gradient");
}

void scenario_collectives() {
  auto pg = dist::default_group();
  const double n = world();
  for (octo::DType dt : {octo::kFloat32, octo::kFloat64, octo::kInt64, octo::kBFloat16}) {
    Tensor t = octo::full({5}, rank() + 1, {.dtype = dt});
    pg->all_reduce(t, dist::ReduceOp::Sum)->wait();
    expect(t.to(octo::kFloat64).sum().item<double>() == 5 * n * (n + 1) / 2,
           "all_reduce sum in " + std::string(octo::dtype_name(dt)));
    Tensor m = octo::full({3}, rank(), {.dtype = dt});
    pg->all_reduce(m, dist::ReduceOp::Max)->wait();
    expect(m.to(octo::kFloat64).max().item<double>() == n - 1, "all_reduce max");
  }
  Tensor avg = octo::full({4}, 2.0 * rank());
  pg->all_reduce(avg, dist::ReduceOp::Average)->wait();
  expect(std::abs(avg[0].item<float>() - (n - 1)) < 1e-6, "all_reduce average");
  Tensor b = octo::full({3}, rank() == 0 ? 42.0 : -1.0);
  pg->broadcast(b, 0)->wait();
  expect(b.sum().item<float>() == 126, "broadcast from rank 0");
  std::vector<Tensor> outs;
  for (int r = 0; r < world(); ++r) outs.push_back(octo::zeros({2}));
  pg->all_gather(outs, octo::full({2}, double(rank())))->wait();
  for (int r = 0; r < world(); ++r)
    expect(outs[static_cast<size_t>(r)][1].item<float>() == r,
           "all_gather slot " + std::to_string(r));
  std::vector<Tensor> ins;
  for (int r = 0; r < world(); ++r) ins.push_back(octo::full({2}, double(r + 10 * rank())));
  Tensor mine = octo::zeros({2});
  pg->reduce_scatter(mine, ins, dist::ReduceOp::Sum)->wait();
  expect(mine[0].item<float>() == rank() * n + 10 * n * (n - 1) / 2, "reduce_scatter");
  pg->barrier()->wait();
  bool threw = false;
  try {
    Tensor t = octo::zeros({4, 4}).t();
    pg->all_reduce(t);
  } catch (const octo::ValueError& e) {
    threw = std::string(e.msg()).find("contiguous") != std::string::npos;
  }
  expect(threw, "a non-contiguous tensor must be refused");
  ok("all_reduce (sum, max, average; 4 dtypes), broadcast, all_gather, reduce_scatter, barrier");
}

void scenario_shapes() {
  octo::manual_seed(7);
  std::shared_ptr<nn::Module> model;
  if (rank() == 1)
    model = std::make_shared<test_models::Mlp>(12, 33, 4);
  else
    model = std::make_shared<test_models::Mlp>(12, 32, 4);
  std::string message;
  try {
    dist::DistributedDataParallel ddp(model);
  } catch (const dist::DistributedError& e) {
    message = e.msg();
  }
  expect(message.find("fc1.weight") != std::string::npos && message.find("33") != std::string::npos,
         "expected an error naming fc1.weight and both shapes, got '" + message + "'");
  ok("different models: " + message);
}

void scenario_skip() {
  // Rank 1 skips a collective that every other rank issues: they fail with the timeout error.
  auto pg = dist::default_group();
  Tensor t = octo::ones({1000});
  if (rank() == 1) {
    std::printf("rank 1 skips the all_reduce\n");
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::seconds(30));
    fail("rank 1 was not ended by the others' abort");
  }
  try {
    pg->all_reduce(t)->wait();
  } catch (const dist::DistributedError& e) {
    std::printf("timeout error on rank %d: %s\n", rank(), e.msg().c_str());
    std::fflush(stdout);
    dist::abort_job(3);
  }
  fail("the all_reduce completed although rank 1 skipped it");
}

void scenario_throw() {
  // Rank 1 throws mid-training; the exception leaves main. Nobody may wait for it.
  octo::manual_seed(7);
  auto model = std::make_shared<Net>();
  dist::DistributedDataParallel ddp(model);
  for (int step = 0; step < 3; ++step) {
    Batch b = make_batch(4, static_cast<uint64_t>(step));
    if (step == 1 && rank() == 1) throw std::runtime_error("rank 1 fails in step 1");
    F::cross_entropy(ddp.forward(b.mine_x), b.mine_y).backward();
  }
  fail("finished all steps although rank 1 threw");
}

void scenario_trace() {
  // Wide enough that the first layer's backward takes about 10 ms after the last layer's bucket
  // (64 KiB) is ready, so the all-reduce starts inside it even on a loaded machine.
  octo::manual_seed(7);
  auto model = std::make_shared<test_models::Mlp>(256, 2048, 10);
  dist::DistributedDataParallel ddp(model, {.bucket_cap_mb = 0.0625});
  Tensor x = octo::randn({512, 256});
  Tensor y = octo::randint(0, 10, {512});
  for (int step = 0; step < 5; ++step) F::cross_entropy(ddp.forward(x), y).backward();
  ok("traced 5 steps over " + std::to_string(ddp.bucket_indices().size()) + " buckets");
}

int scenario_throw_caught() {
  // As the examples do: the error is caught, printed, and main returns 1 without
  // destroy_process_group(); the exit guard must end the job (Note [Exit guard]).
  octo::manual_seed(7);
  auto model = std::make_shared<Net>();
  dist::DistributedDataParallel ddp(model);
  try {
    for (int step = 0; step < 3; ++step) {
      Batch b = make_batch(4, static_cast<uint64_t>(step));
      if (step == 1 && rank() == 1) throw octo::ValueError("rank 1 rejects its batch");
      F::cross_entropy(ddp.forward(b.mine_x), b.mine_y).backward();
    }
  } catch (const octo::Error& e) {
    std::printf("error: %s\n", e.msg().c_str());
    std::fflush(stdout);
    return 1;
  }
  fail("finished all steps although rank 1 threw");
}

void scenario_mnist_data(const std::string& dir) {
  // Not a distributed scenario: writes the tiny MNIST files the example runs read.
  namespace fs = std::filesystem;
  fs::create_directories(dir);
  auto [tr_x, tr_y] = example_helpers::easy_images(512, 1, 28, 1);
  auto [te_x, te_y] = example_helpers::easy_images(128, 1, 28, 2);
  octo::data::write_idx(dir + "/train-images-idx3-ubyte", tr_x.view({512, 28, 28}));
  octo::data::write_idx(dir + "/train-labels-idx1-ubyte", tr_y.to(octo::kUInt8));
  octo::data::write_idx(dir + "/t10k-images-idx3-ubyte", te_x.view({128, 28, 28}));
  octo::data::write_idx(dir + "/t10k-labels-idx1-ubyte", te_y.to(octo::kUInt8));
  std::printf("wrote %s\n", dir.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: ddp_worker SCENARIO\n");
    return 2;
  }
  std::string scenario = argv[1];
  if (scenario == "mnist_data") {
    scenario_mnist_data(argc > 2 ? argv[2] : "ddp_mnist");
    return 0;
  }
  octo::set_num_threads(1);
  dist::init_process_group({.backend = "mpi"});
  std::map<std::string, std::function<void()>> scenarios = {{"equivalence", scenario_equivalence},
                                                            {"buckets", scenario_buckets},
                                                            {"no_sync", scenario_no_sync},
                                                            {"unused", scenario_unused},
                                                            {"collectives", scenario_collectives},
                                                            {"shapes", scenario_shapes},
                                                            {"skip", scenario_skip},
                                                            {"throw", scenario_throw},
                                                            {"trace", scenario_trace}};
  if (scenario == "throw_caught") return scenario_throw_caught();
  auto it = scenarios.find(scenario);
  if (it == scenarios.end()) {
    std::fprintf(stderr, "ddp_worker: unknown scenario '%s'\n", scenario.c_str());
    dist::abort_job(2);
  }
  it->second();
  dist::destroy_process_group();
  return 0;
}
