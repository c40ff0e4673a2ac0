// Streams and events: per-thread current streams, the stream pool, StreamGuard, Event.
#include "kernels/cuda/stream.h"

#include <cuda_runtime_api.h>

#include <array>
#include <atomic>
#include <mutex>
#include <utility>

#include "core/error.h"
#include "kernels/cuda/cuda_check.h"

namespace octo::cuda {

namespace detail {

int resolve_device(int index) {
  if (index < 0) index = current_device_index(DeviceType::CUDA);
  check_device_available(Device(DeviceType::CUDA, index));
  OCTO_CHECK_DEVICE(index < kMaxDevices, "octo supports at most ", kMaxDevices,
                    " CUDA devices, got cuda:", index);
  return index;
}

CudaDeviceScope::CudaDeviceScope(int index) {
  int current = -1;
  OCTO_CUDA_CHECK(cudaGetDevice(&current));
  if (current != index) {
    OCTO_CUDA_CHECK(cudaSetDevice(index));
    previous_ = current;
  }
}

CudaDeviceScope::~CudaDeviceScope() {
  if (previous_ >= 0) cudaSetDevice(previous_);  // cannot fail: it was the current device
}

}  // namespace detail

namespace {

// The calling thread's current stream per device; nullptr is the legacy default stream.
thread_local std::array<StreamHandle, kMaxDevices> tls_current_stream{};

struct StreamPool {
  std::once_flag created;
  std::array<cudaStream_t, kStreamPoolSize> streams[2] = {};  // [low, high priority]
  std::atomic<uint32_t> next[2] = {0, 0};
};

StreamPool& pool(int index) {
  static std::array<StreamPool, kMaxDevices>* pools = new std::array<StreamPool, kMaxDevices>();
  return (*pools)[index];  // never destroyed: streams must outlive every Stream value
}

Device cuda_device(int index) { return Device(DeviceType::CUDA, index); }

}  // namespace

bool Stream::query() const {
  detail::CudaDeviceScope scope(device_index());
  cudaError_t status = cudaStreamQuery(handle_);
  if (status == cudaErrorNotReady) {
    cudaGetLastError();  // not an error: clear it
    return false;
  }
  OCTO_CUDA_CHECK(status);
  return true;
}

void Stream::synchronize() const {
  detail::CudaDeviceScope scope(device_index());
  OCTO_CUDA_CHECK(cudaStreamSynchronize(handle_));
}

void Stream::wait(const Event& event) const {
  if (!event.is_created()) return;
  detail::CudaDeviceScope scope(device_index());
  OCTO_CUDA_CHECK(cudaStreamWaitEvent(handle_, event.handle(), 0));
}

void Stream::wait(const Stream& other) const {
  if (other == *this) return;
  Event event;
  event.record(other);
  wait(event);
}

Stream default_stream(int index) {
  return Stream(cuda_device(detail::resolve_device(index)), nullptr);
}

Stream current_stream(int index) {
  index = detail::resolve_device(index);
  return Stream(cuda_device(index), tls_current_stream[index]);
}

void set_current_stream(const Stream& stream) {
  OCTO_CHECK_DEVICE(stream.device().is_cuda(), "set_current_stream: expected a CUDA stream, got ",
                    "one on ", stream.device());
  int index = detail::resolve_device(stream.device_index());
  tls_current_stream[index] = stream.handle();
}

Stream stream_from_pool(int index, bool high_priority) {
  index = detail::resolve_device(index);
  StreamPool& p = pool(index);
  std::call_once(p.created, [&] {
    detail::CudaDeviceScope scope(index);
    int least = 0, greatest = 0;  // "greatest" priority is the numerically lowest value
    OCTO_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    for (int prio = 0; prio < 2; ++prio) {
      for (auto& s : p.streams[prio]) {
        OCTO_CUDA_CHECK(
            cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, prio ? greatest : least));
      }
    }
  });
  int prio = high_priority ? 1 : 0;
  uint32_t i = p.next[prio].fetch_add(1) % kStreamPoolSize;
  return Stream(cuda_device(index), p.streams[prio][i]);
}

StreamGuard::StreamGuard(const Stream& stream)
    : device_guard_(stream.device()), previous_(current_stream(stream.device_index())) {
  set_current_stream(stream);
}

StreamGuard::~StreamGuard() { tls_current_stream[previous_.device_index()] = previous_.handle(); }

// --- Event ----------------------------------------------------------------------------------

Event::~Event() {
  if (event_) cudaEventDestroy(event_);  // must not throw; a failure only leaks the event
}

Event::Event(Event&& other) noexcept
    : event_(std::exchange(other.event_, nullptr)),
      device_(std::exchange(other.device_, -1)),
      timing_(other.timing_) {}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    if (event_) cudaEventDestroy(event_);
    event_ = std::exchange(other.event_, nullptr);
    device_ = std::exchange(other.device_, -1);
    timing_ = other.timing_;
  }
  return *this;
}

void Event::record() { record(current_stream()); }

void Event::record(const Stream& stream) {
  detail::CudaDeviceScope scope(stream.device_index());
  if (!event_) {
    unsigned flags = timing_ ? cudaEventDefault : cudaEventDisableTiming;
    cudaEvent_t e = nullptr;
    OCTO_CUDA_CHECK(cudaEventCreateWithFlags(&e, flags));
    event_ = e;
    device_ = stream.device_index();
  }
  OCTO_CHECK_DEVICE(device_ == stream.device_index(),
                    "Event::record: the event belongs to cuda:", device_, " but the stream is on ",
                    stream.device(), "; use one event per device");
  OCTO_CUDA_CHECK(cudaEventRecord(event_, stream.handle()));
}

void Event::block(const Stream& stream) const { stream.wait(*this); }

bool Event::query() const {
  if (!event_) return true;
  cudaError_t status = cudaEventQuery(event_);
  if (status == cudaErrorNotReady) {
    cudaGetLastError();
    return false;
  }
  OCTO_CUDA_CHECK(status);
  return true;
}

void Event::synchronize() const {
  if (event_) OCTO_CUDA_CHECK(cudaEventSynchronize(event_));
}

float Event::elapsed_time(const Event& end) const {
  OCTO_CHECK_VALUE(timing_ && end.timing_,
                   "Event::elapsed_time: both events must be created with enable_timing = true");
  OCTO_CHECK_VALUE(event_ && end.event_, "Event::elapsed_time: both events must be recorded first");
  OCTO_CHECK_DEVICE(device_ == end.device_,
                    "Event::elapsed_time: events recorded on different devices, cuda:", device_,
                    " and cuda:", end.device_);
  end.synchronize();
  float ms = 0.0f;
  OCTO_CUDA_CHECK(cudaEventElapsedTime(&ms, event_, end.event_));
  return ms;
}

}  // namespace octo::cuda
