// DistributedDataParallel over NCCL with one rank (a job of one, no mpirun needed): the process
// group's collectives on cuda:0, and DDP's gradients equal the plain model's. Multi-rank NCCL
// runs need one GPU per rank: `mpirun -np N build/tests/gpu/test_gpu_ddp_nccl` on such a machine.
#include "gpu/gpu_helpers.h"
#include "gpu/gpu_main.h"

#include <octo/octo.h>

#include "parallel/models.h"

namespace dist = octo::distributed;
namespace F = octo::nn::functional;
using octo::Tensor;
using namespace gpu_test;

TEST_CASE("nccl process group and DistributedDataParallel on cuda:0") {
  // Works without Open MPI too (a build without it runs a job of one).
  dist::init_process_group({.backend = "nccl"});
  auto pg = dist::default_group();
  REQUIRE(pg->backend_name() == "nccl");
  REQUIRE(pg->device() == octo::Device(octo::DeviceType::CUDA, dist::get_local_rank()));
  const auto n = static_cast<double>(pg->size());

  // Collectives on the GPU against what the CPU expects.
  for (octo::DType dt : {octo::kFloat32, octo::kFloat64, octo::kBFloat16, octo::kInt64}) {
    Tensor t = octo::full({7}, pg->rank() + 1, {.dtype = dt, .device = pg->device()});
    pg->all_reduce(t, dist::ReduceOp::Sum)->wait();
    CHECK(t.to(octo::kCPU).to(octo::kFloat64).sum().item<double>() == 7 * n * (n + 1) / 2);
  }
  Tensor avg = octo::full({3}, 4.0, {.device = pg->device()});
  pg->all_reduce(avg, dist::ReduceOp::Average)->wait();
  CHECK(avg.to(octo::kCPU)[0].item<float>() == 4.0f);
  Tensor b = octo::full({5}, pg->rank() == 0 ? 3.0 : 0.0, {.device = pg->device()});
  pg->broadcast(b, 0)->wait();
  CHECK(b.to(octo::kCPU).sum().item<float>() == 15.0f);
  std::vector<Tensor> outs;
  for (int r = 0; r < pg->size(); ++r) outs.push_back(octo::zeros({2}, {.device = pg->device()}));
  pg->all_gather(outs, octo::full({2}, 1.0 * pg->rank(), {.device = pg->device()}))->wait();
  CHECK(outs.back().to(octo::kCPU)[0].item<float>() == pg->size() - 1);
  pg->barrier()->wait();
  Tensor on_cpu = octo::ones({2});
  CHECK_THROWS_AS(pg->all_reduce(on_cpu), octo::DeviceError);

  // DDP gradients equal the unwrapped model's on the same (whole, one-rank) batch.
  octo::manual_seed(3);
  auto model = std::make_shared<test_models::Mlp>(12, 32, 4);
  auto reference = model->clone();
  model->to(pg->device());
  reference->to(pg->device());
  {
    dist::DistributedDataParallel ddp(model, {.bucket_cap_mb = 0.001});
    CHECK(ddp.bucket_indices().size() > 1);
    Tensor x = octo::randn({16, 12}).to(pg->device());
    Tensor y = octo::randint(0, 4, {16}).to(pg->device());
    F::cross_entropy(ddp.forward(x), y).backward();
    F::cross_entropy(reference->forward(x), y).backward();
    auto p = model->parameters(), q = reference->parameters();
    for (size_t i = 0; i < p.size(); ++i)
      check_match(p[i].grad(), q[i].grad().to(octo::kCPU), 1e-6);
  }
  dist::destroy_process_group();
}
