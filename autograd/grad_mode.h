// Grad mode: whether ops record themselves for backward, per thread.
#pragma once

namespace octo::autograd {

struct GradMode {
  static bool is_enabled();
  static void set_enabled(bool enabled);
};

}  // namespace octo::autograd

namespace octo {

/// Disables recording in this thread while alive (torch.no_grad()).
class NoGradGuard {
 public:
  NoGradGuard() : previous_(autograd::GradMode::is_enabled()) {
    autograd::GradMode::set_enabled(false);
  }
  ~NoGradGuard() { autograd::GradMode::set_enabled(previous_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

/// Enables recording in this thread while alive (torch.enable_grad()).
class EnableGradGuard {
 public:
  EnableGradGuard() : previous_(autograd::GradMode::is_enabled()) {
    autograd::GradMode::set_enabled(true);
  }
  ~EnableGradGuard() { autograd::GradMode::set_enabled(previous_); }
  EnableGradGuard(const EnableGradGuard&) = delete;
  EnableGradGuard& operator=(const EnableGradGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace octo
