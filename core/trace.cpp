// Chrome-trace recording: spans kept in memory, written as JSON at stop_trace() or exit.
#include "core/trace.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <vector>

#include "core/error.h"

namespace octo {

namespace {

struct Span {
  std::string name;
  Device device;
  std::string lane;
  int64_t start_us, end_us, bytes;
};

struct Tracer {
  std::mutex mutex;
  std::atomic<bool> enabled{false};
  std::string path;
  int process_id = -1;  // set_trace_process(); -1: a single-process trace
  std::string process_label;
  std::vector<Span> spans;
  std::chrono::steady_clock::time_point origin = std::chrono::steady_clock::now();
  static constexpr size_t kMaxSpans = 1'000'000;  // a bound on memory for long runs

  int64_t now_us() const {
    return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() -
                                                                 origin)
        .count();
  }
};

Tracer& tracer() {
  static Tracer* t = [] {
    auto* tr = new Tracer();
    if (const char* env = std::getenv("OCTO_TRACE"); env && *env) {
      tr->path = env;
      tr->enabled = true;
      std::atexit([] { stop_trace(); });
    }
    return tr;
  }();
  return *t;
}

/// trace.json -> trace.rank1.json for process 1 (no change for a single-process trace).
std::string process_path(const std::string& path, int process_id) {
  if (process_id < 0) return path;
  std::string tag = ".rank" + std::to_string(process_id);
  size_t slash = path.find_last_of('/');
  size_t dot = path.find_last_of('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return path + tag;
  return path.substr(0, dot) + tag + path.substr(dot);
}

void write_json(const std::string& path, const std::vector<Span>& spans, int process_id,
                const std::string& process_label) {
  FILE* f = std::fopen(path.c_str(), "w");
  OCTO_CHECK_IO(f != nullptr, "trace: cannot write '", path, "'");
  const int pid = process_id < 0 ? 1 : process_id;
  // One "thread" row per device and lane, sorted cpu:0, cpu:0 comm, cpu:1, ..., cuda:0, ...
  std::map<std::pair<Device, std::string>, int> rows;
  for (const Span& s : spans) rows.emplace(std::make_pair(s.device, s.lane), 0);
  int next = 0;
  for (auto& [key, id] : rows) id = next++;
  std::fprintf(f, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n");
  bool first = true;
  if (process_id >= 0) {
    std::fprintf(
        f, "{\"ph\": \"M\", \"pid\": %d, \"name\": \"process_name\", \"args\": {\"name\": \"%s\"}}",
        pid, process_label.c_str());
    first = false;
  }
  for (const auto& [key, id] : rows) {
    std::string row = key.first.str() + (key.second.empty() ? "" : " " + key.second);
    std::fprintf(
        f,
        "%s{\"ph\": \"M\", \"pid\": %d, \"tid\": %d, \"name\": \"thread_name\", \"args\": {\"name\": \"%s\"}}",
        first ? "" : ",\n", pid, id, row.c_str());
    std::fprintf(
        f,
        ",\n{\"ph\": \"M\", \"pid\": %d, \"tid\": %d, \"name\": \"thread_sort_index\", \"args\": {\"sort_index\": %d}}",
        pid, id, id);
    first = false;
  }
  for (const Span& s : spans) {
    std::fprintf(
        f,
        "%s{\"ph\": \"X\", \"pid\": %d, \"tid\": %d, \"name\": \"%s\", \"ts\": %lld, \"dur\": %lld, \"args\": {\"device\": \"%s\", \"bytes\": %lld}}",
        first ? "" : ",\n", pid, rows[std::make_pair(s.device, s.lane)], s.name.c_str(),
        static_cast<long long>(s.start_us),
        static_cast<long long>(std::max<int64_t>(s.end_us - s.start_us, 1)), s.device.str().c_str(),
        static_cast<long long>(s.bytes));
    first = false;
  }
  std::fprintf(f, "\n]}\n");
  std::fclose(f);
}

}  // namespace

void start_trace(const std::string& path) {
  Tracer& t = tracer();
  std::lock_guard<std::mutex> lock(t.mutex);
  t.path = path;
  t.spans.clear();
  t.origin = std::chrono::steady_clock::now();
  t.enabled = true;
}

int64_t stop_trace() {
  Tracer& t = tracer();
  std::lock_guard<std::mutex> lock(t.mutex);
  if (!t.enabled) return 0;
  t.enabled = false;
  write_json(process_path(t.path, t.process_id), t.spans, t.process_id, t.process_label);
  auto n = static_cast<int64_t>(t.spans.size());
  t.spans.clear();
  return n;
}

void set_trace_process(int id, const std::string& label) {
  Tracer& t = tracer();
  std::lock_guard<std::mutex> lock(t.mutex);
  t.process_id = id;
  t.process_label = label;
}

bool trace_enabled() { return tracer().enabled.load(std::memory_order_relaxed); }

TraceSpan::TraceSpan(const char* name, Device device) : name_(name), device_(device) {
  if (trace_enabled()) start_us_ = tracer().now_us();
}

TraceSpan::TraceSpan(std::string name, Device device, std::string lane)
    : name_(std::move(name)), device_(device), lane_(std::move(lane)) {
  if (trace_enabled()) start_us_ = tracer().now_us();
}

TraceSpan::~TraceSpan() {
  if (start_us_ < 0) return;
  Tracer& t = tracer();
  int64_t end = t.now_us();
  std::lock_guard<std::mutex> lock(t.mutex);
  if (t.enabled && t.spans.size() < Tracer::kMaxSpans)
    t.spans.push_back({name_, device_, lane_, start_us_, end, bytes_});
}

}  // namespace octo
