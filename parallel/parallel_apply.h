// parallel_apply: run replica i on inputs i on device i's worker, all at once.
#pragma once

#include <memory>
#include <vector>

#include "nn/module.h"

namespace octo::parallel {

/// Runs modules[i]->forward_values(inputs[i]) on devices[i]'s worker thread (that device current,
/// the caller's grad mode carried over, each virtual CPU device with its share of the cores) and
/// returns the outputs in order. If replicas throw, every failure is reported in one error:
/// "Caught <what> in replica i on device d".
std::vector<nn::Value> parallel_apply(const std::vector<std::shared_ptr<nn::Module>>& modules,
                                      const std::vector<std::vector<nn::Value>>& inputs,
                                      const std::vector<Device>& devices);

}  // namespace octo::parallel
