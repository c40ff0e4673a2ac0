// DistributedDataParallel: shape check and broadcast at construction, buffers before each
// forward, the Reducer for backward.
#include "parallel/distributed/distributed_data_parallel.h"

#include <map>

#include "autograd/grad_mode.h"
#include "autograd/ops/indexing.h"
#include "core/trace.h"
#include "parallel/distributed/reducer.h"
#include "parallel/scatter_gather.h"

namespace octo::distributed {

namespace {

void collect_tensors(const nn::Value& v, std::vector<Tensor>& out) {
  if (v.is_tensor()) {
    out.push_back(v.tensor());
  } else if (v.is_list()) {
    for (const auto& item : v.list()) collect_tensors(item, out);
  }
}

/// Marks a forward/backward step as running; a second thread entering at once is an error.
class Exclusive {
 public:
  explicit Exclusive(std::atomic<bool>& flag) : flag_(flag) {
    OCTO_CHECK_T(
        DistributedError, !flag_.exchange(true),
        "DistributedDataParallel: forward called from two threads at once; one DistributedDataParallel serves one thread (use one process per device)");
  }
  ~Exclusive() { flag_ = false; }

 private:
  std::atomic<bool>& flag_;
};

}  // namespace

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<nn::Module> module,
                                                 DistributedDataParallelOptions options)
    : Module("DistributedDataParallel"), module_(std::move(module)), options_(options) {
  OCTO_CHECK_VALUE(module_ != nullptr, "DistributedDataParallel: module is null");
  OCTO_CHECK_VALUE(options_.bucket_cap_mb > 0,
                   "DistributedDataParallel: bucket_cap_mb must be positive, got ",
                   options_.bucket_cap_mb);
  group_ = options_.process_group ? options_.process_group : default_group();
  register_module("module", module_);

  std::vector<Tensor> params;
  std::vector<std::string> names;
  const Device device = group_->device();
  for (const auto& [name, t] : module_->state_dict()) {
    bool ok = device.is_cpu() ? t.device().is_cpu() : t.device() == device;
    OCTO_CHECK_DEVICE(
        ok, "DistributedDataParallel: rank ", group_->rank(), "'s ", group_->backend_name(),
        " process group works on ", device.is_cpu() ? std::string("cpu devices") : device.str(),
        " but the module has ", name, " on ", t.device(),
        ". Move the model first: model->to(octo::distributed::default_group()->device()) before wrapping it.");
  }
  for (const auto& [name, t] : module_->named_parameters()) {
    if (!t.requires_grad()) continue;
    params.push_back(t);
    names.push_back(name);
  }
  verify_same_shapes();
  broadcast_state(/*parameters=*/true);
  auto cap = static_cast<int64_t>(options_.bucket_cap_mb * 1024 * 1024);
  reducer_ = std::make_shared<Reducer>(std::move(params), std::move(names), group_,
                                       std::max<int64_t>(cap, 1), options_.find_unused_parameters);
  reducer_->install_hooks();
}

DistributedDataParallel::~DistributedDataParallel() = default;

void DistributedDataParallel::verify_same_shapes() const {
  // [count, then per tensor: ndim, sizes..., dtype] for parameters and buffers alike.
  auto state = module_->state_dict();
  std::vector<int64_t> mine{static_cast<int64_t>(state.size())};
  for (const auto& [name, t] : state) {
    mine.push_back(t.dim());
    for (int64_t s : t.sizes()) mine.push_back(s);
    mine.push_back(static_cast<int64_t>(t.dtype()));
  }
  auto all = detail::all_gather_ints(*group_, mine);
  for (size_t r = 1; r < all.size(); ++r) {
    if (all[r] == all[0]) continue;
    // Walk both descriptions to name the first tensor that differs.
    const auto& a = all[0];
    const auto& b = all[r];
    OCTO_CHECK_T(DistributedError, a[0] == b[0], "DistributedDataParallel: rank 0's module has ",
                 a[0], " parameters and buffers but rank ", r, "'s has ", b[0],
                 "; every rank must wrap the same model");
    size_t ia = 1, ib = 1;
    for (const auto& [name, t] : state) {
      auto describe = [](const std::vector<int64_t>& v, size_t& i) {
        int64_t nd = v.at(i++);
        Shape shape(v.begin() + static_cast<int64_t>(i), v.begin() + static_cast<int64_t>(i) + nd);
        i += static_cast<size_t>(nd);
        DType dt = static_cast<DType>(v.at(i++));
        return ::octo::detail::str(shape, " ", dt);
      };
      std::string da = describe(a, ia), db = describe(b, ib);
      OCTO_CHECK_T(DistributedError, da == db, "DistributedDataParallel: ", name, " is ", da,
                   " on rank 0 but ", db, " on rank ", r, "; every rank must wrap the same model");
    }
  }
}

void DistributedDataParallel::broadcast_state(bool parameters) const {
  if (group_->size() == 1) return;
  NoGradGuard no_grad;
  // Coalesced: one flat buffer per dtype, one broadcast each (the BatchNorm statistics of a
  // whole model are then two collectives per forward, not one per tensor).
  std::map<DType, std::vector<Tensor>> by_dtype;
  auto add = [&](const Tensor& t) {
    if (t.defined() && t.numel() > 0) by_dtype[t.dtype()].push_back(t);
  };
  if (parameters)
    for (const auto& [name, t] : module_->named_parameters()) add(t);
  for (const auto& [name, t] : module_->named_buffers()) add(t);
  for (auto& [dtype, tensors] : by_dtype) {
    std::vector<Tensor> flat_parts;
    for (const Tensor& t : tensors) flat_parts.push_back(t.reshape({-1}));
    Tensor flat = cat(flat_parts, 0);
    group_->broadcast(flat, 0)->wait();
    int64_t offset = 0;
    for (const Tensor& t : tensors) {
      t.copy_(flat.narrow(0, offset, t.numel()).view(t.sizes()));
      offset += t.numel();
    }
  }
}

nn::Value DistributedDataParallel::forward_values(const std::vector<nn::Value>& inputs) {
  Exclusive exclusive(in_forward_);
  if (options_.broadcast_buffers && module_->is_training()) broadcast_state(false);
  // Inputs go to the module's device (a batch loaded on the CPU for a CUDA rank).
  std::vector<nn::Value> moved = inputs;
  if (!group_->device().is_cpu()) moved = parallel::scatter(inputs, {group_->device()}, 0).at(0);
  nn::Value out;
  {
    TraceSpan span("forward", group_->device());
    out = module_->forward_values(moved);
  }
  if (sync_ && autograd::GradMode::is_enabled()) {
    std::vector<Tensor> outputs;
    collect_tensors(out, outputs);
    bool any = false;
    for (const Tensor& t : outputs) any = any || t.requires_grad();
    if (any) reducer_->prepare_for_backward(outputs);
  }
  return out;
}

Tensor DistributedDataParallel::forward(const Tensor& input) {
  return forward_values({input}).tensor();
}

std::vector<std::vector<size_t>> DistributedDataParallel::bucket_indices() const {
  return reducer_->bucket_indices();
}

}  // namespace octo::distributed
