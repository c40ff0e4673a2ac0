// Learning-rate schedulers: StepLR, MultiStepLR, CosineAnnealingLR, LinearLR, OneCycleLR.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "optim/optimizer.h"

namespace octo::optim {

/// The base of the schedulers. A scheduler is attached to an optimizer (which must outlive it);
/// constructing it records each group's initial learning rate (PyTorch's group["initial_lr"],
/// kept from an earlier scheduler if there is one) and sets the epoch-0 learning rate. Each
/// step() advances one epoch (or one batch, for per-batch schedules) and writes the new learning
/// rates into the optimizer's groups. The formulas are PyTorch's chainable ones: most schedulers
/// update the group's current lr, so two schedulers on one optimizer compose as in PyTorch.
///
///   octo::optim::SGD opt(model->parameters(), {.lr = 0.1});
///   octo::optim::StepLR sched(opt, /*step_size=*/30, /*gamma=*/0.1);
///   for (int epoch = 0; epoch < 100; ++epoch) { train_one_epoch(opt); sched.step(); }
class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  /// Advances the schedule by one and sets each group's learning rate.
  void step();
  /// The learning rates this scheduler set last, one per parameter group.
  const std::vector<double>& get_last_lr() const { return last_lr_; }
  /// How many times step() has run since construction (0 right after it).
  int64_t last_epoch() const { return last_epoch_; }
  const std::vector<double>& base_lrs() const { return base_lrs_; }
  Optimizer& optimizer() const { return *optimizer_; }

  /// "last_epoch", "step_count" (0-d int64), "base_lrs.<g>", "last_lr.<g>" (0-d float64).
  /// Save it next to the optimizer's state_dict(), which holds the current learning rates.
  virtual NamedTensors state_dict() const;
  /// Restores a state_dict() of a scheduler of the same kind on an optimizer with as many groups;
  /// ValueError on missing or unexpected keys or a different number of groups.
  virtual void load_state_dict(const NamedTensors& state_dict);

 protected:
  LRScheduler(Optimizer& optimizer, std::string name);
  /// Derived constructors call this last: records base_lrs and performs the initial step.
  void initialize();
  /// The learning rates for last_epoch_ (already advanced), one per group.
  virtual std::vector<double> get_lr() = 0;
  /// The current learning rate of each group.
  std::vector<double> group_lrs() const;

  Optimizer* optimizer_;
  std::string name_;
  std::vector<double> base_lrs_;
  int64_t last_epoch_ = -1;
  int64_t step_count_ = 0;
  bool is_initial_ = false;
  std::vector<double> last_lr_;
};

/// Multiplies each group's lr by gamma every step_size epochs:
/// lr = base_lr * gamma^(epoch / step_size).
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);

 protected:
  std::vector<double> get_lr() override;

 private:
  int64_t step_size_;
  double gamma_;
};

/// Multiplies each group's lr by gamma at each milestone epoch:
/// lr = base_lr * gamma^(number of milestones <= epoch). A milestone listed twice counts twice.
class MultiStepLR : public LRScheduler {
 public:
  MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma = 0.1);

 protected:
  std::vector<double> get_lr() override;

 private:
  std::map<int64_t, int64_t> milestones_;  // epoch -> how many times it is listed
  double gamma_;
};

/// Cosine annealing from base_lr down to eta_min over T_max epochs (SGDR without restarts):
/// lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2, in PyTorch's
/// recursive form; past T_max it follows the cosine back up.
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0.0);

 protected:
  std::vector<double> get_lr() override;

 private:
  int64_t t_max_;
  double eta_min_;
};

/// Scales each group's lr by a factor going linearly from start_factor to end_factor over
/// total_iters epochs, then keeps end_factor:
/// lr = base_lr * (start + (end - start) * min(epoch, total_iters) / total_iters).
class LinearLR : public LRScheduler {
 public:
  LinearLR(Optimizer& optimizer, double start_factor = 1.0 / 3, double end_factor = 1.0,
           int64_t total_iters = 5);

 protected:
  std::vector<double> get_lr() override;

 private:
  double start_factor_, end_factor_;
  int64_t total_iters_;
};

enum class AnnealStrategy { Cos, Linear };

struct OneCycleLROptions {
  /// Fraction of the steps spent increasing the learning rate.
  double pct_start = 0.3;
  AnnealStrategy anneal_strategy = AnnealStrategy::Cos;
  /// Cycle momentum (SGD's "momentum", Adam's beta1) inversely to the learning rate between
  /// base_momentum and max_momentum. On by default, as in PyTorch.
  bool cycle_momentum = true;
  double base_momentum = 0.85;
  double max_momentum = 0.95;
  /// initial_lr = max_lr / div_factor; min_lr = initial_lr / final_div_factor.
  double div_factor = 25.0;
  double final_div_factor = 1e4;
  /// Three phases (up, symmetric down to initial_lr, then down to min_lr) as in the paper,
  /// instead of fastai's two.
  bool three_phase = false;
};

/// The 1cycle policy (Smith & Topin): the lr rises from max_lr / div_factor to max_lr over the
/// first pct_start of total_steps, then anneals to min_lr; step() once per batch, at most
/// total_steps times. Not chainable: it sets the lr from its own schedule.
///
///   octo::optim::OneCycleLR sched(opt, /*max_lr=*/0.1, /*total_steps=*/epochs * batches,
///                                 {.pct_start = 0.25, .anneal_strategy = AnnealStrategy::Linear});
class OneCycleLR : public LRScheduler {
 public:
  OneCycleLR(Optimizer& optimizer, double max_lr, int64_t total_steps,
             OneCycleLROptions options = {});
  /// One max_lr per parameter group.
  OneCycleLR(Optimizer& optimizer, std::vector<double> max_lrs, int64_t total_steps,
             OneCycleLROptions options = {});

 protected:
  std::vector<double> get_lr() override;

 private:
  struct Phase {
    double end_step;
    int start_lr, end_lr;              // 0 initial_lr, 1 max_lr, 2 min_lr
    int start_momentum, end_momentum;  // 0 max_momentum, 1 base_momentum
  };
  double anneal(double start, double end, double pct) const;

  int64_t total_steps_;
  OneCycleLROptions options_;
  std::vector<Phase> phases_;
  std::vector<std::array<double, 3>> lrs_;  // per group: initial, max, min
  bool use_beta1_ = false;
};

}  // namespace octo::optim
