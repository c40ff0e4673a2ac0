// DataParallel: wrap a model, and each forward splits the batch across devices.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "nn/module.h"

namespace octo::parallel {

/// torch.nn.DataParallel for octo. Each forward:
///   1. scatter:        split the batch along `dim` into one chunk per device (torch.chunk sizes);
///   2. replicate:      copy the module to every device (parameters broadcast from device_ids[0]);
///   3. parallel_apply: run replica i on chunk i, all devices at once;
///   4. gather:         concatenate the outputs on output_device (device_ids[0] by default).
/// backward() then sums every replica's gradients into the original parameters, so an optimizer
/// over model->parameters() trains the one model.
///
///   auto model = std::make_shared<Net>();
///   model->to(octo::Device("cuda:0"));              // first: parameters on device_ids[0]
///   octo::parallel::DataParallel dp(model, {"cuda:0", "cuda:1"});
///   auto out = dp.forward(batch);                    // out.device() == cuda:0
///
/// Works the same over virtual CPU devices ({"cpu:0", "cpu:1"}). With one device the module runs
/// directly.
///
/// Threads: safe to call from several threads at once; calls are serialised (one forward at a
/// time uses the cached replicas). A DataParallel inside another's replicas runs its devices one
/// after the other on the outer replica's worker (Note [Nested device work]). The wrapper's
/// state_dict() has the wrapped module's keys (no "module." prefix), so checkpoints move freely
/// between wrapped and unwrapped models.
class DataParallel : public nn::Module {
 public:
  /// device_ids: default every visible GPU, or cpu:0 when there is none.
  explicit DataParallel(std::shared_ptr<nn::Module> module, std::vector<Device> device_ids = {},
                        std::optional<Device> output_device = std::nullopt, int64_t dim = 0);

  Tensor forward(const Tensor& input) override;
  nn::Value forward_values(const std::vector<nn::Value>& inputs) override;

  const std::shared_ptr<nn::Module>& module() const { return module_; }
  const std::vector<Device>& device_ids() const { return device_ids_; }
  Device output_device() const { return output_device_; }
  int64_t dim() const { return dim_; }
  /// Keep replicas between steps and refresh their values (default), or rebuild them each step.
  void set_cache_replicas(bool cache) {
    std::lock_guard<std::mutex> lock(forward_mutex_);
    cache_replicas_ = cache;
    replicas_.clear();
  }

  nn::NamedTensors state_dict() const override { return module_->state_dict(); }
  void load_state_dict(const nn::NamedTensors& state, bool strict = true) override {
    module_->load_state_dict(state, strict);
  }

 private:
  void check_placement() const;
  std::vector<std::shared_ptr<nn::Module>> replicas_for(size_t n);

  std::shared_ptr<nn::Module> module_;
  std::vector<Device> device_ids_;
  Device output_device_;
  int64_t dim_;
  bool cache_replicas_ = true;
  std::mutex forward_mutex_;  // serialises forward_values (the replica cache is shared state)
  std::vector<std::shared_ptr<nn::Module>> replicas_;  // cached clones, one per device
  std::vector<std::pair<Shape, DType>> replica_signature_;
};

/// The functional form (libtorch's torch::nn::parallel::data_parallel): one step without a
/// wrapper object; replicas are built for this call.
Tensor data_parallel(const std::shared_ptr<nn::Module>& module, const Tensor& input,
                     std::vector<Device> device_ids = {},
                     std::optional<Device> output_device = std::nullopt, int64_t dim = 0);

}  // namespace octo::parallel
