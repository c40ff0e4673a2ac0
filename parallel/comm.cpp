// Collective copies between devices. CPU devices (and groups mixing CPU and CUDA) copy through
// host memory or peer copies, each device's copies on its own worker; groups of distinct CUDA
// devices broadcast and reduce through NCCL (Note [NCCL in comm]).
#include "parallel/comm.h"

#include <cstdlib>
#include <map>
#include <numeric>
#include <set>
#include <string_view>

#include "autograd/grad_mode.h"
#include "autograd/ops/elementwise.h"
#include "autograd/ops/indexing.h"
#include "core/device_worker.h"
#include "core/error.h"
#include "core/trace.h"
#include "kernels/collectives.h"

namespace octo::parallel::comm {

// Note [NCCL in comm]: broadcast_coalesced and reduce_add_coalesced use NCCL
// (kernels/collectives.h) when more than one device is involved, every device is a distinct CUDA
// device, NCCL is available and the environment variable OCTO_NCCL is not "0"; otherwise they copy,
// as on CPU devices. Like torch.cuda.comm, tensors are packed per dtype, in order, into flat
// buffers of at most kBufferBytes (a larger tensor travels alone), and one collective moves each
// buffer. Even a lone tensor is packed: NCCL gets fresh allocations only, as kernels/collectives.h
// requires. On the receiving side a buffer holding one tensor becomes that tensor (a view of the
// whole buffer); the tensors of a shared buffer are copied out of it rather than viewed. Views
// would share one Storage and so one version counter (Note [Version counter]): an in-place op on
// one result would make autograd reject the others, and record_stream needs each tensor's storage
// to start an allocation. The results equal the copy path's: same values (sums of more than two
// floating-point tensors may round differently, NCCL adds in its own order), contiguous,
// storages of their own, no autograd history; the source's entries are the inputs themselves.
// All of it is queued without blocking the host: packing and unpacking on the calling thread's
// current streams, the collectives on NCCL's streams ordered against them.

namespace {
constexpr int64_t kBufferBytes = int64_t(10) << 20;  // bytes per packed buffer (10 MiB)

/// NCCL may be used: it is available and OCTO_NCCL is not "0" (read at every call).
bool nccl_enabled() {
  const char* env = std::getenv("OCTO_NCCL");
  if (env != nullptr && std::string_view(env) == "0") return false;
  return cuda::nccl::is_available();
}

/// True when every device is a CUDA device and none appears twice.
bool distinct_cuda(const std::vector<Device>& devices) {
  std::set<int> seen;
  for (Device d : devices)
    if (!d.is_cuda() || d.index() < 0 || !seen.insert(d.index()).second) return false;
  return true;
}

/// Tensors of one dtype that travel in one flat buffer.
struct Chunk {
  DType dtype = kFloat32;
  std::vector<size_t> members;  // indices into the row, in order
  int64_t numel = 0;
};

/// Groups row[j] for j in `which` by dtype, keeping their order, into chunks of at most
/// kBufferBytes; a tensor larger than that gets a chunk of its own.
std::vector<Chunk> make_chunks(const std::vector<Tensor>& row, const std::vector<size_t>& which) {
  std::vector<Chunk> chunks;
  std::map<DType, Chunk> open;
  for (size_t j : which) {
    const Tensor& t = row[j];
    auto it = open.find(t.dtype());
    if (it != open.end() && (it->second.numel + t.numel()) * int64_t(t.itemsize()) > kBufferBytes) {
      chunks.push_back(std::move(it->second));
      open.erase(it);
      it = open.end();
    }
    if (it == open.end()) it = open.emplace(t.dtype(), Chunk{t.dtype(), {}, 0}).first;
    it->second.members.push_back(j);
    it->second.numel += t.numel();
  }
  for (auto& entry : open) chunks.push_back(std::move(entry.second));
  return chunks;
}

/// A fresh flat buffer on `device` holding the chunk's tensors of `row`, one after another.
Tensor pack(const std::vector<Tensor>& row, const Chunk& chunk, Device device) {
  Tensor flat = octo::detail::make_empty({chunk.numel}, chunk.dtype, device);
  int64_t offset = 0;
  for (size_t j : chunk.members) {
    const Tensor& t = row[j];
    flat.narrow(0, offset, t.numel()).view(t.sizes()).copy_(t);
    offset += t.numel();
  }
  return flat;
}

/// Writes out[j] for the chunk's members from `flat`, shaped like like[j] (Note [NCCL in comm]).
void unpack(const Tensor& flat, const std::vector<Tensor>& like, const Chunk& chunk,
            std::vector<Tensor>& out) {
  if (chunk.members.size() == 1) {
    out[chunk.members[0]] = flat.view(like[chunk.members[0]].sizes());
    return;
  }
  int64_t offset = 0;
  for (size_t j : chunk.members) {
    const Tensor& t = like[j];
    out[j] = flat.narrow(0, offset, t.numel()).view(t.sizes()).clone();
    offset += t.numel();
  }
}

/// The position of the source in `devices` when the broadcast can go through NCCL, else -1.
int nccl_broadcast_root(const std::vector<Tensor>& tensors, const std::vector<Device>& devices) {
  if (devices.size() < 2 || tensors.empty() || !distinct_cuda(devices)) return -1;
  for (const Tensor& t : tensors)
    if (!t.defined() || t.device() != tensors[0].device()) return -1;
  for (size_t i = 0; i < devices.size(); ++i)
    if (devices[i] == tensors[0].device()) return nccl_enabled() ? static_cast<int>(i) : -1;
  return -1;
}

std::vector<std::vector<Tensor>> broadcast_nccl(const std::vector<Tensor>& tensors,
                                                const std::vector<Device>& devices, int root) {
  NoGradGuard no_grad;
  const size_t n = devices.size(), r = static_cast<size_t>(root);
  TraceSpan span("nccl_broadcast", devices[r]);
  std::vector<std::vector<Tensor>> out(n, std::vector<Tensor>(tensors.size()));
  out[r] = tensors;
  std::vector<size_t> all(tensors.size());
  std::iota(all.begin(), all.end(), size_t(0));
  for (const Chunk& chunk : make_chunks(tensors, all)) {
    std::vector<Tensor> flats(n);
    std::vector<kernels::TensorArg> args(n);
    for (size_t i = 0; i < n; ++i) {
      flats[i] = i == r ? pack(tensors, chunk, devices[i])
                        : octo::detail::make_empty({chunk.numel}, chunk.dtype, devices[i]);
      args[i] = flats[i].arg();
    }
    cuda::nccl::broadcast(args, root);
    for (size_t i = 0; i < n; ++i)
      if (i != r) unpack(flats[i], tensors, chunk, out[i]);
    span.add_bytes(static_cast<int64_t>(flats[r].nbytes() * (n - 1)));
  }
  return out;
}

/// The sum of tensor j over the devices, by copies to `destination` (the path without NCCL).
Tensor reduce_add_by_copies(const std::vector<std::vector<Tensor>>& inputs, size_t j,
                            Device destination, TraceSpan& span) {
  Tensor acc;
  for (const auto& per_device : inputs) {
    const Tensor& t = per_device[j];
    if (!t.defined()) continue;
    if (acc.defined()) {
      OCTO_CHECK_VALUE(t.sizes() == acc.sizes(),
                       "reduce_add: tensors must have the same shape, got ", acc.sizes(), " and ",
                       t.sizes());
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
  return acc;
}

/// The position of `destination` among the inputs' devices when the reduction can go through
/// NCCL (each device's defined tensors share one CUDA device, all distinct), else -1.
int nccl_reduce_root(const std::vector<std::vector<Tensor>>& inputs, Device destination) {
  if (inputs.size() < 2) return -1;
  std::vector<Device> devices;
  for (const auto& per_device : inputs) {
    const Tensor* first = nullptr;
    for (const Tensor& t : per_device) {
      if (!t.defined()) continue;
      if (first == nullptr) first = &t;
      if (t.device() != first->device()) return -1;
    }
    if (first == nullptr) return -1;
    devices.push_back(first->device());
  }
  if (!distinct_cuda(devices)) return -1;
  for (size_t i = 0; i < devices.size(); ++i)
    if (devices[i] == destination) return nccl_enabled() ? static_cast<int>(i) : -1;
  return -1;
}

/// Sums through NCCL every tensor j that each device contributes with one shape and dtype;
/// sets out[j] and done[j] for those.
void reduce_add_nccl(const std::vector<std::vector<Tensor>>& inputs, int root, Device destination,
                     std::vector<Tensor>& out, std::vector<bool>& done) {
  const size_t n = inputs.size(), r = static_cast<size_t>(root);
  TraceSpan span("nccl_reduce_add", destination);
  const std::vector<Tensor>& at_root = inputs[r];
  std::vector<size_t> eligible;
  for (size_t j = 0; j < at_root.size(); ++j) {
    bool ok = true;
    for (const auto& per_device : inputs) {
      const Tensor& t = per_device[j];
      ok = ok && t.defined() && t.sizes() == at_root[j].sizes() && t.dtype() == at_root[j].dtype();
    }
    if (ok) eligible.push_back(j);
  }
  for (const Chunk& chunk : make_chunks(at_root, eligible)) {
    std::vector<Tensor> flats(n);
    std::vector<kernels::TensorArg> args(n);
    for (size_t i = 0; i < n; ++i) {
      flats[i] = pack(inputs[i], chunk, inputs[i][chunk.members[0]].device());
      args[i] = flats[i].arg();
    }
    cuda::nccl::reduce(args, root, args[r]);  // in place into root's packed buffer
    unpack(flats[r], at_root, chunk, out);
    for (size_t j : chunk.members) done[j] = true;
    span.add_bytes(static_cast<int64_t>(flats[r].nbytes() * (n - 1)));
  }
}

}  // namespace

std::vector<Tensor> broadcast(const Tensor& tensor, const std::vector<Device>& devices) {
  auto out = broadcast_coalesced({tensor}, devices);
  std::vector<Tensor> flat;
  for (auto& per_device : out) flat.push_back(per_device[0]);
  return flat;
}

std::vector<std::vector<Tensor>> broadcast_coalesced(const std::vector<Tensor>& tensors,
                                                     const std::vector<Device>& devices) {
  OCTO_CHECK_VALUE(!devices.empty(), "broadcast: expected at least one device");
  if (int root = nccl_broadcast_root(tensors, devices); root >= 0) {
    return broadcast_nccl(tensors, devices, root);
  }
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
  // inputs is [device][tensor].
  OCTO_CHECK_VALUE(!inputs.empty(), "reduce_add: expected inputs from at least one device");
  size_t n = inputs[0].size();
  for (const auto& per_device : inputs)
    OCTO_CHECK_VALUE(per_device.size() == n, "reduce_add: every device must contribute ", n,
                     " tensors, got ", per_device.size());
  // Every sum runs on the calling thread (in backward: where the engine runs destination's nodes,
  // Note [Engine threads]); nothing goes to other workers (Note [Nested device work]).
  std::vector<Tensor> out(n);
  {
    NoGradGuard no_grad;
    TraceSpan span("reduce_add", destination);
    std::vector<bool> done(n, false);
    if (int root = nccl_reduce_root(inputs, destination); root >= 0) {
      reduce_add_nccl(inputs, root, destination, out, done);
    }
    for (size_t j = 0; j < n; ++j)
      if (!done[j]) out[j] = reduce_add_by_copies(inputs, j, destination, span);
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
