// Intra-op threading: how many cores a kernel may use, and parallel_for over a range.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

namespace octo {

/// Sets how many threads CPU kernels use (like torch.set_num_threads). Default: OMP_NUM_THREADS
/// when it is a positive integer, else all cores (Note [Default thread count]).
void set_num_threads(int n);
/// The threads a kernel called from this thread may use: the calling thread's limit
/// (see ThreadLimitGuard) if set, else the global setting.
int get_num_threads();
/// Number of hardware threads.
int hardware_concurrency();
/// The thread count an OMP_NUM_THREADS value asks for: its first entry ("4" and "4,2" give 4),
/// or nullopt when value is null or not a positive integer.
std::optional<int> parse_num_threads(const char* value);

/// Limits kernels called from this thread to n threads while alive. A virtual CPU device's worker
/// holds one so that N devices on N cores each get their share instead of oversubscribing.
class ThreadLimitGuard {
 public:
  explicit ThreadLimitGuard(int n);
  ~ThreadLimitGuard();
  ThreadLimitGuard(const ThreadLimitGuard&) = delete;
  ThreadLimitGuard& operator=(const ThreadLimitGuard&) = delete;

 private:
  int previous_;
};

/// Calls fn(chunk_begin, chunk_end) over [begin, end) split into at most get_num_threads()
/// chunks of at least `grain` elements, in parallel. Runs inline when the range is small or when
/// already inside a parallel region. The first exception thrown by fn is rethrown here.
void parallel_for(int64_t begin, int64_t end, int64_t grain,
                  const std::function<void(int64_t, int64_t)>& fn);

}  // namespace octo
