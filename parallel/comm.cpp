// Collective copies between devices. CPU devices copy through host memory, each device's copies
// on its own worker; CUDA devices use the same paths (peer copies) until NCCL paths exist.
#include "parallel/comm.h"

#include "autograd/grad_mode.h"
#include "autograd/ops/elementwise.h"
#include "autograd/ops/indexing.h"
#include "core/device_worker.h"
#include "core/error.h"
#include "core/trace.h"

namespace octo::parallel::comm {

std::vector<Tensor> broadcast(const Tensor& tensor, const std::vector<Device>& devices) {
  auto out = broadcast_coalesced({tensor}, devices);
  std::vector<Tensor> flat;
  for (auto& per_device : out) flat.push_back(per_device[0]);
  return flat;
}

std::vector<std::vector<Tensor>> broadcast_coalesced(const std::vector<Tensor>& tensors,
                                                     const std::vector<Device>& devices) {
  OCTO_CHECK_VALUE(!devices.empty(), "broadcast: expected at least one device");
  std::vector<std::vector<Tensor>> out(devices.size());
  run_on_devices(devices, [&](size_t i) {
    NoGradGuard no_grad;
    TraceSpan span("broadcast", devices[i]);
    out[i].reserve(tensors.size());
    for (const Tensor& t : tensors) {
      out[i].push_back(t.device() == devices[i] ? t : t.to(devices[i]));
      if (t.device() != devices[i]) span.add_bytes(t.nbytes());
    }
  });
  return out;
}

Tensor reduce_add(const std::vector<Tensor>& inputs, Device destination) {
  std::vector<std::vector<Tensor>> per_device;
  for (const Tensor& t : inputs) per_device.push_back({t});
  return reduce_add_coalesced(per_device, destination).at(0);
}

std::vector<Tensor> reduce_add_coalesced(const std::vector<std::vector<Tensor>>& inputs,
                                         Device destination) {
  // inputs is [device][tensor]; sums run on the destination's worker.
  OCTO_CHECK_VALUE(!inputs.empty(), "reduce_add: expected inputs from at least one device");
  size_t n = inputs[0].size();
  for (const auto& per_device : inputs)
    OCTO_CHECK_VALUE(per_device.size() == n, "reduce_add: every device must contribute ", n,
                     " tensors, got ", per_device.size());
  // Runs on the calling thread: it is Broadcast's backward, which the engine runs on
  // destination's worker (Note [Engine threads]: no hops to other workers from backward).
  std::vector<Tensor> out(n);
  {
    NoGradGuard no_grad;
    TraceSpan span("reduce_add", destination);
    for (size_t j = 0; j < n; ++j) {
      Tensor acc;
      for (const auto& per_device : inputs) {
        const Tensor& t = per_device[j];
        if (!t.defined()) continue;
        if (acc.defined()) {
          OCTO_CHECK_VALUE(t.sizes() == acc.sizes(),
                           "reduce_add: tensors must have the same "
                           "shape, got ",
                           acc.sizes(), " and ", t.sizes());
        }
        Tensor here = t.to(destination);
        if (t.device() != destination) span.add_bytes(t.nbytes());
        // Never accumulate into an input: the first one is copied unless it was moved already.
        if (!acc.defined()) {
          acc = here.is_alias_of(t) ? here.clone() : here;
        } else {
          acc.add_(here);
        }
      }
      out[j] = acc;
    }
  }
  return out;
}

std::vector<Tensor> scatter(const Tensor& tensor, const std::vector<Device>& devices,
                            const std::optional<Shape>& chunk_sizes, int64_t dim) {
  OCTO_CHECK_VALUE(!devices.empty(), "scatter: expected at least one device");
  NoGradGuard no_grad;
  std::vector<Tensor> pieces;
  if (chunk_sizes) {
    OCTO_CHECK_VALUE(chunk_sizes->size() == devices.size(), "scatter: got ", chunk_sizes->size(),
                     " chunk sizes for ", devices.size(), " devices");
    pieces = split_with_sizes(tensor, *chunk_sizes, dim);
  } else {
    pieces = chunk(tensor, static_cast<int64_t>(devices.size()), dim);
  }
  std::vector<Device> used(devices.begin(), devices.begin() + static_cast<int64_t>(pieces.size()));
  std::vector<Tensor> out(pieces.size());
  run_on_devices(used, [&](size_t i) {
    NoGradGuard inner;
    TraceSpan span("scatter", used[i]);
    // contiguous() so each device gets its own compact chunk even when it stays put.
    out[i] = pieces[i].to(used[i]).contiguous();
    span.add_bytes(pieces[i].nbytes());
  });
  return out;
}

Tensor gather(const std::vector<Tensor>& tensors, Device destination, int64_t dim) {
  OCTO_CHECK_VALUE(!tensors.empty(), "gather: expected at least one tensor");
  NoGradGuard no_grad;
  const Tensor& first = tensors[0];
  int64_t d = detail::wrap_dim(dim, first.dim(), "gather");
  for (size_t i = 1; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    bool ok = t.dim() == first.dim();
    for (int64_t k = 0; ok && k < t.dim(); ++k) ok = k == d || t.size(k) == first.size(k);
    OCTO_CHECK_VALUE(ok, "gather: outputs of all replicas must have the same shape except in dim ",
                     d, ", but replica 0 returned ", first.sizes(), " and replica ", i,
                     " returned ", t.sizes());
  }
  std::vector<Tensor> moved(tensors.size());
  TraceSpan span("gather", destination);
  for (size_t i = 0; i < tensors.size(); ++i) {
    moved[i] = tensors[i].to(destination);
    if (tensors[i].device() != destination) span.add_bytes(tensors[i].nbytes());
  }
  return cat(moved, d);
}

}  // namespace octo::parallel::comm
