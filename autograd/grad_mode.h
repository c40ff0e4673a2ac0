// Grad mode: whether ops record themselves for backward, per thread.
#pragma once

namespace octo::autograd {

struct GradMode {
  static bool is_enabled();
  static void set_enabled(bool enabled);
};

/// Anomaly detection (Note [Anomaly mode] in autograd/engine.cpp): process-wide, so the device
/// workers of a multi-device backward see it too.
struct AnomalyMode {
  static bool is_enabled();
  static void set_enabled(bool enabled);
};

}  // namespace octo::autograd

namespace octo {

/// Sets grad mode to `enabled` in this thread while alive (torch.set_grad_enabled).
class GradModeGuard {
 public:
  explicit GradModeGuard(bool enabled) : previous_(autograd::GradMode::is_enabled()) {
    autograd::GradMode::set_enabled(enabled);
  }
  ~GradModeGuard() { autograd::GradMode::set_enabled(previous_); }
  GradModeGuard(const GradModeGuard&) = delete;
  GradModeGuard& operator=(const GradModeGuard&) = delete;

 private:
  bool previous_;
};

/// Disables recording in this thread while alive (torch.no_grad()).
class NoGradGuard : public GradModeGuard {
 public:
  NoGradGuard() : GradModeGuard(false) {}
};

/// Enables recording in this thread while alive (torch.enable_grad()).
class EnableGradGuard : public GradModeGuard {
 public:
  EnableGradGuard() : GradModeGuard(true) {}
};

/// Turns on anomaly detection while alive (torch.autograd.detect_anomaly): every backward node's
/// gradients, and every recorded op's output, are checked for NaN and Inf, and the first one
/// found throws an octo::Error naming the op. Slow; for debugging.
///
///   octo::DetectAnomalyGuard anomaly;
///   loss.backward();  // "Function 'SqrtBackward' returned nan or inf values in its 0th ..."
class DetectAnomalyGuard {
 public:
  DetectAnomalyGuard() : previous_(autograd::AnomalyMode::is_enabled()) {
    autograd::AnomalyMode::set_enabled(true);
  }
  ~DetectAnomalyGuard() { autograd::AnomalyMode::set_enabled(previous_); }
  DetectAnomalyGuard(const DetectAnomalyGuard&) = delete;
  DetectAnomalyGuard& operator=(const DetectAnomalyGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace octo
