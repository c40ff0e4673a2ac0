// NCCL collectives over CUDA devices, as code outside kernels/ sees them: TensorArgs in, no CUDA
// types. kernels/cuda/nccl.cpp implements them; a build without CUDA links kernels/nccl_stub.cpp.
#pragma once

#include <array>
#include <memory>
#include <vector>

#include "kernels/tensor_arg.h"

namespace octo::cuda::nccl {

// --- Several CUDA devices of one process (what torch.cuda.nccl does; parallel/comm) -----------

// Every function takes one buffer per device of the group: buffers[i] is rank i and lives on the
// i-th device, the devices are distinct CUDA devices, and every buffer is contiguous with the
// same dtype and number of elements. Each buffer's `data` must be the start of an allocation of
// its device's caching allocator (a fresh contiguous tensor, as comm's packed buffers are): it is
// record_stream()ed on the NCCL stream so that it is not reused before the collective finishes.
//
// The collectives run on a dedicated NCCL stream per device, after all work queued so far on the
// calling thread's current stream of that device, and that current stream waits for them; the
// host never blocks. Supported dtypes: every octo dtype (float32, float64, int64, int32, uint8,
// bool as uint8, bfloat16, float16).

/// True when octo was built with NCCL and at least one CUDA device is visible.
bool is_available();
/// The NCCL library's version code (e.g. 22809 for 2.28.9).
int version();
/// Copies buffers[root] into every other buffer.
///   cuda::nccl::broadcast({a.arg(), b.arg()}, 0);  // a on cuda:0, b on cuda:1: b = a
void broadcast(const std::vector<kernels::TensorArg>& buffers, int root);
/// output = the elementwise sum of all inputs (logical or for bool); output lives on
/// inputs[root]'s device and may be inputs[root] itself. The inputs are not changed (except
/// inputs[root] when it is the output).
void reduce(const std::vector<kernels::TensorArg>& inputs, int root,
            const kernels::TensorArg& output);

// --- One rank of a multi-process group (parallel/distributed's ProcessGroupNCCL) -----------------

/// ncclUniqueId's bytes: made on rank 0, sent to the others (over MPI), identical on all ranks.
using UniqueId = std::array<char, 128>;
UniqueId make_unique_id();

enum class RedOp { Sum, Average, Max, Min };

/// A collective queued on a communicator's stream; query() polls it without blocking.
class Pending {
 public:
  virtual ~Pending() = default;
  /// True once the collective has finished on the GPU. Throws DeviceError when the communicator
  /// reported an asynchronous error (a peer died, a network failure).
  virtual bool query() = 0;
  /// Makes the calling thread's current stream wait for the collective (no host block).
  virtual void block_current_stream() = 0;
};

/// This process's communicator of an `nranks`-rank group, on cuda:`device` (ncclCommInitRank).
/// Collectives run on the communicator's own stream after the work queued so far on the current
/// stream of its device. Every buffer is contiguous and on that device; `allocations` are the
/// starts of the caching-allocator blocks that hold them, record_stream()ed on the NCCL stream.
class ProcessComm {
 public:
  ProcessComm(const UniqueId& id, int nranks, int rank, int device);
  ~ProcessComm();
  ProcessComm(const ProcessComm&) = delete;
  ProcessComm& operator=(const ProcessComm&) = delete;

  int device() const { return device_; }
  using Allocations = std::vector<const void*>;
  std::shared_ptr<Pending> all_reduce(const kernels::TensorArg& buffer, RedOp op,
                                      const Allocations& allocations);
  std::shared_ptr<Pending> broadcast(const kernels::TensorArg& buffer, int root,
                                     const Allocations& allocations);
  /// output holds nranks * input.numel() elements, rank r's input at offset r * input.numel().
  std::shared_ptr<Pending> all_gather(const kernels::TensorArg& input,
                                      const kernels::TensorArg& output,
                                      const Allocations& allocations);
  /// input holds nranks * output.numel() elements; output = op over every rank's r-th slice.
  std::shared_ptr<Pending> reduce_scatter(const kernels::TensorArg& input,
                                          const kernels::TensorArg& output, RedOp op,
                                          const Allocations& allocations);
  /// ncclCommAbort: ends queued and running collectives (after a timeout); the object is then
  /// unusable.
  void abort();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int device_;
};

}  // namespace octo::cuda::nccl
