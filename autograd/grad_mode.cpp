// Thread-local grad mode.
#include "autograd/grad_mode.h"

#include <atomic>

namespace octo::autograd {

namespace {
thread_local bool tls_grad_enabled = true;
std::atomic<bool> g_anomaly_enabled{false};
}  // namespace

bool GradMode::is_enabled() { return tls_grad_enabled; }
void GradMode::set_enabled(bool enabled) { tls_grad_enabled = enabled; }
bool AnomalyMode::is_enabled() { return g_anomaly_enabled.load(std::memory_order_relaxed); }
void AnomalyMode::set_enabled(bool enabled) {
  g_anomaly_enabled.store(enabled, std::memory_order_relaxed);
}

}  // namespace octo::autograd
