// DistributedDataParallel: one process per device; gradients averaged over the ranks while
// backward runs.
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "nn/module.h"
#include "parallel/distributed/process_group.h"

namespace octo::distributed {

class Reducer;

struct DistributedDataParallelOptions {
  /// Gradients travel in buckets of about this many MiB, each all-reduced as soon as it is full.
  double bucket_cap_mb = 25;
  /// Walk each forward's graph to find parameters it does not use and count them as ready (with
  /// a zero gradient), at the cost of the walk and one small all-reduce per step. Without it a
  /// parameter that gets no gradient is an error that names it.
  bool find_unused_parameters = false;
  /// Copy rank 0's buffers (BatchNorm running statistics) to every rank before each forward in
  /// training mode.
  bool broadcast_buffers = true;
  /// Default: default_group().
  std::shared_ptr<ProcessGroup> process_group;
};

/// torch.nn.parallel.DistributedDataParallel for octo: run one process per device (mpirun -np N,
/// srun), give each its shard of the data (data::DistributedSampler), and wrap the model:
///
///   octo::distributed::init_process_group();
///   auto model = std::make_shared<Net>();
///   model->to(octo::distributed::default_group()->device());
///   octo::distributed::DistributedDataParallel ddp(model);   // rank 0's weights everywhere
///   octo::optim::SGD opt(model->parameters(), {.lr = 0.1});
///   loss = F::cross_entropy(ddp.forward(x), y);  loss.backward();   // grads: mean over ranks
///   opt.step();                                              // the same step on every rank
///
/// Construction checks that every rank has the same parameter shapes and broadcasts rank 0's
/// parameters and buffers. Each backward then averages the gradients over the ranks: they are
/// grouped in buckets (reverse registration order), and a bucket's all-reduce starts from the
/// post-accumulate hook of its last gradient, overlapping the rest of backward; backward()
/// returns once every bucket is reduced (docs/internals/ddp.md).
///
/// Not thread-safe: one thread calls forward/backward at a time (concurrent calls throw).
/// state_dict() has the wrapped module's keys, so checkpoints move between DDP and one process.
class DistributedDataParallel : public nn::Module {
 public:
  explicit DistributedDataParallel(std::shared_ptr<nn::Module> module,
                                   DistributedDataParallelOptions options = {});
  ~DistributedDataParallel() override;

  Tensor forward(const Tensor& input) override;
  nn::Value forward_values(const std::vector<nn::Value>& inputs) override;

  /// Inside the scope, backward accumulates gradients locally without all-reducing; the first
  /// backward after it synchronises the accumulated sum (gradient accumulation):
  ///
  ///   { auto guard = ddp.no_sync(); loss(ddp.forward(x1)).backward(); }
  ///   loss(ddp.forward(x2)).backward();   // all-reduces grad(x1) + grad(x2) once
  class NoSync {
   public:
    explicit NoSync(DistributedDataParallel& ddp) : ddp_(ddp), previous_(ddp.sync_) {
      ddp.sync_ = false;
    }
    ~NoSync() { ddp_.sync_ = previous_; }
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

   private:
    DistributedDataParallel& ddp_;
    bool previous_;
  };
  [[nodiscard]] NoSync no_sync() { return NoSync(*this); }

  const std::shared_ptr<nn::Module>& module() const { return module_; }
  const std::shared_ptr<ProcessGroup>& process_group() const { return group_; }
  /// Parameter indices (into module()->parameters() that require grad) per bucket, in launch
  /// order.
  std::vector<std::vector<size_t>> bucket_indices() const;

  nn::NamedTensors state_dict() const override { return module_->state_dict(); }
  void load_state_dict(const nn::NamedTensors& state, bool strict = true) override {
    module_->load_state_dict(state, strict);
  }

 private:
  void verify_same_shapes() const;
  void broadcast_state(bool parameters) const;

  std::shared_ptr<nn::Module> module_;
  DistributedDataParallelOptions options_;
  std::shared_ptr<ProcessGroup> group_;
  std::shared_ptr<Reducer> reducer_;
  bool sync_ = true;
  std::atomic<bool> in_forward_{false};
};

}  // namespace octo::distributed
