// check_equivalence: one step on one device vs one step through DataParallel, compared by name.
#pragma once

#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "nn/module.h"

namespace octo::parallel {

/// The largest differences between a single-device step and a DataParallel step.
struct EquivalenceReport {
  double output_max_abs_diff = 0;
  double loss_abs_diff = 0;
  /// Per parameter (state_dict name): max |grad_single - grad_parallel|, and the largest
  /// |grad_single| for scale.
  struct ParamDiff {
    std::string name;
    double max_abs_diff;
    double max_abs_grad;
  };
  std::vector<ParamDiff> gradients;
  /// Set when the model has buffers (BatchNorm running statistics): their updates and the
  /// per-replica batch statistics legitimately differ from a single device's.
  std::string caveat;
  /// The largest difference of any kind relative to max(1, magnitude).
  double max_relative_diff() const;
};
std::ostream& operator<<(std::ostream& os, const EquivalenceReport& r);

using LossFn = std::function<Tensor(const Tensor& output, const Tensor& target)>;

/// Runs one forward and backward of `model` on the whole batch on device_ids[0], then the same
/// through DataParallel over `devices`, from identical parameters, and reports how far outputs,
/// loss and each parameter's gradient are apart. The model's parameters, gradients and buffers
/// are restored afterwards.
///
///   auto report = octo::parallel::check_equivalence(model, x, y, loss_fn, {"cpu:0", "cpu:1"});
///   std::cout << report;   // a table: largest differences by parameter name
EquivalenceReport check_equivalence(const std::shared_ptr<nn::Module>& model, const Tensor& inputs,
                                    const Tensor& targets, const LossFn& loss_fn,
                                    const std::vector<Device>& devices);

}  // namespace octo::parallel
