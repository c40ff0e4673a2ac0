// Process groups: collectives across processes (ranks), one process per device, bootstrapped by
// MPI.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "tensor/tensor.h"

namespace octo::distributed {

/// A collective failed: it timed out, a peer disagreed about shapes, or the group is broken by an
/// earlier failure. The message names the collective, its size, the rank and the cause.
class DistributedError : public Error {
  using Error::Error;
};

enum class ReduceOp { Sum, Average, Max, Min };
const char* reduce_op_name(ReduceOp op);

/// The handle of an asynchronous collective (c10d's Work). wait() blocks until the collective
/// has finished or the group's timeout has passed; on a timeout or a failure it throws
/// DistributedError, and every later collective of the group fails at once (the group is broken:
/// a collective cannot be cancelled, so the ranks no longer agree on what comes next).
class Work {
 public:
  virtual ~Work() = default;
  virtual bool is_completed() = 0;
  /// Throws DistributedError (timeout, peer failure) after at most the group's timeout.
  virtual void wait() = 0;
};

/// Collectives over the ranks of one group. Every rank must issue the same collectives in the
/// same order with tensors of the same shape and dtype; tensors are contiguous and work in place.
/// Each call returns at once; the collective runs in the background (MPI: on the group's
/// progress thread; NCCL: on the group's stream, after the work already queued on the device).
///
///   auto pg = octo::distributed::default_group();
///   auto work = pg->all_reduce(grad, octo::distributed::ReduceOp::Average);
///   ...                                  // overlap: compute while the all-reduce runs
///   work->wait();                        // grad now holds the mean over the ranks
class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  int rank() const { return rank_; }
  int size() const { return size_; }
  /// "mpi" or "nccl".
  virtual std::string backend_name() const = 0;
  /// The device this rank's tensors must be on (cpu:k for MPI groups, cuda:local_rank for NCCL).
  virtual Device device() const = 0;
  std::chrono::milliseconds timeout() const { return timeout_; }
  void set_timeout(std::chrono::milliseconds timeout) { timeout_ = timeout; }

  /// tensor = op over every rank's tensor.
  virtual std::shared_ptr<Work> all_reduce(Tensor& tensor, ReduceOp op = ReduceOp::Sum) = 0;
  /// tensor = rank root's tensor.
  virtual std::shared_ptr<Work> broadcast(Tensor& tensor, int root = 0) = 0;
  /// outputs[r] = rank r's input; outputs has size() tensors shaped like input.
  virtual std::shared_ptr<Work> all_gather(std::vector<Tensor>& outputs, const Tensor& input) = 0;
  /// output = op over every rank's inputs[rank()]; inputs has size() tensors shaped like output.
  virtual std::shared_ptr<Work> reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs,
                                               ReduceOp op = ReduceOp::Sum) = 0;
  virtual std::shared_ptr<Work> barrier() = 0;
  /// Waits for the queued collectives and releases the group's communicator; every later call
  /// throws. destroy_process_group() calls it, so objects still holding the group (a
  /// DistributedDataParallel) are harmless afterwards.
  virtual void shutdown() = 0;

 protected:
  ProcessGroup(int rank, int size, std::chrono::milliseconds timeout)
      : rank_(rank), size_(size), timeout_(timeout) {}
  /// The argument checks every backend shares: defined, contiguous, on device(), same dtype.
  void check_tensor(const char* op, const Tensor& t) const;
  /// For all_gather's outputs and reduce_scatter's inputs: one tensor per rank, each passing
  /// check_tensor and shaped like `like` with its dtype.
  void check_per_rank(const char* op, const char* what, const std::vector<Tensor>& list,
                      const Tensor& like) const;

 private:
  int rank_, size_;
  std::chrono::milliseconds timeout_;
};

/// What MPI (or Slurm through MPI) says about this process.
struct RankInfo {
  int rank = 0;        // 0 .. world_size - 1
  int world_size = 1;  // processes in the job
  int local_rank = 0;  // index among the processes on this machine (picks cuda:<local_rank>)
  int local_size = 1;
  std::string hostname;
};

struct InitOptions {
  /// "mpi" (CPU tensors), "nccl" (CUDA tensors, needs a GPU per local rank), or "auto": nccl
  /// when CUDA devices are visible, else mpi.
  std::string backend = "auto";
  /// Every collective that has not completed after this long fails (DistributedError). The
  /// environment variable OCTO_DIST_TIMEOUT_MS overrides it.
  std::chrono::milliseconds timeout = std::chrono::minutes(10);
};

/// Starts the distributed runtime: initialises MPI (the process must have been started by
/// mpirun, mpiexec or srun; a plain start is a job of one), creates the default group and makes
/// cuda:<local_rank> the current device for the NCCL backend. Call once, before any other
/// function here; end with destroy_process_group().
///
///   octo::distributed::init_process_group();          // under mpirun -np 2 ./train
///   int rank = octo::distributed::get_rank();
void init_process_group(const InitOptions& options = {});
bool is_initialized();
/// Waits for the default group's pending collectives, then shuts MPI down. A process that exits
/// without calling it (an exception escaped, or an error path returned early) aborts the whole
/// job at exit instead, so no other rank waits for it until its timeout.
void destroy_process_group();
/// Ends every rank of the job now with `code` (MPI_Abort): for error paths.
[[noreturn]] void abort_job(int code);

const RankInfo& rank_info();
int get_rank();
int get_world_size();
int get_local_rank();
/// The group init_process_group() created. DistributedError before init.
std::shared_ptr<ProcessGroup> default_group();
/// True when octo was built with MPI (the distributed layer needs it).
bool is_available();

/// Creates an MPI process group over every rank (init_process_group() calls it). Exposed so
/// that tests and tools can make groups with other timeouts.
std::shared_ptr<ProcessGroup> new_mpi_group(std::chrono::milliseconds timeout);
/// Creates a NCCL group over every rank on cuda:<local_rank>; the NCCL unique id travels by MPI.
std::shared_ptr<ProcessGroup> new_nccl_group(std::chrono::milliseconds timeout);

namespace detail {
// The few MPI calls outside the MPI process group: start, end, abort, bootstrap (mpi_runtime.cpp,
// or mpi_stub.cpp in a build without MPI), declared here next to new_mpi_group which those files
// also define.
bool mpi_available();
/// MPI_Init_thread (MPI_THREAD_MULTIPLE), then rank, size and the local rank (ranks sharing this
/// machine's memory, MPI_COMM_TYPE_SHARED).
RankInfo mpi_init();
void mpi_finalize();
void mpi_abort(int code);
/// Broadcasts raw bytes from rank 0 over MPI (the NCCL unique id). Blocking; bounded by timeout.
void bootstrap_broadcast(void* data, size_t bytes, std::chrono::milliseconds timeout);
/// "all_reduce of 1,024 float32 elements (4.0 KiB)"
std::string describe(const char* op, int64_t numel, DType dtype);
}  // namespace detail

}  // namespace octo::distributed
