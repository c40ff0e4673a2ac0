// Intra-op threading over OpenMP, with a per-thread limit for virtual CPU device workers.
#include "core/threads.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>

#include "core/error.h"

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace octo {

namespace {
std::atomic<int> g_num_threads{0};  // 0: not set, use all cores
thread_local int tls_limit = 0;     // 0: no per-thread limit
}  // namespace

int hardware_concurrency() { return std::max(1u, std::thread::hardware_concurrency()); }

void set_num_threads(int n) {
  OCTO_CHECK_VALUE(n >= 1, "set_num_threads: expected a positive thread count, got ", n);
  g_num_threads.store(n);
}

int get_num_threads() {
  if (tls_limit > 0) return tls_limit;
  int n = g_num_threads.load();
  return n > 0 ? n : hardware_concurrency();
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
#pragma omp parallel num_threads(nthreads)
    {
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
    }
    if (error) std::rethrow_exception(error);
    return;
  }
#endif
  (void)nthreads;
  fn(begin, end);
}

}  // namespace octo
