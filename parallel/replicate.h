// replicate: copies of a module on several devices whose gradients flow back to the original.
#pragma once

#include <memory>
#include <vector>

#include "nn/module.h"

namespace octo::parallel {

/// Returns one replica of `module` per device. Replica i's parameters are outputs of one
/// Broadcast node, so backward through any replica sums its gradients into the original
/// parameters (on devices[0], where they must live). Buffers are copied without autograd;
/// replica 0 shares the original buffers, so its in-place updates (BatchNorm running statistics)
/// persist while the other replicas' are dropped -- as in torch.nn.DataParallel. Under
/// NoGradGuard, or with detach, replicas are plain copies outside the graph.
std::vector<std::shared_ptr<nn::Module>> replicate(const std::shared_ptr<nn::Module>& module,
                                                   const std::vector<Device>& devices,
                                                   bool detach = false);

/// Makes existing replicas (from replicate()) current again: values copied from the module, new
/// Broadcast node attached. DataParallel keeps replicas between steps and calls this each step,
/// which saves re-creating modules (see docs/internals/data_parallel.md for the measurements).
void refresh_replicas(const std::shared_ptr<nn::Module>& module,
                      const std::vector<std::shared_ptr<nn::Module>>& replicas,
                      const std::vector<Device>& devices, bool detach = false);

namespace detail {

/// refresh_replicas without the placement check, for callers that made it already this step
/// (DataParallel checks once per forward; replicate() checks before cloning).
void refresh_replicas_placed(const std::shared_ptr<nn::Module>& module,
                             const std::vector<std::shared_ptr<nn::Module>>& replicas,
                             const std::vector<Device>& devices, bool detach = false);

}  // namespace detail

}  // namespace octo::parallel
