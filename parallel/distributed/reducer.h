// The Reducer: DistributedDataParallel's gradient buckets, the hooks that fill them and the
// all-reduces that start as soon as a bucket is full (see docs/internals/ddp.md).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "parallel/distributed/process_group.h"

namespace octo::distributed {

namespace detail {
/// Every rank's `mine` (lengths may differ), gathered through the group's device.
std::vector<std::vector<int64_t>> all_gather_ints(ProcessGroup& group,
                                                  const std::vector<int64_t>& mine);
}  // namespace detail

/// A bucket: parameters (indices into the reducer's list) whose gradients travel as one flat
/// buffer, in one all-reduce.
struct Bucket {
  std::vector<size_t> params;
  std::vector<int64_t> offsets;  // each parameter's first element in `flat`
  Tensor flat;                   // every gradient of the bucket, back to back
  size_t pending = 0;            // gradients still to arrive this step
  std::shared_ptr<Work> work;    // the all-reduce, once launched
};

/// Assigns parameters to buckets of at most cap_bytes each (a parameter larger than the cap gets
/// a bucket of its own), walking them in reverse order, the order backward produces their
/// gradients in; a bucket holds one dtype. Returns the parameter indices per bucket.
std::vector<std::vector<size_t>> assign_buckets(const std::vector<Tensor>& params,
                                                int64_t cap_bytes);

class Reducer : public std::enable_shared_from_this<Reducer> {
 public:
  Reducer(std::vector<Tensor> params, std::vector<std::string> names,
          std::shared_ptr<ProcessGroup> group, int64_t bucket_cap_bytes,
          bool find_unused_parameters);
  /// Registers the post-accumulate hooks (needs shared_from_this, so not in the constructor).
  void install_hooks();

  /// Called by forward when the coming backward must synchronise: resets the buckets and, with
  /// find_unused_parameters, marks every parameter the outputs' graph does not reach as ready.
  void prepare_for_backward(const std::vector<Tensor>& outputs);
  /// Parameter indices per bucket.
  std::vector<std::vector<size_t>> bucket_indices() const;
  /// all-reduces launched since construction (for tests and the trace).
  int64_t buckets_reduced() const { return buckets_reduced_; }

 private:
  void on_gradient(size_t index);
  void mark_ready(size_t index, const Tensor* grad);
  void launch_ready_buckets();
  void finalize();
  void check_layout_once();

  std::vector<Tensor> params_;
  std::vector<std::string> names_;
  std::shared_ptr<ProcessGroup> group_;
  bool find_unused_;
  std::vector<Bucket> buckets_;
  std::vector<std::pair<size_t, size_t>> locate_;  // parameter -> (bucket, slot)

  std::mutex mutex_;
  bool expect_sync_ = false;      // a synchronising backward is due (forward prepared it)
  bool finalize_queued_ = false;  // the end-of-backward callback is queued
  bool layout_checked_ = false;   // Note [Bucket layout check]
  size_t next_bucket_ = 0;        // buckets launch strictly in order, the same on every rank
  std::vector<bool> ready_;       // per parameter, this step
  std::vector<int32_t> used_;     // per parameter: got a gradient since the last sync
  std::vector<bool> unused_;      // per parameter: not reached by this step's graph
  int64_t buckets_reduced_ = 0;
};

}  // namespace octo::distributed
