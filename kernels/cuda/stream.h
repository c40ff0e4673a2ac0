// CUDA streams and events: the calling thread's current stream per device, a stream pool,
// StreamGuard, and Event (record / wait / synchronize / elapsed_time).
#pragma once

#include <cstdint>

#include "core/device.h"
#include "core/device_hooks.h"

// The runtime's own opaque types (cudaStream_t is CUstream_st*, cudaEvent_t is CUevent_st*):
// declaring them here keeps this header free of CUDA headers, so tests can include it.
struct CUstream_st;
struct CUevent_st;

namespace octo::cuda {

using StreamHandle = CUstream_st*;  // == cudaStream_t
using EventHandle = CUevent_st*;    // == cudaEvent_t

/// Devices whose current streams are tracked per thread (cuda:0 .. cuda:63).
inline constexpr int kMaxDevices = 64;
/// Non-blocking streams per device and priority handed out round-robin by stream_from_pool().
inline constexpr int kStreamPoolSize = 8;

class Event;

/// A CUDA stream on a device: a cheap value (device + handle) that never owns the stream.
/// Streams octo hands out (the legacy default stream and the pool) live until the process ends,
/// so a Stream never dangles. handle() == nullptr is the device's legacy default stream.
class Stream {
 public:
  Stream(Device device, StreamHandle handle) : device_(device), handle_(handle) {}
  Device device() const { return device_; }
  int device_index() const { return device_.index(); }
  StreamHandle handle() const { return handle_; }
  bool is_default() const { return handle_ == nullptr; }
  /// True when all work queued so far has finished (never blocks).
  bool query() const;
  /// Blocks the calling thread until all work queued so far has finished.
  void synchronize() const;
  /// Work queued on this stream after the call waits for `event` (no host blocking). A no-op for
  /// an event that was never recorded, like cudaStreamWaitEvent on a fresh event.
  void wait(const Event& event) const;
  /// Shorthand: this stream waits for everything queued on `other` so far.
  void wait(const Stream& other) const;

  friend bool operator==(const Stream& a, const Stream& b) {
    return a.device_ == b.device_ && a.handle_ == b.handle_;
  }
  friend bool operator!=(const Stream& a, const Stream& b) { return !(a == b); }

 private:
  Device device_;
  StreamHandle handle_;
};

/// The legacy default stream of cuda:index (it synchronises with every other blocking stream).
Stream default_stream(int index = -1);
/// The calling thread's current stream on cuda:index (-1: the current CUDA device). Starts as the
/// legacy default stream; kernels and the caching allocator use it.
Stream current_stream(int index = -1);
/// Makes `stream` the calling thread's current stream on its device (the current device is not
/// changed; use StreamGuard for both).
void set_current_stream(const Stream& stream);
/// One of kStreamPoolSize non-blocking streams of cuda:index, round-robin; created lazily, never
/// destroyed. Use it for work that should overlap with the default stream (e.g. communication).
Stream stream_from_pool(int index = -1, bool high_priority = false);

/// Makes stream's device the current device (an octo::DeviceGuard) and the stream its current
/// stream until destroyed; both are restored afterwards.
class StreamGuard {
 public:
  explicit StreamGuard(const Stream& stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  DeviceGuard device_guard_;
  Stream previous_;
};

/// A CUDA event. The underlying cudaEvent_t is created lazily by the first record(), on the
/// recording stream's device; an event recorded on one device cannot later record on another.
/// Move-only; destroying it releases the cudaEvent_t.
class Event {
 public:
  /// enable_timing: needed for elapsed_time(); events without it are cheaper to record.
  explicit Event(bool enable_timing = false) : timing_(enable_timing) {}
  ~Event();
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  /// Captures the work queued so far on `stream` (default: the current stream of the current
  /// CUDA device).
  void record();
  void record(const Stream& stream);
  /// `stream` waits for the captured work (the same as stream.wait(*this)).
  void block(const Stream& stream) const;
  /// True when the captured work has finished, or the event was never recorded.
  bool query() const;
  /// Blocks the calling thread until the captured work has finished (no-op if never recorded).
  void synchronize() const;
  /// Milliseconds between this event and `end` (both recorded with enable_timing). Waits for
  /// `end` to complete first.
  float elapsed_time(const Event& end) const;

  bool is_created() const { return event_ != nullptr; }
  bool timing_enabled() const { return timing_; }
  /// The device it was recorded on; -1 before the first record().
  int device_index() const { return device_; }
  EventHandle handle() const { return event_; }

 private:
  EventHandle event_ = nullptr;
  int device_ = -1;
  bool timing_ = false;
};

namespace detail {
/// Makes cuda:index the CUDA runtime's current device for a scope (cudaSetDevice, restored on
/// exit) without touching octo's current device: what backend primitives and the allocator use
/// around each call. Cheap when the device is already current.
class CudaDeviceScope {
 public:
  explicit CudaDeviceScope(int index);
  ~CudaDeviceScope();
  CudaDeviceScope(const CudaDeviceScope&) = delete;
  CudaDeviceScope& operator=(const CudaDeviceScope&) = delete;

 private:
  int previous_ = -1;
};
/// index, or the current CUDA device when index is -1; checks that the device exists.
int resolve_device(int index);
}  // namespace detail

}  // namespace octo::cuda
