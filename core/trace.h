// Chrome-trace timelines: spans per device (scatter, forward, backward, ...) with bytes moved.
#pragma once

#include <cstdint>
#include <string>

#include "core/device.h"

namespace octo {

/// Starts recording spans; they are written as Chrome trace JSON (open it in chrome://tracing or
/// https://ui.perfetto.dev) to `path` by stop_trace() or at exit. Setting the environment variable
/// OCTO_TRACE=file.json starts a trace at the first span. One row per device.
void start_trace(const std::string& path);
/// Writes the trace file and stops recording. Returns the number of spans written.
int64_t stop_trace();
bool trace_enabled();
/// Labels this process in the trace (one process per rank in distributed runs): its spans go
/// under process `id` named `label`, and the file name gets ".rank<id>" before its extension
/// (trace.json -> trace.rank1.json), so ranks writing the same OCTO_TRACE never collide.
void set_trace_process(int id, const std::string& label);

/// Records [construction, destruction) as one span named `name` on `device`'s row, when tracing.
/// Costs one branch when tracing is off.
class TraceSpan {
 public:
  TraceSpan(const char* name, Device device);
  /// A span on a named lane of the device's row ("comm": collectives beside the compute).
  TraceSpan(std::string name, Device device, std::string lane);
  ~TraceSpan();
  TraceSpan(const TraceSpan&) = delete;
  TraceSpan& operator=(const TraceSpan&) = delete;
  void add_bytes(int64_t n) { bytes_ += n; }

 private:
  std::string name_;
  Device device_;
  std::string lane_;
  int64_t start_us_ = -1;
  int64_t bytes_ = 0;
};

}  // namespace octo
