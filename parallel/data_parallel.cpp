// DataParallel: scatter, replicate, parallel_apply, gather.
#include "parallel/data_parallel.h"

#include <set>

#include "core/device_hooks.h"
#include "core/error.h"
#include "core/trace.h"
#include "parallel/parallel_apply.h"
#include "parallel/replicate.h"
#include "parallel/scatter_gather.h"

namespace octo::parallel {

namespace {

std::vector<Device> default_devices() {
  int n = cuda::device_count();
  if (n == 0) return {kCPU};
  std::vector<Device> out;
  for (int i = 0; i < n; ++i) out.emplace_back(DeviceType::CUDA, i);
  return out;
}

/// Moves every tensor in a nested value to `device` (autograd-aware; no-op where it is there).
nn::Value to_device(const nn::Value& v, Device device) {
  if (v.is_tensor()) return v.tensor().device() == device ? v : nn::Value(v.tensor().to(device));
  if (!v.is_list()) return v;
  nn::Value::List items;
  for (const nn::Value& item : v.list()) items.push_back(to_device(item, device));
  return nn::Value::list(std::move(items));
}

std::vector<std::pair<Shape, DType>> signature(const nn::Module& m) {
  std::vector<std::pair<Shape, DType>> out;
  for (const auto& [name, t] : m.state_dict()) out.emplace_back(t.sizes(), t.dtype());
  return out;
}

}  // namespace

DataParallel::DataParallel(std::shared_ptr<nn::Module> module, std::vector<Device> device_ids,
                           std::optional<Device> output_device, int64_t dim)
    : Module("DataParallel"), module_(std::move(module)), dim_(dim) {
  OCTO_CHECK_VALUE(module_ != nullptr, "DataParallel: module is null");
  device_ids_ = device_ids.empty() ? default_devices() : std::move(device_ids);
  std::set<Device> unique(device_ids_.begin(), device_ids_.end());
  OCTO_CHECK_VALUE(unique.size() == device_ids_.size(),
                   "DataParallel: device_ids must not repeat a device");
  for (Device d : device_ids_) check_device_available(d);
  output_device_ = output_device.value_or(device_ids_[0]);
  register_module("module", module_);
}

void DataParallel::check_placement() const {
  Device expected = device_ids_[0];
  for (const auto& [name, t] : module_->state_dict()) {
    OCTO_CHECK_DEVICE(t.device() == expected,
                      "module must have its parameters and buffers on device ", expected,
                      " (device_ids[0]) but found one of them on device: ", t.device(), " (", name,
                      "). Move the model first: model->to(octo::Device(\"", expected,
                      "\")) before wrapping it in DataParallel.");
  }
}

std::vector<std::shared_ptr<nn::Module>> DataParallel::replicas_for(size_t n) {
  std::vector<Device> devices(device_ids_.begin(), device_ids_.begin() + static_cast<int64_t>(n));
  if (!cache_replicas_) {
    std::vector<std::shared_ptr<nn::Module>> fresh;
    for (Device d : devices) fresh.push_back(module_->clone(d));
    detail::refresh_replicas_placed(module_, fresh, devices);
    return fresh;
  }
  auto sig = signature(*module_);
  if (replicas_.size() != device_ids_.size() || sig != replica_signature_) {
    replicas_.clear();
    for (Device d : device_ids_) replicas_.push_back(module_->clone(d));
    replica_signature_ = sig;
  }
  std::vector<std::shared_ptr<nn::Module>> used(replicas_.begin(),
                                                replicas_.begin() + static_cast<int64_t>(n));
  detail::refresh_replicas_placed(module_, used, devices);
  return used;
}

nn::Value DataParallel::forward_values(const std::vector<nn::Value>& inputs) {
  std::lock_guard<std::mutex> lock(forward_mutex_);
  check_placement();  // the only placement check this step: replication below relies on it
  if (device_ids_.size() == 1) {
    // One device: move the inputs there and run the module itself.
    auto moved = parallel::scatter(inputs, device_ids_, dim_);
    OCTO_CHECK_VALUE(!moved.empty(), "DataParallel: no inputs");
    TraceSpan span("forward", device_ids_[0]);
    return to_device(module_->forward_values(moved[0]), output_device_);
  }
  std::vector<std::vector<nn::Value>> chunks = parallel::scatter(inputs, device_ids_, dim_);
  OCTO_CHECK_VALUE(!chunks.empty(), "DataParallel: the inputs produced no chunks (empty batch?)");
  auto replicas = replicas_for(chunks.size());
  std::vector<nn::Value> outputs = parallel_apply(replicas, chunks, device_ids_);
  return parallel::gather(outputs, output_device_, dim_);
}

Tensor DataParallel::forward(const Tensor& input) { return forward_values({input}).tensor(); }

Tensor data_parallel(const std::shared_ptr<nn::Module>& module, const Tensor& input,
                     std::vector<Device> device_ids, std::optional<Device> output_device,
                     int64_t dim) {
  DataParallel dp(module, std::move(device_ids), output_device, dim);
  dp.set_cache_replicas(false);
  return dp.forward(input);
}

}  // namespace octo::parallel
