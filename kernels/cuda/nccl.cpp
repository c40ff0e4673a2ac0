// NCCL broadcast and reduce over CUDA devices of one process: communicators, streams, dtypes.
//
// Note [NCCL communicators]: one clique of communicators (one ncclComm_t per device) per ordered
// device list, created by ncclCommInitAll on first use and cached. They are never destroyed:
// ncclCommDestroy at static-destruction time may run after the CUDA runtime has been torn down
// (a crash or a hang at exit) and while other threads' NCCL work is still queued, and a process
// holds few cliques (one per device list it uses), whose resources the driver reclaims at exit.
// PyTorch's torch.cuda.nccl leaks its cached communicators for the same reasons.
//
// Note [NCCL launch order]: NCCL kernels of different communicators sharing a device can
// deadlock when two devices run them in different orders (each kernel spins waiting for a peer
// that is queued behind the other one). So every collective octo issues here is launched under
// one process-wide mutex, as one ncclGroupStart/End over all ranks (one host thread drives every
// device), on one dedicated stream per device that nothing else uses: on every device the NCCL
// kernels then run in the same, global order. The streams are created here rather than taken
// from stream_from_pool(), whose streams are shared round-robin with other work.
#include "kernels/collectives.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <array>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <set>

#include "core/device_hooks.h"
#include "core/error.h"
#include "kernels/cuda/caching_allocator.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/stream.h"

namespace octo::cuda::nccl {

namespace {

using detail::CudaDeviceScope;
using kernels::TensorArg;

/// Guards the communicator cache, the NCCL streams and every launch (Note [NCCL launch order]).
std::mutex& nccl_mutex() {
  static auto* mutex = new std::mutex();  // never destroyed, like the cliques it guards
  return *mutex;
}

/// The NCCL stream of cuda:index (non-blocking, created on first use, never destroyed). Called
/// with nccl_mutex() held.
Stream nccl_stream(int index) {
  static auto* streams = new std::array<cudaStream_t, kMaxDevices>();
  cudaStream_t& s = (*streams)[index];
  if (s == nullptr) {
    CudaDeviceScope scope(index);
    OCTO_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  }
  return Stream(Device(DeviceType::CUDA, index), s);
}

/// The clique for this ordered device list (Note [NCCL communicators]). Called with
/// nccl_mutex() held.
const std::vector<ncclComm_t>& communicators(const std::vector<int>& devices) {
  static auto* cache = new std::map<std::vector<int>, std::vector<ncclComm_t>>();
  auto it = cache->find(devices);
  if (it != cache->end()) return it->second;
  std::vector<ncclComm_t> comms(devices.size(), nullptr);
  int current = 0;  // ncclCommInitAll visits every device; keep the caller's current device
  OCTO_CUDA_CHECK(cudaGetDevice(&current));
  const ncclResult_t status =
      ncclCommInitAll(comms.data(), static_cast<int>(devices.size()), devices.data());
  OCTO_CUDA_CHECK(cudaSetDevice(current));
  OCTO_NCCL_CHECK(status);
  return cache->emplace(devices, std::move(comms)).first->second;
}

ncclDataType_t nccl_dtype(DType dtype, const char* op) {
  switch (dtype) {
    case kFloat32:
      return ncclFloat32;
    case kFloat64:
      return ncclFloat64;
    case kInt64:
      return ncclInt64;
    case kInt32:
      return ncclInt32;
    case kUInt8:
    case kBool:  // one byte holding 0 or 1
      return ncclUint8;
    case kBFloat16:
      return ncclBfloat16;
    case kFloat16:
      return ncclFloat16;
  }
  OCTO_THROW(
      ValueError, "nccl::", op, ": dtype ", dtype,
      " is not supported (float32, float64, int64, int32, uint8, bool, bfloat16 and float16 are)");
}

/// Ends the group on every path: a collective that throws inside the group must not leave NCCL
/// in group mode for the next caller.
class GroupGuard {
 public:
  GroupGuard() { OCTO_NCCL_CHECK(ncclGroupStart()); }
  ~GroupGuard() {
    if (!ended_) ncclGroupEnd();  // already failing: the first error is the one reported
  }
  GroupGuard(const GroupGuard&) = delete;
  GroupGuard& operator=(const GroupGuard&) = delete;
  void end() {
    ended_ = true;
    OCTO_NCCL_CHECK(ncclGroupEnd());
  }

 private:
  bool ended_ = false;
};

/// Checks the buffers of a collective and returns their device indices (rank order).
std::vector<int> group_devices(const std::vector<TensorArg>& buffers, int root, const char* op) {
  OCTO_CHECK_VALUE(!buffers.empty(), "nccl::", op, ": expected at least one buffer");
  const int n = static_cast<int>(buffers.size());
  OCTO_CHECK_INDEX(root >= 0 && root < n, "nccl::", op, ": root ", root, " is out of range for ", n,
                   " devices");
  std::vector<int> devices;
  std::set<int> seen;
  const TensorArg& first = buffers[0];
  for (int i = 0; i < n; ++i) {
    const TensorArg& b = buffers[static_cast<size_t>(i)];
    OCTO_CHECK_DEVICE(b.device.is_cuda(), "nccl::", op, ": buffer ", i, " is on ", b.device,
                      ", expected a CUDA device");
    const int index = detail::resolve_device(b.device.index());
    OCTO_CHECK_DEVICE(seen.insert(index).second, "nccl::", op, ": device cuda:", index,
                      " appears twice; every buffer must be on a different device");
    OCTO_CHECK_VALUE(b.dtype == first.dtype && b.numel() == first.numel(), "nccl::", op,
                     ": buffer ", i, " holds ", b.numel(), " elements of ", b.dtype,
                     " but buffer 0 holds ", first.numel(), " of ", first.dtype);
    OCTO_CHECK_VALUE(b.is_contiguous(), "nccl::", op, ": buffer ", i, " is not contiguous");
    devices.push_back(index);
  }
  return devices;
}

/// Runs launch(rank, comm, stream) for every rank inside one NCCL group on the NCCL streams,
/// ordered after each device's current stream and before its later work. touched[i] lists the
/// allocations rank i reads or writes.
void run_collective(const std::vector<int>& devices,
                    const std::vector<std::vector<const void*>>& touched,
                    const std::function<void(size_t, ncclComm_t, cudaStream_t)>& launch) {
  std::lock_guard<std::mutex> lock(nccl_mutex());
  const std::vector<ncclComm_t>& comms = communicators(devices);
  std::vector<Stream> streams;
  for (size_t i = 0; i < devices.size(); ++i) {
    const Stream s = nccl_stream(devices[i]);
    s.wait(current_stream(devices[i]));
    for (const void* p : touched[i]) record_stream(p, s);
    streams.push_back(s);
  }
  {
    GroupGuard group;
    for (size_t i = 0; i < devices.size(); ++i) {
      CudaDeviceScope scope(devices[i]);
      launch(i, comms[i], streams[i].handle());
    }
    group.end();
  }
  for (size_t i = 0; i < devices.size(); ++i) current_stream(devices[i]).wait(streams[i]);
}

ncclRedOp_t nccl_op(RedOp op, DType dtype) {
  if (dtype == kBool) return op == RedOp::Min ? ncclMin : ncclMax;  // logical and / or of 0/1
  switch (op) {
    case RedOp::Sum:
      return ncclSum;
    case RedOp::Average:
      return ncclAvg;
    case RedOp::Max:
      return ncclMax;
    case RedOp::Min:
      return ncclMin;
  }
  return ncclSum;
}

void check_process_buffer(const TensorArg& b, int device, const char* op) {
  OCTO_CHECK_DEVICE(b.device.is_cuda() && detail::resolve_device(b.device.index()) == device,
                    "nccl::", op, ": the buffer is on ", b.device,
                    " but this rank's communicator is on cuda:", device);
  OCTO_CHECK_VALUE(b.is_contiguous(), "nccl::", op, ": the buffer is not contiguous");
}

class PendingEvent final : public Pending {
 public:
  PendingEvent(Event event, ncclComm_t comm) : event_(std::move(event)), comm_(comm) {}
  bool query() override {
    ncclResult_t async = ncclSuccess;
    OCTO_NCCL_CHECK(ncclCommGetAsyncError(comm_, &async));
    OCTO_NCCL_CHECK(async);
    return event_.query();
  }
  void block_current_stream() override { event_.block(current_stream(event_.device_index())); }

 private:
  Event event_;
  ncclComm_t comm_;
};

}  // namespace

UniqueId make_unique_id() {
  ncclUniqueId id;
  OCTO_NCCL_CHECK(ncclGetUniqueId(&id));
  static_assert(sizeof(id) == sizeof(UniqueId), "ncclUniqueId is 128 bytes");
  UniqueId out;
  std::memcpy(out.data(), &id, sizeof id);
  return out;
}

struct ProcessComm::Impl {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  bool aborted = false;

  /// Queues launch(comm, stream) after the device's current stream; returns its completion.
  std::shared_ptr<Pending> run(int device, const std::vector<const void*>& touched,
                               const std::function<void(ncclComm_t, cudaStream_t)>& launch) {
    OCTO_CHECK_T(DeviceError, !aborted, "nccl: the communicator was aborted after a failure");
    std::lock_guard<std::mutex> lock(nccl_mutex());  // Note [NCCL launch order]
    CudaDeviceScope scope(device);
    const Stream s(Device(DeviceType::CUDA, device), stream);
    s.wait(current_stream(device));
    for (const void* p : touched) record_stream(p, s);
    launch(comm, stream);
    Event done;
    done.record(s);
    return std::make_shared<PendingEvent>(std::move(done), comm);
  }
};

ProcessComm::ProcessComm(const UniqueId& id, int nranks, int rank, int device)
    : impl_(std::make_unique<Impl>()), device_(device) {
  ncclUniqueId nid;
  std::memcpy(&nid, id.data(), sizeof nid);
  CudaDeviceScope scope(device);
  OCTO_CUDA_CHECK(cudaStreamCreateWithFlags(&impl_->stream, cudaStreamNonBlocking));
  OCTO_NCCL_CHECK(ncclCommInitRank(&impl_->comm, nranks, nid, rank));
}

ProcessComm::~ProcessComm() {
  // After an abort the communicator is gone; otherwise destroy it while CUDA is still up (the
  // process group is destroyed by destroy_process_group(), before exit).
  if (impl_->comm != nullptr && !impl_->aborted) ncclCommDestroy(impl_->comm);
}

void ProcessComm::abort() {
  if (impl_->aborted || impl_->comm == nullptr) return;
  impl_->aborted = true;
  ncclCommAbort(impl_->comm);
}

std::shared_ptr<Pending> ProcessComm::all_reduce(const TensorArg& b, RedOp op,
                                                 const Allocations& allocations) {
  check_process_buffer(b, device_, "all_reduce");
  const ncclDataType_t dtype = nccl_dtype(b.dtype, "all_reduce");
  const size_t count = static_cast<size_t>(b.numel());
  return impl_->run(device_, allocations, [&](ncclComm_t comm, cudaStream_t stream) {
    OCTO_NCCL_CHECK(
        ncclAllReduce(b.data, b.data, count, dtype, nccl_op(op, b.dtype), comm, stream));
  });
}

std::shared_ptr<Pending> ProcessComm::broadcast(const TensorArg& b, int root,
                                                const Allocations& allocations) {
  check_process_buffer(b, device_, "broadcast");
  const ncclDataType_t dtype = nccl_dtype(b.dtype, "broadcast");
  const size_t count = static_cast<size_t>(b.numel());
  return impl_->run(device_, allocations, [&](ncclComm_t comm, cudaStream_t stream) {
    OCTO_NCCL_CHECK(ncclBroadcast(b.data, b.data, count, dtype, root, comm, stream));
  });
}

std::shared_ptr<Pending> ProcessComm::all_gather(const TensorArg& in, const TensorArg& out,
                                                 const Allocations& allocations) {
  check_process_buffer(in, device_, "all_gather");
  check_process_buffer(out, device_, "all_gather");
  const ncclDataType_t dtype = nccl_dtype(in.dtype, "all_gather");
  const size_t count = static_cast<size_t>(in.numel());
  return impl_->run(device_, allocations, [&](ncclComm_t comm, cudaStream_t stream) {
    OCTO_NCCL_CHECK(ncclAllGather(in.data, out.data, count, dtype, comm, stream));
  });
}

std::shared_ptr<Pending> ProcessComm::reduce_scatter(const TensorArg& in, const TensorArg& out,
                                                     RedOp op, const Allocations& allocations) {
  check_process_buffer(in, device_, "reduce_scatter");
  check_process_buffer(out, device_, "reduce_scatter");
  const ncclDataType_t dtype = nccl_dtype(out.dtype, "reduce_scatter");
  const size_t count = static_cast<size_t>(out.numel());
  return impl_->run(device_, allocations, [&](ncclComm_t comm, cudaStream_t stream) {
    OCTO_NCCL_CHECK(
        ncclReduceScatter(in.data, out.data, count, dtype, nccl_op(op, out.dtype), comm, stream));
  });
}

bool is_available() { return cuda::device_count() > 0; }

int version() {
  int v = 0;
  OCTO_NCCL_CHECK(ncclGetVersion(&v));
  return v;
}

void broadcast(const std::vector<TensorArg>& buffers, int root) {
  const std::vector<int> devices = group_devices(buffers, root, "broadcast");
  const ncclDataType_t dtype = nccl_dtype(buffers[0].dtype, "broadcast");
  const size_t count = static_cast<size_t>(buffers[0].numel());
  if (count == 0) return;
  std::vector<std::vector<const void*>> touched;
  for (const TensorArg& b : buffers) touched.push_back({b.data});
  run_collective(devices, touched, [&](size_t i, ncclComm_t comm, cudaStream_t stream) {
    // In place (send == receive buffer): the root sends its buffer, the others receive into
    // theirs; no rank is handed another device's pointer.
    void* data = buffers[i].data;
    OCTO_NCCL_CHECK(ncclBroadcast(data, data, count, dtype, root, comm, stream));
  });
}

void reduce(const std::vector<TensorArg>& inputs, int root, const TensorArg& output) {
  const std::vector<int> devices = group_devices(inputs, root, "reduce");
  const TensorArg& at_root = inputs[static_cast<size_t>(root)];
  OCTO_CHECK_DEVICE(output.device.is_cuda() && output.device.index() == devices[size_t(root)],
                    "nccl::reduce: the output is on ", output.device,
                    " but must be on the root's device cuda:", devices[size_t(root)]);
  OCTO_CHECK_VALUE(
      output.dtype == at_root.dtype && output.numel() == at_root.numel() && output.is_contiguous(),
      "nccl::reduce: the output must be a contiguous buffer of ", at_root.numel(), " elements of ",
      at_root.dtype, ", got ", output.numel(), " of ", output.dtype);
  const ncclDataType_t dtype = nccl_dtype(at_root.dtype, "reduce");
  // bool: 0/1 bytes summed could give 2; the maximum is the logical or that Add means for bool.
  const ncclRedOp_t op = at_root.dtype == kBool ? ncclMax : ncclSum;
  const size_t count = static_cast<size_t>(at_root.numel());
  if (count == 0) return;
  std::vector<std::vector<const void*>> touched;
  for (const TensorArg& b : inputs) touched.push_back({b.data});
  if (output.data != at_root.data) touched[size_t(root)].push_back(output.data);
  run_collective(devices, touched, [&](size_t i, ncclComm_t comm, cudaStream_t stream) {
    // recvbuff is only used on the root.
    void* recv = static_cast<int>(i) == root ? output.data : nullptr;
    OCTO_NCCL_CHECK(ncclReduce(inputs[i].data, recv, count, dtype, op, root, comm, stream));
  });
}

}  // namespace octo::cuda::nccl
