// check_equivalence: a single-device step and a DataParallel step, side by side.
#include "parallel/check_equivalence.h"

#include <cmath>
#include <cstdio>
#include <map>

#include "autograd/grad_mode.h"
#include "autograd/ops/elementwise.h"
#include "autograd/ops/reduce.h"
#include "core/error.h"
#include "parallel/data_parallel.h"

namespace octo::parallel {

namespace {

double max_abs(const Tensor& t) {
  if (!t.defined() || t.numel() == 0) return 0.0;
  NoGradGuard no_grad;
  return octo::max(octo::abs(t.to(kCPU, kFloat64))).item<double>();
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  if (!a.defined() && !b.defined()) return 0.0;
  if (!a.defined() || !b.defined()) return INFINITY;
  NoGradGuard no_grad;
  return max_abs(a.to(kCPU, kFloat64) - b.to(kCPU, kFloat64));
}

struct Step {
  Tensor output, loss;
  std::vector<std::pair<std::string, Tensor>> grads;  // in named_parameters() order
};

Step run(const std::shared_ptr<nn::Module>& model, nn::Module& runner, const Tensor& x,
         const Tensor& y, const LossFn& loss_fn) {
  model->zero_grad();
  Step s;
  s.output = runner.forward(x);
  s.loss = loss_fn(s.output, y.to(s.output.device()));
  s.loss.backward();
  for (const auto& [name, p] : model->named_parameters())
    s.grads.emplace_back(name, p.grad().defined() ? p.grad().clone() : Tensor());
  s.output = s.output.detach();
  s.loss = s.loss.detach();
  return s;
}

}  // namespace

double EquivalenceReport::max_relative_diff() const {
  double worst = output_max_abs_diff;
  worst = std::max(worst, loss_abs_diff);
  for (const auto& g : gradients)
    worst = std::max(worst, g.max_abs_diff / std::max(1.0, g.max_abs_grad));
  return worst;
}

std::ostream& operator<<(std::ostream& os, const EquivalenceReport& r) {
  char line[256];
  os << "DataParallel vs one device -- largest absolute differences\n";
  std::snprintf(line, sizeof line, "  %-32s %12.3e\n", "output", r.output_max_abs_diff);
  os << line;
  std::snprintf(line, sizeof line, "  %-32s %12.3e\n", "loss", r.loss_abs_diff);
  os << line;
  for (const auto& g : r.gradients) {
    std::snprintf(line, sizeof line, "  %-32s %12.3e   (largest gradient %.3e)\n",
                  ("grad " + g.name).c_str(), g.max_abs_diff, g.max_abs_grad);
    os << line;
  }
  if (!r.caveat.empty()) os << "  note: " << r.caveat << "\n";
  return os;
}

EquivalenceReport check_equivalence(const std::shared_ptr<nn::Module>& model, const Tensor& inputs,
                                    const Tensor& targets, const LossFn& loss_fn,
                                    const std::vector<Device>& devices) {
  OCTO_CHECK_VALUE(!devices.empty(), "check_equivalence: expected at least one device");
  // Save what the two steps will change, and restore it at the end.
  nn::NamedTensors saved_buffers, saved_grads;
  {
    NoGradGuard no_grad;
    for (const auto& [n, b] : model->named_buffers()) saved_buffers.emplace_back(n, b.clone());
    for (const auto& [n, p] : model->named_parameters())
      saved_grads.emplace_back(n, p.grad().defined() ? p.grad().clone() : Tensor());
  }
  auto restore_buffers = [&] {
    NoGradGuard no_grad;
    auto current = model->named_buffers();
    for (size_t i = 0; i < current.size(); ++i) current[i].second.copy_(saved_buffers[i].second);
  };

  Step single = run(model, *model, inputs.to(devices[0]), targets, loss_fn);
  restore_buffers();
  DataParallel dp(model, devices);
  Step parallel = run(model, dp, inputs, targets, loss_fn);
  restore_buffers();

  EquivalenceReport report;
  report.output_max_abs_diff = max_abs_diff(single.output, parallel.output);
  report.loss_abs_diff = max_abs_diff(single.loss, parallel.loss);
  for (size_t i = 0; i < single.grads.size(); ++i) {
    const auto& [name, g] = single.grads[i];
    report.gradients.push_back({name, max_abs_diff(g, parallel.grads[i].second), max_abs(g)});
  }
  if (!saved_buffers.empty()) {
    report.caveat =
        "the model has buffers (e.g. BatchNorm running statistics). Under DataParallel each replica normalises with its own chunk's batch statistics, and only replica 0's buffer updates are kept, so outputs and gradients may differ from one device by more than rounding; this is expected (see docs/internals/data_parallel.md).";
  }
  {
    NoGradGuard no_grad;
    auto params = model->parameters();
    for (size_t i = 0; i < params.size(); ++i) params[i].set_grad(saved_grads[i].second);
  }
  return report;
}

}  // namespace octo::parallel
