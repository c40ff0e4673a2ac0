// Current-device bookkeeping and device availability checks.
#include "core/device_hooks.h"

#include <atomic>

#include "core/error.h"

namespace octo {

namespace cuda {
bool is_available() { return cuda_hooks().is_built() && cuda_hooks().device_count() > 0; }
int device_count() { return cuda_hooks().is_built() ? cuda_hooks().device_count() : 0; }

namespace {
std::atomic<bool> g_allow_tf32{false};
}  // namespace
void set_allow_tf32(bool allow) { g_allow_tf32.store(allow, std::memory_order_relaxed); }
bool allow_tf32() { return g_allow_tf32.load(std::memory_order_relaxed); }
}  // namespace cuda

void check_device_available(Device device) {
  if (device.is_cpu()) return;
  OCTO_CHECK_DEVICE(
      cuda_hooks().is_built(), "octo was built without CUDA support, so device ", device,
      " cannot be used; rebuild with -Dcuda=enabled on a machine with the CUDA toolkit, or use a cpu device");
  int n = cuda_hooks().device_count();
  OCTO_CHECK_DEVICE(device.index() < n, "device ", device, " was requested but ",
                    n == 0 ? std::string("no CUDA GPU is visible")
                           : "only " + std::to_string(n) + " CUDA device(s) are visible");
}

void synchronize(Device device) {
  if (device.is_cuda()) cuda_hooks().synchronize(device.index());
}

DeviceGuard::DeviceGuard(Device device)
    : type_(device.type()), previous_(current_device_index(device.type())) {
  if (device.is_cuda()) {
    check_device_available(device);
    cuda_hooks().set_device(device.index());
  }
  detail::set_current_device_index(type_, device.index());
}

DeviceGuard::~DeviceGuard() {
  detail::set_current_device_index(type_, previous_);
  if (type_ == DeviceType::CUDA) {
    try {
      cuda_hooks().set_device(previous_);
    } catch (...) {  // destructors must not throw; the device existed when the guard was made
    }
  }
}

}  // namespace octo
