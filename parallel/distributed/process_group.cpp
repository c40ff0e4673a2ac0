// The default process group and what every backend shares: argument checks, descriptions, and
// the job's start and end (init_process_group, destroy_process_group, the exit guard).
#include "parallel/distributed/process_group.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "core/device_hooks.h"
#include "core/trace.h"

namespace octo::distributed {

namespace {

struct State {
  std::mutex mutex;
  bool initialized = false;
  bool destroyed = false;
  RankInfo info;
  std::shared_ptr<ProcessGroup> group;
};

State& state() {
  static State* s = new State();  // never destroyed: the exit guard below runs after statics
  return *s;
}

// Note [Exit guard]: MPI_Finalize is collective. A rank that leaves through an error path while
// the others wait in a collective would, if it finalized, wait for them in turn, and the job
// would hang until the timeout. So a process that exits without destroy_process_group() aborts
// the job instead: mpirun/srun then end every rank at once and report the failure.
void exit_guard() {
  State& s = state();
  if (!s.initialized || s.destroyed) return;
  std::fprintf(
      stderr,
      "octo.distributed: rank %d is exiting without destroy_process_group() (an error path?); aborting the job so that no other rank waits for it\n",
      s.info.rank);
  std::fflush(stderr);
  detail::mpi_abort(1);
}

std::chrono::milliseconds timeout_from_env(std::chrono::milliseconds fallback) {
  const char* env = std::getenv("OCTO_DIST_TIMEOUT_MS");
  if (env == nullptr || *env == '\0') return fallback;
  char* end = nullptr;
  long long ms = std::strtoll(env, &end, 10);
  OCTO_CHECK_VALUE(end != env && *end == '\0' && ms > 0,
                   "OCTO_DIST_TIMEOUT_MS must be a positive number of milliseconds, got '", env,
                   "'");
  return std::chrono::milliseconds(ms);
}

}  // namespace

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return "sum";
    case ReduceOp::Average:
      return "average";
    case ReduceOp::Max:
      return "max";
    case ReduceOp::Min:
      return "min";
  }
  return "?";
}

void ProcessGroup::check_tensor(const char* op, const Tensor& t) const {
  OCTO_CHECK_VALUE(t.defined(), op, ": got an undefined tensor");
  OCTO_CHECK_VALUE(t.is_contiguous(), op, ": expected a contiguous tensor, got shape ", t.sizes(),
                   " with strides ", t.strides(), " (call .contiguous() first)");
  Device d = device();
  bool ok = d.is_cpu() ? t.device().is_cpu() : t.device() == d;
  OCTO_CHECK_DEVICE(ok, op, ": the ", backend_name(), " process group of rank ", rank(),
                    " works on ", d.is_cpu() ? std::string("cpu devices") : d.str(),
                    " but the tensor is on ", t.device());
}

void ProcessGroup::check_per_rank(const char* op, const char* what, const std::vector<Tensor>& list,
                                  const Tensor& like) const {
  OCTO_CHECK_VALUE(static_cast<int>(list.size()) == size(), op, ": expected ", size(), " ", what,
                   " tensors (one per rank), got ", list.size());
  for (const Tensor& t : list) {
    check_tensor(op, t);
    OCTO_CHECK_VALUE(t.sizes() == like.sizes() && t.dtype() == like.dtype(), op, ": every ", what,
                     " must be shaped like ", like.sizes(), " ", like.dtype(), ", got ", t.sizes(),
                     " ", t.dtype());
  }
}

bool is_available() { return detail::mpi_available(); }

void init_process_group(const InitOptions& options) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  OCTO_CHECK_VALUE(!s.initialized, "init_process_group: already initialised (rank ", s.info.rank,
                   " of ", s.info.world_size, ")");
  OCTO_CHECK_VALUE(
      options.backend == "auto" || options.backend == "mpi" || options.backend == "nccl",
      "init_process_group: backend must be \"auto\", \"mpi\" or \"nccl\", got \"", options.backend,
      "\"");
  auto timeout = timeout_from_env(options.timeout);
  OCTO_CHECK_VALUE(timeout.count() > 0, "init_process_group: timeout must be positive, got ",
                   timeout.count(), " ms");
  s.info = detail::mpi_init();
  s.initialized = true;
  std::atexit(exit_guard);
  std::string backend = options.backend;
  if (backend == "auto") backend = cuda::device_count() > 0 ? "nccl" : "mpi";
  if (s.info.world_size > 1) set_trace_process(s.info.rank, "rank " + std::to_string(s.info.rank));
  s.group = backend == "nccl" ? new_nccl_group(timeout) : new_mpi_group(timeout);
}

bool is_initialized() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.initialized && !s.destroyed;
}

void destroy_process_group() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  OCTO_CHECK_VALUE(s.initialized && !s.destroyed,
                   "destroy_process_group: init_process_group() was not called");
  // A last barrier: every rank reaches the end before MPI goes (bounded by the group's timeout).
  s.group->barrier()->wait();
  s.group->shutdown();
  s.group.reset();
  s.destroyed = true;
  detail::mpi_finalize();
}

void abort_job(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  if (state().initialized && !state().destroyed) detail::mpi_abort(code);
  std::_Exit(code);
}

const RankInfo& rank_info() {
  State& s = state();
  OCTO_CHECK_T(DistributedError, s.initialized,
               "octo::distributed: call init_process_group() first");
  return s.info;
}
int get_rank() { return rank_info().rank; }
int get_world_size() { return rank_info().world_size; }
int get_local_rank() { return rank_info().local_rank; }

std::shared_ptr<ProcessGroup> default_group() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  OCTO_CHECK_T(DistributedError, s.initialized && !s.destroyed && s.group,
               "octo::distributed: no default process group; call init_process_group() first");
  return s.group;
}

namespace detail {

std::string describe(const char* op, int64_t numel, DType dtype) {
  double bytes = static_cast<double>(numel) * static_cast<double>(itemsize(dtype));
  char size[64];
  if (bytes < 1024)
    std::snprintf(size, sizeof size, "%.0f B", bytes);
  else if (bytes < 1024.0 * 1024)
    std::snprintf(size, sizeof size, "%.1f KiB", bytes / 1024);
  else
    std::snprintf(size, sizeof size, "%.1f MiB", bytes / (1024.0 * 1024));
  return ::octo::detail::str(op, " of ", numel, " ", dtype_name(dtype), " elements (", size, ")");
}

}  // namespace detail

}  // namespace octo::distributed
