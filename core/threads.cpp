// Intra-op threading over OpenMP, with a per-thread limit for virtual CPU device workers.
#include "core/threads.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>
#include <thread>

#include "core/error.h"

#if defined(_OPENMP)
#include <omp.h>
#endif

// Note [TSan and OpenMP]: libgomp is not built with ThreadSanitizer, so TSan cannot see that the
// start of a parallel region orders the caller's writes before the workers' reads, nor that its
// end orders the workers' accesses before the caller's next ones; it reports them as races
// (typically the caller's stack, reused after parallel_for returns, against a worker's earlier
// read of a captured variable). Under TSan parallel_for states both edges itself with
// __tsan_release / __tsan_acquire, so what TSan reports about octo's own regions is real.
#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#define OCTO_TSAN_RELEASE(addr) __tsan_release(addr)
#define OCTO_TSAN_ACQUIRE(addr) __tsan_acquire(addr)
#else
#define OCTO_TSAN_RELEASE(addr) (void)(addr)
#define OCTO_TSAN_ACQUIRE(addr) (void)(addr)
#endif

namespace octo {

namespace {
std::atomic<int> g_num_threads{0};  // 0: not set, use all cores
thread_local int tls_limit = 0;     // 0: no per-thread limit
}  // namespace

int hardware_concurrency() { return std::max(1u, std::thread::hardware_concurrency()); }

std::optional<int> parse_num_threads(const char* value) {
  if (value == nullptr) return std::nullopt;
  // OpenMP allows a list ("4,2": 4 at the outer level); octo's kernels use the first entry.
  const char* p = value;
  while (*p == ' ') ++p;
  int n = 0;
  bool digits = false;
  for (; *p >= '0' && *p <= '9'; ++p) {
    digits = true;
    if (n > 1'000'000) return std::nullopt;
    n = n * 10 + (*p - '0');
  }
  while (*p == ' ') ++p;
  if (!digits || n < 1 || (*p != '\0' && *p != ',')) return std::nullopt;
  return n;
}

namespace {
/// Note [Default thread count]: without set_num_threads, kernels use OMP_NUM_THREADS when it
/// holds a positive integer (as PyTorch and every OpenMP program do), else all cores. The
/// variable is read once, on first use; a value that is not a positive integer is reported once
/// on stderr and ignored (an op deep inside a training step is no place to throw over it).
int default_num_threads() {
  static const int n = [] {
    const char* env = std::getenv("OMP_NUM_THREADS");
    if (std::optional<int> parsed = parse_num_threads(env)) return *parsed;
    if (env != nullptr && *env != '\0')
      std::fprintf(
          stderr,
          "octo: ignoring OMP_NUM_THREADS='%s' (expected a positive integer); using all %d cores\n",
          env, hardware_concurrency());
    return hardware_concurrency();
  }();
  return n;
}
}  // namespace

void set_num_threads(int n) {
  OCTO_CHECK_VALUE(n >= 1, "set_num_threads: expected a positive thread count, got ", n);
  g_num_threads.store(n);
}

int get_num_threads() {
  if (tls_limit > 0) return tls_limit;
  int n = g_num_threads.load();
  return n > 0 ? n : default_num_threads();
}

ThreadLimitGuard::ThreadLimitGuard(int n) : previous_(tls_limit) {
  OCTO_CHECK_VALUE(n >= 1, "ThreadLimitGuard: expected a positive thread count, got ", n);
  tls_limit = n;
}
ThreadLimitGuard::~ThreadLimitGuard() { tls_limit = previous_; }

void parallel_for(int64_t begin, int64_t end, int64_t grain,
                  const std::function<void(int64_t, int64_t)>& fn) {
  if (end <= begin) return;
  grain = std::max<int64_t>(grain, 1);
  int64_t max_chunks = (end - begin + grain - 1) / grain;
  int nthreads = static_cast<int>(std::min<int64_t>(get_num_threads(), max_chunks));
#if defined(_OPENMP)
  if (nthreads > 1 && !omp_in_parallel()) {
    std::exception_ptr error;
    std::mutex error_mutex;
    int64_t total = end - begin;
    char fork = 0, join = 0;  // Note [TSan and OpenMP]: only their addresses matter
    OCTO_TSAN_RELEASE(&fork);
#pragma omp parallel num_threads(nthreads)
    {
      OCTO_TSAN_ACQUIRE(&fork);
      int t = omp_get_thread_num();
      int nt = omp_get_num_threads();
      int64_t chunk = (total + nt - 1) / nt;
      int64_t b = begin + t * chunk;
      int64_t e = std::min(end, b + chunk);
      if (b < e) {
        try {
          fn(b, e);
        } catch (...) {
          std::lock_guard<std::mutex> lock(error_mutex);
          if (!error) error = std::current_exception();
        }
      }
      OCTO_TSAN_RELEASE(&join);
    }
    OCTO_TSAN_ACQUIRE(&join);
    if (error) std::rethrow_exception(error);
    return;
  }
#endif
  (void)nthreads;
  fn(begin, end);
}

}  // namespace octo
