// Device workers: one long-lived thread per device, so each device's work runs concurrently.
#pragma once

#include <functional>
#include <future>
#include <vector>

#include "core/device.h"

namespace octo {

/// A thread that owns one device: tasks run in FIFO order with that device current
/// (DeviceGuard). DataParallel's parallel_apply and the autograd engine's multi-device backward
/// run each device's share of the work on its worker. Created on first use; lives until exit.
class DeviceWorker {
 public:
  static DeviceWorker& for_device(Device device);
  /// True when the calling thread is this device's worker (submitting to yourself would
  /// deadlock; run inline instead).
  bool is_current_thread() const;
  std::future<void> submit(std::function<void()> task);
  Device device() const { return device_; }
  /// Number of worker threads ever started (for leak tests: it is bounded by the device count).
  static int threads_started();

  explicit DeviceWorker(Device device);
  ~DeviceWorker();
  DeviceWorker(const DeviceWorker&) = delete;
  DeviceWorker& operator=(const DeviceWorker&) = delete;

 private:
  struct State;
  Device device_;
  std::unique_ptr<State> state_;
};

/// Runs fn(i) for every i in [0, devices.size()) on devices[i]'s worker, concurrently, and waits
/// for all. Each call gets `threads_per_device` intra-op threads (0: an even share of
/// get_num_threads() among the CPU devices in the list). Every failure is collected; they are
/// rethrown together as one Error: "Caught <what> in replica i on device d" per failure (a
/// single failure keeps its original error type).
void run_on_devices(const std::vector<Device>& devices, const std::function<void(size_t)>& fn,
                    int threads_per_device = 0);

}  // namespace octo
