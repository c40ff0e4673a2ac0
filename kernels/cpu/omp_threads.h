// OmpThreadsGuard: the calling thread's OpenMP thread count for a scope.
#pragma once

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace octo::kernels::cpu {

/// Sets the calling thread's OpenMP thread count -- what Eigen's GEMM and oneDNN read -- to n
/// while alive, so that get_num_threads() (and a virtual device's ThreadLimitGuard) holds there.
class OmpThreadsGuard {
 public:
  explicit OmpThreadsGuard(int n) {
#if defined(_OPENMP)
    previous_ = omp_get_max_threads();
    if (n != previous_) omp_set_num_threads(n);
#endif
    (void)n;
  }
  ~OmpThreadsGuard() {
#if defined(_OPENMP)
    if (omp_get_max_threads() != previous_) omp_set_num_threads(previous_);
#endif
  }
  OmpThreadsGuard(const OmpThreadsGuard&) = delete;
  OmpThreadsGuard& operator=(const OmpThreadsGuard&) = delete;

 private:
  int previous_ = 1;
};

}  // namespace octo::kernels::cpu
