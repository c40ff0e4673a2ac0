// parallel_apply over DeviceWorkers.
#include "parallel/parallel_apply.h"

#include "autograd/autocast.h"
#include "autograd/grad_mode.h"
#include "core/device_worker.h"
#include "core/error.h"
#include "core/trace.h"

namespace octo::parallel {

std::vector<nn::Value> parallel_apply(const std::vector<std::shared_ptr<nn::Module>>& modules,
                                      const std::vector<std::vector<nn::Value>>& inputs,
                                      const std::vector<Device>& devices) {
  OCTO_CHECK_VALUE(modules.size() == inputs.size() && modules.size() <= devices.size(),
                   "parallel_apply: got ", modules.size(), " modules, ", inputs.size(),
                   " inputs and ", devices.size(), " devices");
  std::vector<Device> used(devices.begin(), devices.begin() + static_cast<int64_t>(modules.size()));
  std::vector<nn::Value> outputs(modules.size());
  const bool grad_enabled = autograd::GradMode::is_enabled();
  const amp::State autocast = amp::state();
  auto run_replica = [&](size_t i) {
    GradModeGuard grad_mode(grad_enabled);  // the caller's modes, on the worker's thread
    amp::StateGuard autocast_state(autocast);
    TraceSpan span("forward", used[i]);
    outputs[i] = modules[i]->forward_values(inputs[i]);
  };
  run_on_devices(used, run_replica, 0, "replica");
  return outputs;
}

}  // namespace octo::parallel
