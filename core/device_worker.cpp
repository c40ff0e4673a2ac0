// Device workers and run_on_devices.
#include "core/device_worker.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "core/device_hooks.h"
#include "core/error.h"
#include "core/rethrow.h"
#include "core/threads.h"

namespace octo {

namespace {
std::atomic<int> g_threads_started{0};
thread_local const DeviceWorker* tls_worker = nullptr;
}  // namespace

struct DeviceWorker::State {
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<std::packaged_task<void()>> queue;
  bool stop = false;
  std::thread thread;
};

DeviceWorker::DeviceWorker(Device device) : device_(device), state_(std::make_unique<State>()) {
  g_threads_started.fetch_add(1);
  state_->thread = std::thread([this] {
    tls_worker = this;
    while (true) {
      std::packaged_task<void()> task;
      {
        std::unique_lock<std::mutex> lock(state_->mutex);
        state_->cv.wait(lock, [&] { return state_->stop || !state_->queue.empty(); });
        if (state_->queue.empty()) return;  // stopping
        task = std::move(state_->queue.front());
        state_->queue.pop_front();
      }
      task();  // exceptions are stored in the task's future
    }
  });
}

DeviceWorker::~DeviceWorker() {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->stop = true;
  }
  state_->cv.notify_all();
  if (state_->thread.joinable()) state_->thread.join();
}

DeviceWorker& DeviceWorker::for_device(Device device) {
  static std::mutex mutex;
  // Leaked on purpose: workers must outlive every static that might still submit work at exit.
  static auto* workers = new std::map<Device, std::unique_ptr<DeviceWorker>>();
  std::lock_guard<std::mutex> lock(mutex);
  auto& w = (*workers)[device];
  if (!w) w = std::make_unique<DeviceWorker>(device);
  return *w;
}

bool DeviceWorker::is_current_thread() const { return tls_worker == this; }

bool DeviceWorker::in_worker_thread() { return tls_worker != nullptr; }

namespace {
std::chrono::milliseconds worker_timeout() {
  static const std::chrono::milliseconds timeout = [] {
    const char* env = std::getenv("OCTO_WORKER_TIMEOUT_MS");
    long long ms = env ? std::atoll(env) : 0;
    return std::chrono::milliseconds(ms > 0 ? ms : 10 * 60 * 1000);
  }();
  return timeout;
}
}  // namespace

std::future<void> DeviceWorker::submit(std::function<void()> task) {
  // The device is made current inside the task, so a failure to do so reaches the caller.
  std::packaged_task<void()> packaged([device = device_, task = std::move(task)] {
    DeviceGuard guard(device);
    task();
  });
  auto future = packaged.get_future();
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->queue.push_back(std::move(packaged));
  }
  state_->cv.notify_one();
  return future;
}

int DeviceWorker::threads_started() { return g_threads_started.load(); }

void run_on_devices(const std::vector<Device>& devices, const std::function<void(size_t)>& fn,
                    int threads_per_device, const char* label) {
  if (devices.empty()) return;
  if (threads_per_device <= 0) {
    int cpu_devices = 0;
    for (const Device& d : devices) cpu_devices += d.is_cpu();
    threads_per_device = std::max(1, get_num_threads() / std::max(1, cpu_devices));
  }
  std::vector<std::future<void>> futures(devices.size());
  std::vector<size_t> inline_jobs;
  const bool nested = DeviceWorker::in_worker_thread();  // Note [Nested device work]
  auto abandoned = std::make_shared<std::atomic<bool>>(false);
  for (size_t i = 0; i < devices.size(); ++i) {
    DeviceWorker& w = DeviceWorker::for_device(devices[i]);
    if (nested || w.is_current_thread()) {
      inline_jobs.push_back(i);
      continue;
    }
    futures[i] = w.submit([&fn, i, threads_per_device, abandoned] {
      if (abandoned->load()) return;  // the caller gave up waiting (see below)
      ThreadLimitGuard limit(threads_per_device);
      fn(i);
    });
  }
  std::vector<std::pair<size_t, std::exception_ptr>> errors;
  for (size_t i : inline_jobs) {
    try {
      DeviceGuard guard(devices[i]);
      ThreadLimitGuard limit(nested ? get_num_threads() : threads_per_device);
      fn(i);
    } catch (...) {
      errors.emplace_back(i, std::current_exception());
    }
  }
  const auto deadline = std::chrono::steady_clock::now() + worker_timeout();
  for (size_t i = 0; i < futures.size(); ++i) {
    if (!futures[i].valid()) continue;
    if (futures[i].wait_until(deadline) != std::future_status::ready) {
      abandoned->store(true);
      OCTO_THROW(
          Error, "run_on_devices: the worker of ", devices[i], " did not finish job ", i, " of ",
          devices.size(), " within ", worker_timeout().count(),
          " ms (OCTO_WORKER_TIMEOUT_MS); it is stuck, or waits for another device's worker. The process should exit: the stuck job still runs");
    }
    try {
      futures[i].get();
    } catch (...) {
      errors.emplace_back(i, std::current_exception());
    }
  }
  if (errors.empty()) return;
  std::sort(errors.begin(), errors.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::ostringstream msg;
  bool first = true;
  for (auto& [i, e] : errors) {
    if (!first) msg << "\n";
    first = false;
    msg << "Caught " << detail::exception_message(e) << " in " << label << ' ' << i << " on device "
        << devices[i];
  }
  // One failure keeps its type (an OutOfMemoryError stays one); several become a plain Error.
  if (errors.size() == 1) detail::throw_same_subclass(errors[0].second, msg.str());
  throw Error(msg.str());
}

}  // namespace octo
