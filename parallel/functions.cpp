// Broadcast, Scatter and Gather: forward through parallel::comm, backward beside it.
#include "parallel/functions.h"

#include "autograd/function.h"
#include "autograd/ops/indexing.h"
#include "core/device_worker.h"
#include "core/error.h"
#include "core/trace.h"
#include "parallel/comm.h"
#include "tensor/autograd_meta.h"
#include "tensor/factories.h"

namespace octo::parallel {

using autograd::TensorList;

namespace {

/// comm::reduce_add_coalesced on the tape (PyTorch's ReduceAddCoalesced): `per_device` is
/// [device][tensor], the sums land on devices[0]. Its backward broadcasts the gradients back to
/// every device, so Broadcast's backward is itself differentiable and double backward works
/// through replicate (Note [create_graph] in autograd/engine.cpp).
TensorList reduce_add_recorded(const std::vector<std::vector<Tensor>>& per_device,
                               const std::vector<Device>& devices) {
  TensorList sums = comm::reduce_add_coalesced(per_device, devices[0]);
  TensorList inputs;
  for (const auto& row : per_device) inputs.insert(inputs.end(), row.begin(), row.end());
  if (!autograd::needs_grad(inputs)) return sums;
  const size_t n = sums.size();
  return autograd::record_multi(
      "ReduceAddCoalesced", sums, inputs, {},
      [n, devices](const TensorList& grads, const TensorList&) -> TensorList {
        TensorList out(n * devices.size());
        TensorList arrived;
        std::vector<size_t> where;
        for (size_t j = 0; j < n; ++j) {
          if (!grads[j].defined()) continue;
          arrived.push_back(grads[j]);
          where.push_back(j);
        }
        if (arrived.empty()) return out;
        auto copies = Broadcast::apply(arrived, devices);
        for (size_t d = 0; d < devices.size(); ++d)
          for (size_t k = 0; k < where.size(); ++k) out[d * n + where[k]] = copies[d][k];
        return out;
      });
}

/// Backward of Broadcast: grads are [device][tensor] flattened; sum each tensor's gradients on
/// devices[0]. Gradients that never arrived (a replica that did not use a parameter) are skipped.
autograd::FunctionNode::BackwardFn reduce_add_backward(size_t n_tensors,
                                                       std::vector<Device> devices) {
  return [n_tensors, devices](const TensorList& grads, const TensorList&) -> TensorList {
    size_t n_devices = grads.size() / n_tensors;
    std::vector<std::vector<Tensor>> per_device(n_devices);
    for (size_t d = 0; d < n_devices; ++d)
      per_device[d].assign(grads.begin() + static_cast<int64_t>(d * n_tensors),
                           grads.begin() + static_cast<int64_t>((d + 1) * n_tensors));
    return reduce_add_recorded(per_device, devices);
  };
}

void check_broadcast_inputs(const std::vector<Tensor>& tensors,
                            const std::vector<Device>& devices) {
  OCTO_CHECK_VALUE(!devices.empty(), "Broadcast: expected at least one device");
  for (size_t j = 0; j < tensors.size(); ++j)
    OCTO_CHECK_DEVICE(tensors[j].device() == devices[0], "Broadcast: tensor ", j, " is on ",
                      tensors[j].device(), " but must be on devices[0] = ", devices[0]);
}

}  // namespace

std::vector<std::vector<Tensor>> Broadcast::apply(const std::vector<Tensor>& tensors,
                                                  const std::vector<Device>& devices) {
  check_broadcast_inputs(tensors, devices);
  auto copies = comm::broadcast_coalesced(tensors, devices);
  // devices[0]'s entries are the inputs themselves: give them their own handles (aliases) so the
  // Broadcast node can own them as outputs.
  std::vector<std::vector<Tensor>> out(devices.size());
  for (size_t i = 0; i < devices.size(); ++i)
    for (const Tensor& t : copies[i]) out[i].push_back(t.detach());
  apply_into(tensors, devices, out);
  return out;
}

void Broadcast::apply_into(const std::vector<Tensor>& tensors, const std::vector<Device>& devices,
                           const std::vector<std::vector<Tensor>>& dst) {
  check_broadcast_inputs(tensors, devices);
  OCTO_INTERNAL_ASSERT(dst.size() == devices.size());
  TensorList outs;
  for (size_t i = 0; i < devices.size(); ++i) {
    OCTO_INTERNAL_ASSERT(dst[i].size() == tensors.size());
    for (const Tensor& t : dst[i]) {
      // Forget any history from an earlier step before joining this node.
      if (auto& meta = t.impl().autograd) {
        meta->grad_fn = nullptr;
        meta->requires_grad = false;
      }
      outs.push_back(t);
    }
  }
  if (!autograd::needs_grad(tensors)) return;
  autograd::record_multi("Broadcast", outs, tensors, {},
                         reduce_add_backward(tensors.size(), devices));
}

std::vector<Tensor> Scatter::apply(const Tensor& x, const std::vector<Device>& devices,
                                   const std::optional<Shape>& chunk_sizes, int64_t dim) {
  TensorList pieces = comm::scatter(x, devices, chunk_sizes, dim);
  Shape sizes;
  std::vector<Device> used;
  int64_t d = detail::wrap_dim(dim, x.dim(), "Scatter");
  for (const Tensor& p : pieces) {
    sizes.push_back(p.size(d));
    used.push_back(p.device());
  }
  Device source = x.device();
  return autograd::record_multi(
      "Scatter", pieces, {x}, {},
      [sizes, used, source, d](const TensorList& grads, const TensorList&) -> TensorList {
        const Tensor* ref = nullptr;
        for (const Tensor& g : grads)
          if (g.defined()) ref = &g;
        if (!ref) return {Tensor()};
        TensorList full(grads.begin(), grads.end());
        for (size_t i = 0; i < full.size(); ++i) {
          if (full[i].defined()) continue;
          Shape shape = ref->sizes();  // a piece that got no gradient contributes zeros
          shape[static_cast<size_t>(d)] = sizes[i];
          full[i] = zeros(shape, {.dtype = ref->dtype(), .device = used[i]});
        }
        return {Gather::apply(full, source, d)};  // recorded: twice differentiable
      });
}

Tensor Gather::apply(const std::vector<Tensor>& pieces, Device destination, int64_t dim) {
  Tensor out = comm::gather(pieces, destination, dim);
  int64_t d = detail::wrap_dim(dim, pieces.at(0).dim(), "Gather");
  Shape sizes;
  std::vector<Device> devices;
  for (const Tensor& p : pieces) {
    sizes.push_back(p.size(d));
    devices.push_back(p.device());
  }
  return autograd::record(
      "Gather", out, pieces, {},
      [sizes, devices, d](const TensorList& g, const TensorList&) -> TensorList {
        // Runs inside the engine, possibly on a device worker: copy
        // inline, no hops to other workers (Note [Nested device work]).
        TensorList parts = split_with_sizes(g[0], sizes, d);
        TensorList out(parts.size());
        for (size_t i = 0; i < parts.size(); ++i) {
          TraceSpan span("scatter_grad", devices[i]);
          out[i] = parts[i].to(devices[i]);
          span.add_bytes(static_cast<int64_t>(parts[i].nbytes()));
        }
        return out;
      });
}

}  // namespace octo::parallel
