// ProcessGroupNCCL: collectives on CUDA tensors through one NCCL communicator per group, its
// unique id sent from rank 0 over MPI, on its own stream ordered against the compute stream.
//
// Note [NCCL work and timeouts]: a collective is queued on the communicator's stream after the
// work already on the caller's current stream (kernels/collectives.h). wait() polls its completion
// event from the host, sleeping between polls, for at most the group's timeout, then makes the
// current stream wait for it, so later kernels see the result. On a timeout the communicator is
// aborted (ncclCommAbort ends the kernels spinning on a missing peer) and the group is broken.
// Polling from wait() blocks the host until the collective is done: DistributedDataParallel
// waits once per backward, after every bucket has been queued, so the overlap with backward is
// kept; only the CPU's run-ahead of the GPU at the end of backward is given up.
#include <cstring>
#include <thread>

#include "autograd/ops/indexing.h"
#include "core/device_hooks.h"
#include "core/trace.h"
#include "kernels/collectives.h"
#include "parallel/distributed/process_group.h"
#include "tensor/factories.h"
#include "tensor/tensor_impl.h"

namespace octo::distributed {

namespace {

namespace nccl = cuda::nccl;

nccl::RedOp to_nccl(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return nccl::RedOp::Sum;
    case ReduceOp::Average:
      return nccl::RedOp::Average;
    case ReduceOp::Max:
      return nccl::RedOp::Max;
    case ReduceOp::Min:
      return nccl::RedOp::Min;
  }
  return nccl::RedOp::Sum;
}

const void* allocation(const Tensor& t) { return t.impl().storage->data.get(); }

struct Shared {
  std::unique_ptr<nccl::ProcessComm> comm;
  bool broken = false;
  std::string first_error;
};

class NcclWork final : public Work {
 public:
  NcclWork(std::shared_ptr<Shared> shared, std::shared_ptr<nccl::Pending> pending, std::string what,
           int rank, int size, std::chrono::milliseconds timeout, std::vector<Tensor> keep,
           std::function<void()> after)
      : shared_(std::move(shared)),
        pending_(std::move(pending)),
        what_(std::move(what)),
        rank_(rank),
        size_(size),
        timeout_(timeout),
        keep_(std::move(keep)),
        after_(std::move(after)) {}

  bool is_completed() override { return done_ || (pending_ && pending_->query()); }

  void wait() override {
    if (done_) return;
    auto begin = std::chrono::steady_clock::now();
    auto sleep = std::chrono::microseconds(1);
    while (pending_ && !pending_->query()) {
      if (std::chrono::steady_clock::now() - begin > timeout_) {
        shared_->broken = true;
        shared_->first_error =
            what_ + " did not complete within " + std::to_string(timeout_.count()) +
            " ms on rank " + std::to_string(rank_) + " of " + std::to_string(size_) +
            " (nccl): another rank did not take part (it skipped this collective, issued collectives in another order, or stopped)";
        shared_->comm->abort();
        OCTO_THROW(DistributedError, shared_->first_error);
      }
      std::this_thread::sleep_for(sleep);
      sleep = std::min(sleep * 2, std::chrono::microseconds(200));
    }
    if (pending_) pending_->block_current_stream();
    if (after_) after_();
    done_ = true;
    keep_.clear();
  }

 private:
  std::shared_ptr<Shared> shared_;
  std::shared_ptr<nccl::Pending> pending_;
  std::string what_;
  int rank_, size_;
  std::chrono::milliseconds timeout_;
  std::vector<Tensor> keep_;  // the buffers stay alive until the collective is done
  std::function<void()> after_;
  bool done_ = false;
};

class ProcessGroupNCCL final : public ProcessGroup {
 public:
  ProcessGroupNCCL(const RankInfo& info, std::chrono::milliseconds timeout)
      : ProcessGroup(info.rank, info.world_size, timeout),
        device_(DeviceType::CUDA, info.local_rank),
        shared_(std::make_shared<Shared>()) {
    OCTO_CHECK_DEVICE(info.local_rank < cuda::device_count(), "ProcessGroupNCCL: rank ", info.rank,
                      " is local rank ", info.local_rank, " on ", info.hostname, " but only ",
                      cuda::device_count(),
                      " CUDA devices are visible there; start at most one process per GPU");
    nccl::UniqueId id{};
    if (info.rank == 0) id = nccl::make_unique_id();
    detail::bootstrap_broadcast(id.data(), id.size(), timeout);
    shared_->comm =
        std::make_unique<nccl::ProcessComm>(id, info.world_size, info.rank, info.local_rank);
  }

  std::string backend_name() const override { return "nccl"; }
  Device device() const override { return device_; }

  std::shared_ptr<Work> all_reduce(Tensor& t, ReduceOp op) override {
    check_tensor("all_reduce", t);
    check_usable("all_reduce");
    TraceSpan span("all_reduce", device_, "comm");
    auto pending = shared_->comm->all_reduce(t.arg(), to_nccl(op), {allocation(t)});
    return work(detail::describe("all_reduce", t.numel(), t.dtype()), pending, {t}, nullptr);
  }

  std::shared_ptr<Work> broadcast(Tensor& t, int root) override {
    check_tensor("broadcast", t);
    check_usable("broadcast");
    OCTO_CHECK_INDEX(root >= 0 && root < size(), "broadcast: root ", root,
                     " is not a rank of a group of ", size());
    auto pending = shared_->comm->broadcast(t.arg(), root, {allocation(t)});
    return work(detail::describe("broadcast", t.numel(), t.dtype()), pending, {t}, nullptr);
  }

  std::shared_ptr<Work> all_gather(std::vector<Tensor>& outputs, const Tensor& input) override {
    check_tensor("all_gather", input);
    check_usable("all_gather");
    check_per_rank("all_gather", "output", outputs, input);
    Tensor flat =
        empty({static_cast<int64_t>(size()) * input.numel()}, {input.dtype(), device_, false});
    auto pending =
        shared_->comm->all_gather(input.arg(), flat.arg(), {allocation(input), allocation(flat)});
    int64_t n = input.numel();
    return work(detail::describe("all_gather", n, input.dtype()), pending, {input, flat},
                [outputs, flat, n] {
                  for (size_t r = 0; r < outputs.size(); ++r)
                    outputs[r].copy_(
                        flat.narrow(0, static_cast<int64_t>(r) * n, n).view(outputs[r].sizes()));
                });
  }

  std::shared_ptr<Work> reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs,
                                       ReduceOp op) override {
    check_tensor("reduce_scatter", output);
    check_usable("reduce_scatter");
    check_per_rank("reduce_scatter", "input", inputs, output);
    std::vector<Tensor> flat_parts;
    for (const Tensor& in : inputs) {
      flat_parts.push_back(in.reshape({-1}));
    }
    Tensor flat = cat(flat_parts, 0);
    auto pending = shared_->comm->reduce_scatter(flat.arg(), output.arg(), to_nccl(op),
                                                 {allocation(flat), allocation(output)});
    return work(detail::describe("reduce_scatter", output.numel(), output.dtype()), pending,
                {flat, output}, nullptr);
  }

  void shutdown() override {
    if (shared_->comm) shared_->comm.reset();
    shared_->broken = true;
    shared_->first_error = "the process group was shut down (destroy_process_group)";
  }

  std::shared_ptr<Work> barrier() override {
    // NCCL has no barrier: an all-reduce of one element is one.
    Tensor one = zeros({1}, {kFloat32, device_, false});
    return all_reduce(one, ReduceOp::Sum);
  }

 private:
  void check_usable(const char* op) const {
    OCTO_CHECK_T(DistributedError, !shared_->broken, op, " on rank ", rank(),
                 ": the process group is broken by an earlier failure: ", shared_->first_error);
  }
  std::shared_ptr<Work> work(std::string what, std::shared_ptr<nccl::Pending> pending,
                             std::vector<Tensor> keep, std::function<void()> after) {
    return std::make_shared<NcclWork>(shared_, std::move(pending), std::move(what), rank(), size(),
                                      timeout(), std::move(keep), std::move(after));
  }

  Device device_;
  std::shared_ptr<Shared> shared_;
};

}  // namespace

std::shared_ptr<ProcessGroup> new_nccl_group(std::chrono::milliseconds timeout) {
  const RankInfo& info = rank_info();
  OCTO_CHECK_DEVICE(cuda::is_available(), "new_nccl_group: the nccl backend needs CUDA devices, ",
                    cuda_hooks().is_built() ? "and none is visible on " + info.hostname
                                            : std::string("and octo was built without CUDA"),
                    "; use backend \"mpi\" for CPU tensors");
  DeviceGuard guard(Device(DeviceType::CUDA, info.local_rank));
  auto group = std::make_shared<ProcessGroupNCCL>(info, timeout);
  return group;
}

}  // namespace octo::distributed
