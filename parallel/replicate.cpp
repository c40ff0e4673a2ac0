// replicate and refresh_replicas.
#include "parallel/replicate.h"

#include "autograd/grad_mode.h"
#include "core/device_worker.h"
#include "core/error.h"
#include "core/trace.h"
#include "parallel/functions.h"
#include "tensor/autograd_meta.h"
#include "tensor/factories.h"

namespace octo::parallel {

namespace {

std::vector<Tensor> defined_only(const std::vector<Tensor>& ts) {
  std::vector<Tensor> out;
  for (const Tensor& t : ts)
    if (t.defined()) out.push_back(t);
  return out;
}

/// Drops a replica tensor's autograd state (detached replicas).
void make_plain(const Tensor& t) {
  if (auto& meta = t.impl().autograd) {
    meta->grad_fn = nullptr;
    meta->requires_grad = false;
    meta->grad = Tensor();
  }
}

void check_on_device(const nn::Module& module, Device device) {
  for (const auto& [name, t] : module.state_dict()) {
    OCTO_CHECK_DEVICE(t.device() == device, "replicate: ", name, " is on ", t.device(),
                      " but every parameter and buffer must be on devices[0] = ", device);
  }
}

}  // namespace

void refresh_replicas(const std::shared_ptr<nn::Module>& module,
                      const std::vector<std::shared_ptr<nn::Module>>& replicas,
                      const std::vector<Device>& devices, bool detach) {
  OCTO_CHECK_VALUE(!devices.empty(), "replicate: expected at least one device");
  check_on_device(*module, devices[0]);
  detail::refresh_replicas_placed(module, replicas, devices, detach);
}

void detail::refresh_replicas_placed(const std::shared_ptr<nn::Module>& module,
                                     const std::vector<std::shared_ptr<nn::Module>>& replicas,
                                     const std::vector<Device>& devices, bool detach) {
  OCTO_CHECK_VALUE(!devices.empty() && replicas.size() == devices.size(),
                   "replicate: ", replicas.size(), " replicas for ", devices.size(), " devices");
  const size_t n = devices.size();
  std::vector<Tensor> params = module->parameters();
  std::vector<Tensor> buffers = defined_only(module->buffers());
  std::vector<std::vector<Tensor>> rparams(n), rbuffers(n);
  for (size_t i = 0; i < n; ++i) {
    rparams[i] = replicas[i]->parameters();
    rbuffers[i] = defined_only(replicas[i]->buffers());
    OCTO_CHECK_VALUE(rparams[i].size() == params.size() && rbuffers[i].size() == buffers.size(),
                     "replicate: replica ", i, " no longer matches the module's structure");
    replicas[i]->train(module->is_training());
  }
  {
    NoGradGuard no_grad;
    // Replica 0 shares the originals' storage: parameters alias (no copy) and buffer updates
    // land in the original buffers. Other devices get copies, each on its own worker.
    for (size_t j = 0; j < params.size(); ++j) octo::detail::set_data(rparams[0][j], params[j]);
    for (size_t j = 0; j < buffers.size(); ++j) octo::detail::set_data(rbuffers[0][j], buffers[j]);
    run_on_devices(devices, [&](size_t i) {
      if (i == 0) return;
      // Plain copies: the replicas' link to the originals is recorded below (Broadcast), once.
      NoGradGuard no_grad;
      TraceSpan span("replicate", devices[i]);
      for (size_t j = 0; j < params.size(); ++j) {
        make_plain(rparams[i][j]);
        // Fresh storage each step, never an in-place copy: the graph of an earlier forward that
        // has not run backward yet (another thread's, or a nested DataParallel's) saved the old
        // values and checks their version.
        Tensor fresh = empty(params[j].sizes(), {params[j].dtype(), devices[i], false});
        fresh.copy_(params[j]);
        octo::detail::set_data(rparams[i][j], fresh);
        span.add_bytes(static_cast<int64_t>(params[j].nbytes()));
      }
      for (size_t j = 0; j < buffers.size(); ++j) rbuffers[i][j].copy_(buffers[j]);
    });
  }
  bool record = !detach && autograd::GradMode::is_enabled();
  if (record) {
    // Replica i's parameters become outputs of one Broadcast node over the originals.
    Broadcast::apply_into(params, devices, rparams);
  } else {
    for (auto& per_device : rparams)
      for (const Tensor& t : per_device) make_plain(t);
  }
}

std::vector<std::shared_ptr<nn::Module>> replicate(const std::shared_ptr<nn::Module>& module,
                                                   const std::vector<Device>& devices,
                                                   bool detach) {
  OCTO_CHECK_VALUE(!devices.empty(), "replicate: expected at least one device");
  check_on_device(*module, devices[0]);
  std::vector<std::shared_ptr<nn::Module>> replicas;
  for (Device d : devices) replicas.push_back(module->clone(d));
  detail::refresh_replicas_placed(module, replicas, devices, detach);
  return replicas;
}

}  // namespace octo::parallel
