// CudaBackend::copy and cuda_copy: same-GPU, host <-> GPU and GPU <-> GPU (peer) copies, with
// dtype conversion and any strides, and non-blocking copies from and into pinned host memory.
// Contiguous same-dtype data moves with cudaMemcpyAsync; the rest is packed or converted by
// memory.cu's elementwise kernel (or on the host by the CPU backend).
#include <cuda_runtime_api.h>

#include <mutex>
#include <set>
#include <utility>

#include "core/allocator.h"
#include "core/error.h"
#include "kernels/cuda/caching_allocator.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/host_allocator.h"
#include "kernels/cuda/memory.h"
#include "kernels/cuda/stream.h"

namespace octo::kernels {

namespace {

using cuda::detail::CudaDeviceScope;

size_t nbytes(const TensorArg& t) { return size_t(t.numel()) * itemsize(t.dtype); }

/// A contiguous arg shaped like `like`, over `data`.
TensorArg contiguous_like(const TensorArg& like, void* data, DType dtype, Device device) {
  TensorArg t = kernels::contiguous_like(like, data);
  t.dtype = dtype;
  t.device = device;
  return t;
}

bool memcpy_compatible(const TensorArg& a, const TensorArg& b) {
  return a.dtype == b.dtype && a.is_contiguous() && b.is_contiguous();
}

void copy_same_device(const TensorArg& dst, const TensorArg& src) {
  const int dev = dst.device.index();
  CudaDeviceScope scope(dev);
  cudaStream_t stream = cuda::current_stream(dev).handle();
  if (memcpy_compatible(dst, src)) {
    if (dst.data != src.data) {
      OCTO_CUDA_CHECK(
          cudaMemcpyAsync(dst.data, src.data, nbytes(dst), cudaMemcpyDeviceToDevice, stream));
    }
    return;
  }
  cuda_memory::launch_copy(dst, src, stream);
}

// Note [Non-blocking copies]
// Host memory from octo's CPU allocator is pageable, and the caller may free or overwrite it as
// soon as copy() returns, so host <-> device copies wait for their stream before returning
// (cudaStreamSynchronize). The exception is a non-blocking copy (cuda_copy(..., true), i.e.
// Tensor::to(device, true) / copy_(src, true)) whose host side is contiguous pinned memory from
// cuda::host_allocator() and whose dtypes agree: the DMA engine reads or writes that memory
// directly, so the cudaMemcpyAsync is queued on the GPU's current stream and the call returns.
// Two things keep that safe:
//  * the pinned block is recorded as used by the stream (cuda::record_host_use); when its tensor
//    is freed, an event recorded on that stream gates the block's reuse, so a later pin_memory()
//    cannot overwrite bytes an upload has not read yet, nor a download land in a reused block;
//  * device-side buffers made here (staging, packing) are freed into the current stream's pool,
//    whose later users are ordered after this copy on that stream.
// What stays the caller's job, as in PyTorch: not writing into the source of an upload, and not
// reading the destination of a download, before the stream (or the device) is synchronised.
// A non-blocking request on pageable, strided or differently typed host data synchronises.
//
// Whether the copy between `host` and `dev` may skip the synchronisation; if so, the host block is
// recorded as used by `stream` (before the copy is queued, so a failure cannot leave an
// unrecorded copy in flight).
bool async_host_side(const TensorArg& host, const TensorArg& dev, bool non_blocking,
                     const cuda::Stream& stream) {
  return non_blocking && host.dtype == dev.dtype && host.is_contiguous() &&
         cuda::record_host_use(host.data, stream);  // false for pageable memory
}

void host_to_device(const TensorArg& dst, const TensorArg& src, bool non_blocking) {
  const int dev = dst.device.index();
  CudaDeviceScope scope(dev);
  const cuda::Stream current = cuda::current_stream(dev);
  cudaStream_t stream = current.handle();
  const bool async = async_host_side(src, dst, non_blocking, current);
  // Strided host data is packed (and converted to dst's dtype) on the host first.
  TensorArg host = src;
  DataPtr host_buffer;
  if (!src.is_contiguous()) {
    host_buffer = cpu_allocator()->allocate(size_t(src.numel()) * itemsize(dst.dtype));
    host = contiguous_like(src, host_buffer.get(), dst.dtype, src.device);
    cpu_backend().copy(host, src);
  }
  DataPtr staging;
  if (memcpy_compatible(dst, host)) {
    OCTO_CUDA_CHECK(
        cudaMemcpyAsync(dst.data, host.data, nbytes(host), cudaMemcpyHostToDevice, stream));
  } else {  // upload as is, then convert / scatter on the GPU
    staging = cuda::caching_allocator(dev)->allocate(nbytes(host));
    TensorArg tmp = contiguous_like(host, staging.get(), host.dtype, dst.device);
    OCTO_CUDA_CHECK(
        cudaMemcpyAsync(tmp.data, host.data, nbytes(host), cudaMemcpyHostToDevice, stream));
    cuda_memory::launch_copy(dst, tmp, stream);
  }
  if (async) return;
  OCTO_CUDA_CHECK(cudaStreamSynchronize(stream));
}

void device_to_host(const TensorArg& dst, const TensorArg& src, bool non_blocking) {
  const int dev = src.device.index();
  CudaDeviceScope scope(dev);
  const cuda::Stream current = cuda::current_stream(dev);
  cudaStream_t stream = current.handle();
  const bool async = async_host_side(dst, src, non_blocking, current);
  // Strided device data is packed (and converted to dst's dtype) on the GPU first.
  TensorArg packed = src;
  DataPtr packed_buffer;
  if (!src.is_contiguous()) {
    packed_buffer =
        cuda::caching_allocator(dev)->allocate(size_t(src.numel()) * itemsize(dst.dtype));
    packed = contiguous_like(src, packed_buffer.get(), dst.dtype, src.device);
    cuda_memory::launch_copy(packed, src, stream);
  }
  if (memcpy_compatible(dst, packed)) {
    OCTO_CUDA_CHECK(
        cudaMemcpyAsync(dst.data, packed.data, nbytes(packed), cudaMemcpyDeviceToHost, stream));
    if (async) return;  // dst is pinned, contiguous and of packed's dtype: always this branch
    OCTO_CUDA_CHECK(cudaStreamSynchronize(stream));
  } else {  // download as is, then convert / scatter on the host
    DataPtr host_buffer = cpu_allocator()->allocate(nbytes(packed));
    TensorArg host = contiguous_like(packed, host_buffer.get(), packed.dtype, dst.device);
    OCTO_CUDA_CHECK(
        cudaMemcpyAsync(host.data, packed.data, nbytes(packed), cudaMemcpyDeviceToHost, stream));
    OCTO_CUDA_CHECK(cudaStreamSynchronize(stream));
    cpu_backend().copy(dst, host);
  }
}

// Direct GPU-to-GPU transfers where the hardware allows (cudaMemcpyPeerAsync works either way,
// staging through the host otherwise). Tried once per ordered pair of devices.
void enable_peer_access(int from, int to) {
  static std::mutex mutex;
  static std::set<std::pair<int, int>> tried;
  std::lock_guard<std::mutex> lock(mutex);
  if (!tried.insert({from, to}).second) return;
  int can = 0;
  OCTO_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, from, to));
  if (!can) return;
  CudaDeviceScope scope(from);
  cudaError_t status = cudaDeviceEnablePeerAccess(to, 0);
  if (status == cudaErrorPeerAccessAlreadyEnabled) {
    cudaGetLastError();
  } else {
    OCTO_CUDA_CHECK(status);
  }
}

// The transfer runs on the source device's current stream, after the destination device's
// current stream has reached this point; afterwards the destination stream waits for it, so work
// queued later on either device sees the copy (the stream protocol of PyTorch's copy_).
void copy_between_devices(const TensorArg& dst, const TensorArg& src) {
  const int a = src.device.index(), b = dst.device.index();
  enable_peer_access(a, b);
  enable_peer_access(b, a);
  const cuda::Stream sa = cuda::current_stream(a), sb = cuda::current_stream(b);
  sa.wait(sb);
  CudaDeviceScope scope(a);
  // Strided or differently typed source data is packed / converted on the source GPU.
  TensorArg packed = src;
  DataPtr packed_buffer;
  if (!src.is_contiguous() || src.dtype != dst.dtype) {
    packed_buffer = cuda::caching_allocator(a)->allocate(size_t(src.numel()) * itemsize(dst.dtype));
    packed = contiguous_like(src, packed_buffer.get(), dst.dtype, src.device);
    cuda_memory::launch_copy(packed, src, sa.handle());
  }
  if (dst.is_contiguous()) {
    OCTO_CUDA_CHECK(cudaMemcpyPeerAsync(dst.data, b, packed.data, a, nbytes(packed), sa.handle()));
    sb.wait(sa);
    return;
  }
  // Strided destination: land in a contiguous buffer on dst's GPU, then scatter there.
  DataPtr landing_buffer = cuda::caching_allocator(b)->allocate(nbytes(packed));
  TensorArg landing = contiguous_like(packed, landing_buffer.get(), dst.dtype, dst.device);
  OCTO_CUDA_CHECK(
      cudaMemcpyPeerAsync(landing.data, b, packed.data, a, nbytes(packed), sa.handle()));
  sb.wait(sa);
  CudaDeviceScope scope_b(b);
  cuda_memory::launch_copy(dst, landing, sb.handle());
  // landing_buffer returns to sb's pool: later reuse on sb is ordered after the kernel above.
}

}  // namespace

void CudaBackend::copy(const TensorArg& dst, const TensorArg& src) { cuda_copy(dst, src, false); }
void CudaBackend::copy_non_blocking(const TensorArg& dst, const TensorArg& src) {
  cuda_copy(dst, src, true);
}

void cuda_copy(const TensorArg& dst, const TensorArg& src, bool non_blocking) {
  OCTO_INTERNAL_ASSERT(dst.ndim == src.ndim);
  for (int d = 0; d < dst.ndim; ++d) OCTO_INTERNAL_ASSERT(dst.sizes[d] == src.sizes[d]);
  if (dst.numel() == 0) return;
  const bool dst_cuda = dst.device.is_cuda(), src_cuda = src.device.is_cuda();
  if (dst_cuda && src_cuda) {
    if (dst.device == src.device) {
      copy_same_device(dst, src);
    } else {
      copy_between_devices(dst, src);
    }
  } else if (dst_cuda) {
    host_to_device(dst, src, non_blocking);
  } else if (src_cuda) {
    device_to_host(dst, src, non_blocking);
  } else {
    cpu_backend().copy(dst, src);
  }
}

}  // namespace octo::kernels
