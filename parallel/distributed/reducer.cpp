// The Reducer: buckets, post-accumulate hooks, in-order all-reduce launches, end-of-backward wait.
//
// Note [Bucket order]: MPI and NCCL match collectives by their order on a communicator, so every
// rank must launch the buckets' all-reduces in the same order whatever order its gradients
// arrive in. A bucket whose gradients are all in is launched only once every bucket before it
// has been; buckets are numbered in reverse parameter order, the order backward usually
// produces gradients in, so in the common case each bucket starts the moment it fills.
//
// Note [Bucket layout check]: before the first all-reduce of a layout every rank all-gathers its
// bucket sizes and dtypes and compares them with rank 0's; ranks that would all-reduce buffers
// of different sizes (a different bucket_cap_mb, a different model) stop with an error naming
// the first difference, instead of reading past a buffer or hanging.
#include "parallel/distributed/reducer.h"

#include <algorithm>
#include <unordered_set>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "core/trace.h"
#include "tensor/autograd_meta.h"
#include "tensor/factories.h"
#include "tensor/tensor_impl.h"

namespace octo::distributed {

namespace detail {

std::vector<std::vector<int64_t>> all_gather_ints(ProcessGroup& group,
                                                  const std::vector<int64_t>& mine) {
  const Device device = group.device();
  const TensorOptions opts{kInt64, device, false};
  auto gather = [&](const Tensor& in) {
    std::vector<Tensor> outs;
    for (int r = 0; r < group.size(); ++r) outs.push_back(empty(in.sizes(), opts));
    group.all_gather(outs, in)->wait();
    return outs;
  };
  Tensor len = full({1}, static_cast<int64_t>(mine.size()), opts);
  std::vector<Tensor> lens = gather(len);
  int64_t longest = 0;
  std::vector<int64_t> sizes;
  for (const Tensor& l : lens) {
    sizes.push_back(l.to(kCPU).item<int64_t>());
    longest = std::max(longest, sizes.back());
  }
  Tensor padded = zeros({std::max<int64_t>(longest, 1)}, {kInt64, kCPU, false});
  std::copy(mine.begin(), mine.end(), padded.data_ptr<int64_t>());
  std::vector<Tensor> all = gather(padded.to(device));
  std::vector<std::vector<int64_t>> out;
  for (size_t r = 0; r < all.size(); ++r) {
    Tensor host = all[r].to(kCPU);
    const int64_t* p = host.data_ptr<int64_t>();
    out.emplace_back(p, p + sizes[r]);
  }
  return out;
}

}  // namespace detail

std::vector<std::vector<size_t>> assign_buckets(const std::vector<Tensor>& params,
                                                int64_t cap_bytes) {
  std::vector<std::vector<size_t>> buckets;
  int64_t filled = 0;
  DType dtype = kFloat32;
  for (size_t k = params.size(); k-- > 0;) {
    const Tensor& p = params[k];
    int64_t bytes = static_cast<int64_t>(p.nbytes());
    bool fits = !buckets.empty() && p.dtype() == dtype && filled + bytes <= cap_bytes;
    if (!fits) {
      buckets.emplace_back();
      filled = 0;
      dtype = p.dtype();
    }
    buckets.back().push_back(k);
    filled += bytes;
  }
  return buckets;
}

Reducer::Reducer(std::vector<Tensor> params, std::vector<std::string> names,
                 std::shared_ptr<ProcessGroup> group, int64_t bucket_cap_bytes,
                 bool find_unused_parameters)
    : params_(std::move(params)),
      names_(std::move(names)),
      group_(std::move(group)),
      find_unused_(find_unused_parameters),
      ready_(params_.size(), false),
      used_(params_.size(), 0),
      unused_(params_.size(), false) {
  locate_.resize(params_.size());
  for (const auto& indices : assign_buckets(params_, bucket_cap_bytes)) {
    Bucket b;
    int64_t numel = 0;
    for (size_t i : indices) {
      locate_[i] = {buckets_.size(), b.params.size()};
      b.params.push_back(i);
      b.offsets.push_back(numel);
      numel += params_[i].numel();
    }
    b.flat = zeros({numel}, {params_[indices[0]].dtype(), params_[indices[0]].device(), false});
    buckets_.push_back(std::move(b));
  }
}

void Reducer::install_hooks() {
  std::weak_ptr<Reducer> weak = weak_from_this();
  for (size_t i = 0; i < params_.size(); ++i) {
    params_[i].register_post_accumulate_grad_hook([weak, i](Tensor&) {
      if (auto self = weak.lock()) self->on_gradient(i);
    });
  }
}

std::vector<std::vector<size_t>> Reducer::bucket_indices() const {
  std::vector<std::vector<size_t>> out;
  for (const Bucket& b : buckets_) out.push_back(b.params);
  return out;
}

void Reducer::check_layout_once() {
  if (layout_checked_) return;
  std::vector<int64_t> mine{static_cast<int64_t>(buckets_.size())};
  for (const Bucket& b : buckets_) {
    mine.push_back(b.flat.numel());
    mine.push_back(static_cast<int64_t>(b.flat.dtype()));
  }
  auto all = detail::all_gather_ints(*group_, mine);
  for (size_t r = 1; r < all.size(); ++r) {
    if (all[r] == all[0]) continue;
    size_t k = 0;
    while (k < std::min(all[r].size(), all[0].size()) && all[r][k] == all[0][k]) ++k;
    OCTO_THROW(DistributedError, "DistributedDataParallel: rank ", r,
               "'s gradient buckets differ from rank 0's (rank 0: ", all[0][0], " buckets, rank ",
               r, ": ", all[r][0], "; first difference at entry ", k,
               " of [count, numel, dtype, ...]: ", k < all[0].size() ? all[0][k] : -1, " vs ",
               k < all[r].size() ? all[r][k] : -1,
               "). Every rank must wrap the same model with the same bucket_cap_mb.");
  }
  layout_checked_ = true;
}

void Reducer::prepare_for_backward(const std::vector<Tensor>& outputs) {
  std::lock_guard<std::mutex> lock(mutex_);
  // A step that prepared but never ran backward leaves nothing behind unless buckets went out.
  OCTO_CHECK_T(
      DistributedError, next_bucket_ == 0 || !expect_sync_,
      "DistributedDataParallel: the previous forward's backward never finished its all-reduces (",
      next_bucket_, " of ", buckets_.size(),
      " buckets launched); call backward() on every synchronising forward's output, or run forwards that need no gradient under NoGradGuard");
  check_layout_once();
  expect_sync_ = true;
  finalize_queued_ = false;
  next_bucket_ = 0;
  std::fill(ready_.begin(), ready_.end(), false);
  std::fill(unused_.begin(), unused_.end(), false);
  for (Bucket& b : buckets_) {
    b.pending = b.params.size();
    b.work.reset();
  }
  if (!find_unused_) return;
  // Walk the outputs' graph; a parameter whose accumulator is not reached gets no gradient.
  std::unordered_set<const TensorImpl*> reached;
  std::vector<autograd::Node*> stack;
  std::unordered_set<autograd::Node*> seen;
  for (const Tensor& out : outputs) {
    autograd::Edge e = autograd::gradient_edge(out);
    if (e.valid() && seen.insert(e.node.get()).second) stack.push_back(e.node.get());
  }
  while (!stack.empty()) {
    autograd::Node* n = stack.back();
    stack.pop_back();
    if (auto* acc = dynamic_cast<autograd::AccumulateGrad*>(n))
      reached.insert(&acc->variable().impl());
    for (const autograd::Edge& e : n->next_edges())
      if (e.valid() && seen.insert(e.node.get()).second) stack.push_back(e.node.get());
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    if (reached.count(&params_[i].impl()) == 0) {
      unused_[i] = true;
      mark_ready(i, nullptr);
    }
  }
  launch_ready_buckets();
}

void Reducer::on_gradient(size_t index) {
  std::lock_guard<std::mutex> lock(mutex_);
  used_[index] = 1;
  if (!expect_sync_) return;  // no_sync(), or a backward without a synchronising forward
  OCTO_CHECK_T(
      DistributedError, !ready_[index], "DistributedDataParallel: parameter ", names_[index],
      " received its gradient twice in one step; run forward before each backward (a second backward over the same graph cannot be all-reduced again)");
  if (!finalize_queued_) {
    finalize_queued_ = true;
    std::weak_ptr<Reducer> weak = weak_from_this();
    autograd::queue_callback([weak] {
      if (auto self = weak.lock()) self->finalize();
    });
  }
  mark_ready(index, &params_[index]);
  launch_ready_buckets();
}

void Reducer::mark_ready(size_t index, const Tensor* param) {
  auto [bi, slot] = locate_[index];
  Bucket& b = buckets_[bi];
  Tensor view = b.flat.narrow(0, b.offsets[slot], params_[index].numel());
  NoGradGuard no_grad;
  Tensor g = param ? param->grad() : Tensor();
  if (g.defined())
    view.copy_(g.reshape({-1}));
  else
    view.zero_();
  ready_[index] = true;
  --b.pending;
}

void Reducer::launch_ready_buckets() {
  // Note [Bucket order]
  while (next_bucket_ < buckets_.size() && buckets_[next_bucket_].pending == 0) {
    Bucket& b = buckets_[next_bucket_];
    b.work = group_->all_reduce(b.flat, ReduceOp::Average);
    ++next_bucket_;
    ++buckets_reduced_;
  }
}

void Reducer::finalize() {
  std::lock_guard<std::mutex> lock(mutex_);
  expect_sync_ = false;
  if (next_bucket_ < buckets_.size()) {
    std::vector<std::string> missing;
    for (size_t i = 0; i < params_.size(); ++i)
      if (!ready_[i]) missing.push_back(names_[i]);
    if (!find_unused_) {
      next_bucket_ = 0;  // nothing of this step is in flight past the launched buckets
      for (Bucket& b : buckets_)
        if (b.work) b.work->wait();
      std::string list;
      for (const auto& n : missing) list += (list.empty() ? "" : ", ") + n;
      OCTO_THROW(
          DistributedError, "DistributedDataParallel: ", missing.size(),
          " parameters received no gradient in this backward pass: ", list,
          ". If forward does not use them on purpose, construct DistributedDataParallel with find_unused_parameters = true; otherwise make sure every output takes part in the loss.");
    }
    // Reached by the graph yet given no gradient (an op that returned none): zeros, like unused.
    for (size_t i = 0; i < params_.size(); ++i)
      if (!ready_[i]) mark_ready(i, nullptr);
    launch_ready_buckets();
  }
  std::shared_ptr<Work> used_work;
  Tensor used;
  if (find_unused_) {
    // Which parameters got a gradient on some rank since the last sync (Note: one extra small
    // all-reduce per step, only with find_unused_parameters).
    Tensor host = empty({static_cast<int64_t>(params_.size())}, {kInt32, kCPU, false});
    std::copy(used_.begin(), used_.end(), host.data_ptr<int32_t>());
    used = host.to(group_->device());
    used_work = group_->all_reduce(used, ReduceOp::Max);
  }
  next_bucket_ = 0;
  for (Bucket& b : buckets_) b.work->wait();
  std::vector<int32_t> global(params_.size(), 1);
  if (used_work) {
    used_work->wait();
    Tensor host = used.to(kCPU);
    std::copy(host.data_ptr<int32_t>(), host.data_ptr<int32_t>() + host.numel(), global.begin());
  }
  NoGradGuard no_grad;
  for (Bucket& b : buckets_) {
    for (size_t s = 0; s < b.params.size(); ++s) {
      size_t i = b.params[s];
      if (!global[i]) continue;  // no rank produced a gradient: .grad stays as it was
      const Tensor& p = params_[i];
      Tensor avg = b.flat.narrow(0, b.offsets[s], p.numel()).view(p.sizes());
      Tensor g = p.grad();
      if (g.defined())
        g.copy_(avg);
      else
        p.set_grad(avg.clone());
    }
  }
  std::fill(used_.begin(), used_.end(), 0);
}

}  // namespace octo::distributed
