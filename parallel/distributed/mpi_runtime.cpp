// MPI: the job's bootstrap (rank, size, local rank) and ProcessGroupMPI, whose collectives run as
// non-blocking MPI calls progressed by one thread per group, each bounded by the group's timeout.
//
// Note [MPI progress thread]: MPI moves a non-blocking collective forward only inside MPI calls,
// so a collective started from a backward hook would not advance while backward computes. Each
// group therefore owns a thread that takes its collectives in order, starts each (MPI_I*) and
// polls it with MPI_Testall, sleeping between polls (at most kMaxPollSleep, so a poll costs next
// to nothing beside the compute threads). A collective still incomplete after the timeout fails
// with a DistributedError naming it, and the group is marked broken: MPI cannot cancel a
// collective, so the ranks no longer agree on what comes next and every later collective fails at
// once with the first error. Each group works on its own duplicate of MPI_COMM_WORLD.
#include <mpi.h>

#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "core/half.h"
#include "core/trace.h"
#include "parallel/distributed/process_group.h"
#include "tensor/factories.h"

namespace octo::distributed {

namespace {

constexpr auto kMaxPollSleep = std::chrono::microseconds(200);
/// Extra time a waiting caller grants the progress thread beyond the collectives' own timeouts.
constexpr auto kWaitGrace = std::chrono::seconds(5);

void check_mpi(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  OCTO_THROW(DistributedError, what, " failed: ", std::string(text, static_cast<size_t>(len)));
}

// --- 16-bit reductions: MPI has no bfloat16/float16, so they travel as 16-bit words and reduce
// through user-defined ops that accumulate in float32.
template <typename H, int Kind>  // Kind: 0 sum, 1 max, 2 min
void reduce16(void* in, void* inout, int* len, MPI_Datatype*) {
  auto* a = static_cast<H*>(in);
  auto* b = static_cast<H*>(inout);
  for (int i = 0; i < *len; ++i) {
    float x = a[i], y = b[i];
    b[i] = H(Kind == 0 ? x + y : Kind == 1 ? (x > y ? x : y) : (x < y ? x : y));
  }
}

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case kFloat32:
      return MPI_FLOAT;
    case kFloat64:
      return MPI_DOUBLE;
    case kInt64:
      return MPI_INT64_T;
    case kInt32:
      return MPI_INT32_T;
    case kUInt8:
      return MPI_UINT8_T;
    case kBool:
      return MPI_C_BOOL;
    case kBFloat16:
    case kFloat16:
      return MPI_UINT16_T;
  }
  return MPI_BYTE;
}

MPI_Op mpi_op(ReduceOp op, DType t) {
  if (t == kBool) return op == ReduceOp::Min ? MPI_LAND : MPI_LOR;
  if (is_half(t)) {
    static MPI_Op ops[2][3];
    static std::once_flag once;
    std::call_once(once, [] {
      MPI_Op_create(&reduce16<BFloat16, 0>, 1, &ops[0][0]);
      MPI_Op_create(&reduce16<BFloat16, 1>, 1, &ops[0][1]);
      MPI_Op_create(&reduce16<BFloat16, 2>, 1, &ops[0][2]);
      MPI_Op_create(&reduce16<Float16, 0>, 1, &ops[1][0]);
      MPI_Op_create(&reduce16<Float16, 1>, 1, &ops[1][1]);
      MPI_Op_create(&reduce16<Float16, 2>, 1, &ops[1][2]);
    });
    int kind = op == ReduceOp::Max ? 1 : op == ReduceOp::Min ? 2 : 0;
    return ops[t == kFloat16][kind];
  }
  return op == ReduceOp::Max ? MPI_MAX : op == ReduceOp::Min ? MPI_MIN : MPI_SUM;
}

/// t /= n in place (ReduceOp::Average after the sum), on the progress thread.
void divide(const Tensor& t, int n) {
  int64_t count = t.numel();
  auto run = [&](auto* p) {
    using T = std::remove_pointer_t<decltype(p)>;
    for (int64_t i = 0; i < count; ++i) p[i] = T(float(p[i]) / float(n));
  };
  if (t.dtype() == kFloat64) {
    double* p = t.data_ptr<double>();
    for (int64_t i = 0; i < count; ++i) p[i] /= n;
  } else if (t.dtype() == kFloat32) {
    float* p = t.data_ptr<float>();
    for (int64_t i = 0; i < count; ++i) p[i] /= static_cast<float>(n);
  } else if (t.dtype() == kBFloat16) {
    run(t.data_ptr<BFloat16>());
  } else if (t.dtype() == kFloat16) {
    run(t.data_ptr<Float16>());
  }
}

int to_count(int64_t n, const char* op) {
  OCTO_CHECK_VALUE(n <= INT32_MAX, op, ": ", n, " elements is more than MPI's count limit (",
                   INT32_MAX, "); split the tensor");
  return static_cast<int>(n);
}

class MpiWork : public Work {
 public:
  using Start = std::function<void(std::vector<MPI_Request>&)>;
  MpiWork(std::string what, Start start, std::function<void()> finish,
          std::chrono::steady_clock::time_point wait_deadline)
      : what(std::move(what)),
        start(std::move(start)),
        finish(std::move(finish)),
        wait_deadline_(wait_deadline) {}

  bool is_completed() override {
    std::lock_guard<std::mutex> lock(mutex_);
    return done_;
  }
  void wait() override {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!cv_.wait_until(lock, wait_deadline_, [&] { return done_; })) {
      OCTO_THROW(DistributedError, what,
                 ": the MPI progress thread did not report back in time (wait bound passed)");
    }
    if (error_) std::rethrow_exception(error_);
  }
  void complete(std::exception_ptr error) {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
    error_ = std::move(error);
    cv_.notify_all();
  }

  const std::string what;
  Start start;
  std::function<void()> finish;

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::exception_ptr error_;
  std::chrono::steady_clock::time_point wait_deadline_;
};

class ProcessGroupMPI final : public ProcessGroup {
 public:
  ProcessGroupMPI(int rank, int size, std::chrono::milliseconds timeout)
      : ProcessGroup(rank, size, timeout) {
    check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup");
    thread_ = std::thread([this] { loop(); });
  }
  ~ProcessGroupMPI() override { shutdown(); }

  void shutdown() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopping_) return;
      stopping_ = true;
      cv_.notify_all();
    }
    thread_.join();  // runs what is queued (each bounded by the timeout), then ends
    // A broken group still has a collective in flight; freeing its communicator could block.
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!broken_ && !finalized) MPI_Comm_free(&comm_);
  }

  std::string backend_name() const override { return "mpi"; }
  Device device() const override { return kCPU; }

  std::shared_ptr<Work> all_reduce(Tensor& t, ReduceOp op) override {
    check_tensor("all_reduce", t);
    OCTO_CHECK_VALUE(op != ReduceOp::Average || t.is_floating_point(),
                     "all_reduce: ReduceOp::Average needs a floating-point tensor, got ",
                     t.dtype());
    int count = to_count(t.numel(), "all_reduce");
    int n = size();
    return enqueue(
        detail::describe("all_reduce", t.numel(), t.dtype()) + " (" + reduce_op_name(op) + ")",
        [this, t, op, count](std::vector<MPI_Request>& reqs) {
          reqs.emplace_back();
          check_mpi(MPI_Iallreduce(MPI_IN_PLACE, t.raw_data(), count, mpi_type(t.dtype()),
                                   mpi_op(op, t.dtype()), comm_, &reqs.back()),
                    "MPI_Iallreduce");
        },
        [t, op, n] {
          if (op == ReduceOp::Average) divide(t, n);
        },
        t.nbytes());
  }

  std::shared_ptr<Work> broadcast(Tensor& t, int root) override {
    check_tensor("broadcast", t);
    OCTO_CHECK_INDEX(root >= 0 && root < size(), "broadcast: root ", root,
                     " is not a rank of a group of ", size());
    int count = to_count(t.numel(), "broadcast");
    return enqueue(
        detail::describe("broadcast", t.numel(), t.dtype()) + " from rank " + std::to_string(root),
        [this, t, root, count](std::vector<MPI_Request>& reqs) {
          reqs.emplace_back();
          check_mpi(MPI_Ibcast(t.raw_data(), count, mpi_type(t.dtype()), root, comm_, &reqs.back()),
                    "MPI_Ibcast");
        },
        nullptr, t.nbytes());
  }

  std::shared_ptr<Work> all_gather(std::vector<Tensor>& outputs, const Tensor& input) override {
    check_tensor("all_gather", input);
    check_per_rank("all_gather", "output", outputs, input);
    int count = to_count(input.numel(), "all_gather");
    Shape flat_shape{static_cast<int64_t>(size()) * input.numel()};
    Tensor flat = empty(flat_shape, {input.dtype(), input.device(), false});
    return enqueue(
        detail::describe("all_gather", input.numel(), input.dtype()),
        [this, flat, input, count](std::vector<MPI_Request>& reqs) {
          reqs.emplace_back();
          MPI_Datatype type = mpi_type(input.dtype());
          check_mpi(MPI_Iallgather(input.raw_data(), count, type, flat.raw_data(), count, type,
                                   comm_, &reqs.back()),
                    "MPI_Iallgather");
        },
        [flat, outputs, input] {
          size_t bytes = input.nbytes();
          for (size_t r = 0; r < outputs.size(); ++r)
            std::memcpy(outputs[r].raw_data(), static_cast<char*>(flat.raw_data()) + r * bytes,
                        bytes);
        },
        input.nbytes());
  }

  std::shared_ptr<Work> reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs,
                                       ReduceOp op) override {
    check_tensor("reduce_scatter", output);
    check_per_rank("reduce_scatter", "input", inputs, output);
    OCTO_CHECK_VALUE(op != ReduceOp::Average || output.is_floating_point(),
                     "reduce_scatter: ReduceOp::Average needs a floating-point tensor, got ",
                     output.dtype());
    Tensor flat = empty({static_cast<int64_t>(size()) * output.numel()},
                        {output.dtype(), output.device(), false});
    size_t bytes = output.nbytes();
    for (size_t r = 0; r < inputs.size(); ++r) {
      std::memcpy(static_cast<char*>(flat.raw_data()) + r * bytes, inputs[r].raw_data(), bytes);
    }
    int count = to_count(output.numel(), "reduce_scatter");
    int n = size();
    return enqueue(
        detail::describe("reduce_scatter", output.numel(), output.dtype()),
        [this, flat, output, op, count](std::vector<MPI_Request>& reqs) {
          reqs.emplace_back();
          check_mpi(MPI_Ireduce_scatter_block(flat.raw_data(), output.raw_data(), count,
                                              mpi_type(output.dtype()), mpi_op(op, output.dtype()),
                                              comm_, &reqs.back()),
                    "MPI_Ireduce_scatter_block");
        },
        [output, op, n] {
          if (op == ReduceOp::Average) divide(output, n);
        },
        output.nbytes());
  }

  std::shared_ptr<Work> barrier() override {
    return enqueue(
        "barrier",
        [this](std::vector<MPI_Request>& reqs) {
          reqs.emplace_back();
          check_mpi(MPI_Ibarrier(comm_, &reqs.back()), "MPI_Ibarrier");
        },
        nullptr, 0);
  }

 private:
  std::shared_ptr<Work> enqueue(std::string what, MpiWork::Start start,
                                std::function<void()> finish, size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    OCTO_CHECK_T(DistributedError, !stopping_, what, " on rank ", rank(),
                 ": the process group was shut down (destroy_process_group)");
    // Each queued collective ends within the timeout of its own start, so a caller's wait is
    // bounded by the queue ahead of it.
    auto bound = timeout() * static_cast<int64_t>(queue_.size() + 2) + kWaitGrace;
    auto work = std::make_shared<MpiWork>(std::move(what), std::move(start), std::move(finish),
                                          std::chrono::steady_clock::now() + bound);
    queue_.push_back({work, static_cast<int64_t>(bytes)});
    cv_.notify_all();
    return work;
  }

  void loop() {
    while (true) {
      Item item;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping, nothing left
        item = std::move(queue_.front());
        queue_.pop_front();
      }
      item.work->complete(run(*item.work, item.bytes));
    }
  }

  std::exception_ptr run(MpiWork& work, int64_t bytes) {
    if (broken_) {
      return std::make_exception_ptr(
          DistributedError(work.what + " on rank " + std::to_string(rank()) +
                           ": the process group is broken by an earlier failure: " + first_error_));
    }
    TraceSpan span(work.what.substr(0, work.what.find(" of ")), kCPU, "comm");
    span.add_bytes(bytes);
    try {
      std::vector<MPI_Request> reqs;
      work.start(reqs);
      auto begin = std::chrono::steady_clock::now();
      auto sleep = std::chrono::microseconds(1);
      while (true) {
        int flag = 0;
        check_mpi(
            MPI_Testall(static_cast<int>(reqs.size()), reqs.data(), &flag, MPI_STATUSES_IGNORE),
            "MPI_Testall");
        if (flag) break;
        auto waited = std::chrono::steady_clock::now() - begin;
        if (waited > timeout()) {
          first_error_ =
              work.what + " did not complete within " + std::to_string(timeout().count()) +
              " ms on rank " + std::to_string(rank()) + " of " + std::to_string(size()) +
              " (mpi): another rank did not take part (it skipped this collective, issued collectives in another order, or stopped)";
          broken_ = true;
          return std::make_exception_ptr(DistributedError(first_error_));
        }
        std::this_thread::sleep_for(sleep);
        sleep = std::min(sleep * 2,
                         std::chrono::duration_cast<std::chrono::microseconds>(kMaxPollSleep));
      }
      if (work.finish) work.finish();
      return nullptr;
    } catch (...) {
      return std::current_exception();
    }
  }

  struct Item {
    std::shared_ptr<MpiWork> work;
    int64_t bytes = 0;
  };
  MPI_Comm comm_ = MPI_COMM_NULL;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  bool stopping_ = false;
  // Touched by the progress thread only.
  bool broken_ = false;
  std::string first_error_;
  std::thread thread_;
};

}  // namespace

std::shared_ptr<ProcessGroup> new_mpi_group(std::chrono::milliseconds timeout) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  OCTO_CHECK_T(DistributedError, initialized,
               "new_mpi_group: MPI is not initialised; call init_process_group() first");
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return std::make_shared<ProcessGroupMPI>(rank, size, timeout);
}

namespace detail {

bool mpi_available() { return true; }

RankInfo mpi_init() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
    OCTO_CHECK_T(
        DistributedError, provided >= MPI_THREAD_MULTIPLE,
        "init_process_group: this MPI library does not provide MPI_THREAD_MULTIPLE (got level ",
        provided, "); octo's process groups call MPI from their own threads");
  }
  // Errors come back as codes (and then as DistributedError) instead of ending the job.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  RankInfo info;
  MPI_Comm_rank(MPI_COMM_WORLD, &info.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &info.world_size);
  MPI_Comm local;
  check_mpi(
      MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, info.rank, MPI_INFO_NULL, &local),
      "MPI_Comm_split_type");
  MPI_Comm_rank(local, &info.local_rank);
  MPI_Comm_size(local, &info.local_size);
  MPI_Comm_free(&local);
  char name[MPI_MAX_PROCESSOR_NAME];
  int len = 0;
  MPI_Get_processor_name(name, &len);
  info.hostname.assign(name, static_cast<size_t>(len));
  return info;
}

void mpi_finalize() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

void mpi_abort(int code) { MPI_Abort(MPI_COMM_WORLD, code); }

void bootstrap_broadcast(void* data, size_t bytes, std::chrono::milliseconds timeout) {
  MPI_Request req;
  check_mpi(MPI_Ibcast(data, static_cast<int>(bytes), MPI_BYTE, 0, MPI_COMM_WORLD, &req),
            "MPI_Ibcast");
  auto begin = std::chrono::steady_clock::now();
  while (true) {
    int flag = 0;
    check_mpi(MPI_Test(&req, &flag, MPI_STATUS_IGNORE), "MPI_Test");
    if (flag) return;
    OCTO_CHECK_T(DistributedError, std::chrono::steady_clock::now() - begin < timeout,
                 "bootstrap broadcast of ", bytes,
                 " bytes (the NCCL unique id) did not complete within ", timeout.count(),
                 " ms: another rank did not start its process group");
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

}  // namespace detail

}  // namespace octo::distributed
