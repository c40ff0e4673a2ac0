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
  /// True when the calling thread is some device's worker: work submitted from here to another
  /// busy worker could wait on a worker that waits on us (a nested parallel call).
  static bool in_worker_thread();
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
/// rethrown together as one Error: "Caught <what> in <label> i on device d" per failure (a
/// single failure keeps its original error type; parallel_apply's label is "replica").
///
/// Note [Nested device work]: called from a device worker (a DataParallel replica whose forward
/// runs another DataParallel, or a scatter inside one), the jobs run one after the other on the
/// calling thread, each with its device current, instead of being submitted: the other workers
/// may be busy waiting for this one, and submitting would deadlock. Every wait for a worker is
/// also bounded (10 minutes, OCTO_WORKER_TIMEOUT_MS): a job still unfinished then is reported as
/// an Error naming its device instead of hanging, and jobs not yet started are dropped.
void run_on_devices(const std::vector<Device>& devices, const std::function<void(size_t)>& fn,
                    int threads_per_device = 0, const char* label = "task");

}  // namespace octo
