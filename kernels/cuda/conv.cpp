// conv2d forward and backward through cuDNN, with one benchmarked algorithm choice cached per
// shape.
//
// Layout. cuDNN sees packed NCHW tensors and a packed [C_out, C_in / groups, kH, kW] filter only:
// an argument that is not packed (a transposed or permuted view, an expanded gradient with stride
// 0) is first copied to a packed scratch buffer, and an output that is not packed is computed in
// one and copied back. cuDNN's descriptors do take arbitrary strides, but which algorithms support
// which strided layouts is not documented per algorithm, and packed NCHW is the layout every
// algorithm supports; the copy is one cheap elementwise kernel next to a convolution.
//
// Algorithm choice. On the first call for a key (direction, device, dtype, sizes, parameters, math
// mode, pointer alignment; strides need no place in it, they are always packed) the candidates are
// timed with cudnnFind*AlgorithmEx on the call's own buffers, with a workspace of the largest size
// any candidate asks for, at most kMaxFindWorkspace. Benchmarking rather than the cudnnGet*_v7
// heuristics: Find only reports algorithms that actually ran for this problem (the heuristics may
// rank first one that then fails with CUDNN_STATUS_NOT_SUPPORTED), and its choice is the fastest
// measured, which pays for the one-off cost in a training loop where shapes repeat. The fastest
// successful result whose math type octo allows wins; it is cached for the life of the process.
// Every call then asks cuDNN for that algorithm's exact workspace size and takes it from the
// caching allocator, freeing it right after queuing the call (reuse is on the same stream, so
// it is safe; see docs/internals/cuda.md).
//
// Math type (octo::cuda::allow_tf32()): float32 runs with CUDNN_FMA_MATH unless TF32 is allowed
// (CUDNN_TENSOR_OP_MATH); float64 with CUDNN_DEFAULT_MATH; bfloat16 and float16 data with a
// float32 compute type and CUDNN_TENSOR_OP_MATH (tensor cores; Note [16-bit kernels]). See
// cudnn_util.h.
#include <cudnn.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/device_hooks.h"
#include "core/error.h"
#include "kernels/cuda/caching_allocator.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cudnn_util.h"
#include "kernels/cuda/stream.h"

namespace octo::kernels {

namespace {

using cuda::detail::ConvAlgorithm;
using cuda::detail::ConvAlgorithmCache;
using cuda::detail::ConvolutionDescriptor;
using cuda::detail::cudnn_one;
using cuda::detail::cudnn_zero;
using cuda::detail::FilterDescriptor;
using cuda::detail::packed_input;
using cuda::detail::PackedOutput;
using cuda::detail::TensorDescriptor;

/// Upper bound on the workspace handed to cudnnFind*AlgorithmEx (bytes): algorithms that need
/// more are not considered.
constexpr size_t kMaxFindWorkspace = size_t(1) << 30;  // 1 GiB

enum class Direction : int64_t { kForward = 0, kBackwardData = 1, kBackwardFilter = 2 };

/// One convolution as cuDNN sees it, in forward terms: x [N, C, H, W], w [K, C / groups, kH, kW],
/// y [N, K, OH, OW], all packed. Backward data writes x from y; backward filter writes w.
struct Problem {
  Problem(const char* op_name, const TensorArg& x_, const TensorArg& w_, const TensorArg& y_,
          const Conv2dParams& p_)
      : op(op_name), x(x_), w(w_), y(y_), p(p_), device(x_.device.index()), dtype(x_.dtype) {
    OCTO_INTERNAL_ASSERT(x.dtype == dtype && w.dtype == dtype && y.dtype == dtype);
    OCTO_INTERNAL_ASSERT(x.is_contiguous() && w.is_contiguous() && y.is_contiguous());
    allow_tf32 = dtype == kFloat32 && cuda::allow_tf32();
    xd.set_packed(dtype, 4, x.sizes, op);
    yd.set_packed(dtype, 4, y.sizes, op);
    wd.set(dtype, w.sizes, op);
    cd.set(dtype, p, allow_tf32, op);
  }

  const char* op;
  TensorArg x, w, y;
  Conv2dParams p;
  int device;
  DType dtype;
  bool allow_tf32 = false;
  TensorDescriptor xd, yd;
  FilterDescriptor wd;
  ConvolutionDescriptor cd;
};

/// Largest power of two, up to 256, that divides the address: algorithms chosen for aligned
/// buffers may rely on vector loads, so views at odd offsets get their own cache entries.
int64_t alignment_of(const void* ptr) {
  const auto v = reinterpret_cast<uintptr_t>(ptr);
  int64_t a = 1;
  while (a < 256 && v % static_cast<uintptr_t>(2 * a) == 0) a *= 2;
  return a;
}

std::vector<int64_t> cache_key(Direction dir, const Problem& pr) {
  std::vector<int64_t> key = {static_cast<int64_t>(dir), pr.device, static_cast<int64_t>(pr.dtype),
                              pr.allow_tf32 ? 1 : 0};
  for (const TensorArg* t : {&pr.x, &pr.w, &pr.y}) {
    key.insert(key.end(), t->sizes, t->sizes + 4);
    key.push_back(alignment_of(t->data));
  }
  for (int i = 0; i < 2; ++i) {
    key.push_back(pr.p.stride[i]);
    key.push_back(pr.p.padding[i]);
    key.push_back(pr.p.dilation[i]);
  }
  key.push_back(pr.p.groups);
  return key;
}

/// Whether a Find result's math type keeps octo's promise for the dtype: float32 without TF32
/// must be CUDNN_FMA_MATH; nothing may convert data to a narrower type.
bool math_type_allowed(cudnnMathType_t math, const Problem& pr) {
  if (math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) return false;
  if (pr.dtype == kFloat32 && !pr.allow_tf32) return math == CUDNN_FMA_MATH;
  return true;
}

std::string shape_of(const TensorArg& t) {
  std::string s = "[";
  for (int d = 0; d < t.ndim; ++d) s += (d ? ", " : "") + std::to_string(t.sizes[d]);
  return s + "]";
}

// The three directions differ only in which cuDNN functions they call: one traits struct each.

struct ForwardOps {
  using Perf = cudnnConvolutionFwdAlgoPerf_t;
  using Algo = cudnnConvolutionFwdAlgo_t;
  static constexpr Direction kDirection = Direction::kForward;
  static constexpr int kCount = CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
  static cudnnStatus_t max_results(cudnnHandle_t h, int* n) {
    return cudnnGetConvolutionForwardAlgorithmMaxCount(h, n);
  }
  static cudnnStatus_t workspace(cudnnHandle_t h, const Problem& pr, int algo, size_t* bytes) {
    return cudnnGetConvolutionForwardWorkspaceSize(h, pr.xd.get(), pr.wd.get(), pr.cd.get(),
                                                   pr.yd.get(), static_cast<Algo>(algo), bytes);
  }
  static cudnnStatus_t find(cudnnHandle_t h, const Problem& pr, int requested, int* returned,
                            Perf* perf, void* ws, size_t ws_bytes) {
    return cudnnFindConvolutionForwardAlgorithmEx(h, pr.xd.get(), pr.x.data, pr.wd.get(), pr.w.data,
                                                  pr.cd.get(), pr.yd.get(), pr.y.data, requested,
                                                  returned, perf, ws, ws_bytes);
  }
  static cudnnStatus_t run(cudnnHandle_t h, const Problem& pr, int algo, void* ws,
                           size_t ws_bytes) {
    return cudnnConvolutionForward(h, cudnn_one(pr.dtype), pr.xd.get(), pr.x.data, pr.wd.get(),
                                   pr.w.data, pr.cd.get(), static_cast<Algo>(algo), ws, ws_bytes,
                                   cudnn_zero(pr.dtype), pr.yd.get(), pr.y.data);
  }
};

struct BackwardDataOps {
  using Perf = cudnnConvolutionBwdDataAlgoPerf_t;
  using Algo = cudnnConvolutionBwdDataAlgo_t;
  static constexpr Direction kDirection = Direction::kBackwardData;
  static constexpr int kCount = CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT;
  static cudnnStatus_t max_results(cudnnHandle_t h, int* n) {
    return cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, n);
  }
  static cudnnStatus_t workspace(cudnnHandle_t h, const Problem& pr, int algo, size_t* bytes) {
    return cudnnGetConvolutionBackwardDataWorkspaceSize(
        h, pr.wd.get(), pr.yd.get(), pr.cd.get(), pr.xd.get(), static_cast<Algo>(algo), bytes);
  }
  static cudnnStatus_t find(cudnnHandle_t h, const Problem& pr, int requested, int* returned,
                            Perf* perf, void* ws, size_t ws_bytes) {
    return cudnnFindConvolutionBackwardDataAlgorithmEx(
        h, pr.wd.get(), pr.w.data, pr.yd.get(), pr.y.data, pr.cd.get(), pr.xd.get(), pr.x.data,
        requested, returned, perf, ws, ws_bytes);
  }
  static cudnnStatus_t run(cudnnHandle_t h, const Problem& pr, int algo, void* ws,
                           size_t ws_bytes) {
    return cudnnConvolutionBackwardData(h, cudnn_one(pr.dtype), pr.wd.get(), pr.w.data, pr.yd.get(),
                                        pr.y.data, pr.cd.get(), static_cast<Algo>(algo), ws,
                                        ws_bytes, cudnn_zero(pr.dtype), pr.xd.get(), pr.x.data);
  }
};

struct BackwardFilterOps {
  using Perf = cudnnConvolutionBwdFilterAlgoPerf_t;
  using Algo = cudnnConvolutionBwdFilterAlgo_t;
  static constexpr Direction kDirection = Direction::kBackwardFilter;
  static constexpr int kCount = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
  static cudnnStatus_t max_results(cudnnHandle_t h, int* n) {
    return cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h, n);
  }
  static cudnnStatus_t workspace(cudnnHandle_t h, const Problem& pr, int algo, size_t* bytes) {
    return cudnnGetConvolutionBackwardFilterWorkspaceSize(
        h, pr.xd.get(), pr.yd.get(), pr.cd.get(), pr.wd.get(), static_cast<Algo>(algo), bytes);
  }
  static cudnnStatus_t find(cudnnHandle_t h, const Problem& pr, int requested, int* returned,
                            Perf* perf, void* ws, size_t ws_bytes) {
    return cudnnFindConvolutionBackwardFilterAlgorithmEx(
        h, pr.xd.get(), pr.x.data, pr.yd.get(), pr.y.data, pr.cd.get(), pr.wd.get(), pr.w.data,
        requested, returned, perf, ws, ws_bytes);
  }
  static cudnnStatus_t run(cudnnHandle_t h, const Problem& pr, int algo, void* ws,
                           size_t ws_bytes) {
    return cudnnConvolutionBackwardFilter(
        h, cudnn_one(pr.dtype), pr.xd.get(), pr.x.data, pr.yd.get(), pr.y.data, pr.cd.get(),
        static_cast<Algo>(algo), ws, ws_bytes, cudnn_zero(pr.dtype), pr.wd.get(), pr.w.data);
  }
};

/// Times every candidate with cudnnFind*AlgorithmEx and returns the fastest usable one.
template <typename Ops>
ConvAlgorithm benchmark(cudnnHandle_t h, const Problem& pr) {
  // The workspace: the most any candidate asks for (an algorithm that does not apply to this
  // problem reports an error status here, which only means it is not a candidate), capped.
  size_t ws_bytes = 0;
  for (int algo = 0; algo < Ops::kCount; ++algo) {
    size_t bytes = 0;
    if (Ops::workspace(h, pr, algo, &bytes) == CUDNN_STATUS_SUCCESS)
      ws_bytes = std::max(ws_bytes, bytes);
  }
  ws_bytes = std::min(ws_bytes, kMaxFindWorkspace);
  DataPtr ws;
  if (ws_bytes > 0) {
    try {
      ws = cuda::caching_allocator(pr.device)->allocate(ws_bytes);
    } catch (const OutOfMemoryError&) {
      ws_bytes = 0;  // benchmark only the algorithms that need no workspace
    }
  }
  int requested = 0;
  OCTO_CUDNN_CHECK(Ops::max_results(h, &requested));
  std::vector<typename Ops::Perf> perf(static_cast<size_t>(std::max(requested, 1)));
  int returned = 0;
  OCTO_CUDNN_CHECK(
      Ops::find(h, pr, static_cast<int>(perf.size()), &returned, perf.data(), ws.get(), ws_bytes));
  const typename Ops::Perf* best = nullptr;
  for (int i = 0; i < returned; ++i) {
    const auto& r = perf[static_cast<size_t>(i)];
    if (r.status != CUDNN_STATUS_SUCCESS || !math_type_allowed(r.mathType, pr)) continue;
    if (best == nullptr || r.time < best->time) best = &r;
  }
  if (best == nullptr) {
    OCTO_THROW(NotImplementedError, "cuda backend: ", pr.op, ": cuDNN has no algorithm for input ",
               shape_of(pr.x), ", weight ", shape_of(pr.w), ", output ", shape_of(pr.y), " (dtype ",
               pr.dtype, ", groups ", pr.p.groups, ", ", returned,
               " candidates tried, none succeeded within a workspace of ",
               cuda::format_bytes(static_cast<int64_t>(ws_bytes)), ")");
  }
  return ConvAlgorithm{static_cast<int>(best->algo), static_cast<int>(best->mathType)};
}

/// Runs one direction of pr with its cached (or newly benchmarked) algorithm.
template <typename Ops>
void run_conv(const Problem& pr) {
  cudnnHandle_t h = cuda::detail::cudnn_handle(pr.device);
  const std::vector<int64_t> key = cache_key(Ops::kDirection, pr);
  ConvAlgorithmCache& cache = ConvAlgorithmCache::instance();
  std::optional<ConvAlgorithm> choice = cache.find(key);
  if (!choice) choice = cache.insert(key, benchmark<Ops>(h, pr));
  // The algorithm was measured with this math type: tensor-core kernels are selected by both.
  OCTO_CUDNN_CHECK(
      cudnnSetConvolutionMathType(pr.cd.get(), static_cast<cudnnMathType_t>(choice->math_type)));
  size_t ws_bytes = 0;
  OCTO_CUDNN_CHECK(Ops::workspace(h, pr, choice->algo, &ws_bytes));
  DataPtr ws;
  if (ws_bytes > 0) ws = cuda::caching_allocator(pr.device)->allocate(ws_bytes);
  OCTO_CUDNN_CHECK(Ops::run(h, pr, choice->algo, ws.get(), ws_bytes));
}

/// out[n, k, h, w] = bias[k], or 0 without a bias: the result when the input or filter is empty.
/// bias [C_out] broadcast to out's shape [N, C_out, H, W] by zero strides.
TensorArg broadcast_bias(const TensorArg& out, const TensorArg& bias) {
  TensorArg b = out;
  b.data = bias.data;
  b.strides[0] = b.strides[2] = b.strides[3] = 0;
  b.strides[1] = bias.strides[0];
  return b;
}

void fill_with_bias(const TensorArg& out, const TensorArg& bias) {
  if (bias.defined()) {
    cuda_backend().copy(out, broadcast_bias(out, bias));
  } else {
    cuda_backend().fill(out, Scalar(0.0));
  }
}

void check_args(const TensorArg& a, const TensorArg& b, const TensorArg& c, const char* op) {
  OCTO_INTERNAL_ASSERT(a.ndim == 4 && b.ndim == 4 && c.ndim == 4, op);
  OCTO_INTERNAL_ASSERT(a.dtype == b.dtype && b.dtype == c.dtype, op);
  cuda::detail::check_cudnn_dtype(a.dtype, op);
}

}  // namespace

void CudaBackend::conv2d_forward(const TensorArg& out, const TensorArg& input,
                                 const TensorArg& weight, const TensorArg& bias,
                                 const Conv2dParams& p) {
  check_args(out, input, weight, "conv2d_forward");
  OCTO_INTERNAL_ASSERT(!bias.defined() || (bias.ndim == 1 && bias.dtype == out.dtype));
  if (out.numel() == 0) return;
  const int dev = out.device.index();
  cuda::detail::CudaDeviceScope scope(dev);
  // No channels per group, or an empty image that padding alone turns into a non-empty output:
  // every product is empty and cuDNN cannot describe the input.
  if (input.numel() == 0 || weight.numel() == 0) {
    fill_with_bias(out, bias);
    return;
  }
  DataPtr x_buf, w_buf, b_buf;
  const TensorArg x = packed_input(input, x_buf), w = packed_input(weight, w_buf);
  PackedOutput y(out);
  const Problem pr("conv2d_forward", x, w, y.arg(), p);
  run_conv<ForwardOps>(pr);
  if (bias.defined() && is_half(bias.dtype)) {
    // y += bias in octo's own 16-bit add (computed in float, rounded once): cudnnAddTensor does
    // not document bfloat16 data.
    cuda_backend().binary(BinaryOp::Add, pr.y, pr.y, broadcast_bias(pr.y, bias));
  } else if (bias.defined()) {
    // y += bias viewed as [1, C_out, 1, 1]
    const TensorArg b = packed_input(bias, b_buf);
    TensorDescriptor bd;
    const int64_t b_sizes[4] = {1, b.sizes[0], 1, 1};
    bd.set_packed(b.dtype, 4, b_sizes, "conv2d_forward");
    OCTO_CUDNN_CHECK(cudnnAddTensor(cuda::detail::cudnn_handle(dev), cudnn_one(b.dtype), bd.get(),
                                    b.data, cudnn_one(b.dtype), pr.yd.get(), pr.y.data));
  }
  y.finish();
}

void CudaBackend::conv2d_backward_input(const TensorArg& grad_input, const TensorArg& grad_out,
                                        const TensorArg& weight, const Conv2dParams& p) {
  check_args(grad_input, grad_out, weight, "conv2d_backward_input");
  if (grad_input.numel() == 0) return;
  const int dev = grad_input.device.index();
  cuda::detail::CudaDeviceScope scope(dev);
  if (grad_out.numel() == 0) {  // C_out == 0: the input influenced nothing
    cuda_backend().fill(grad_input, Scalar(0.0));
    return;
  }
  DataPtr dy_buf, w_buf;
  const TensorArg dy = packed_input(grad_out, dy_buf), w = packed_input(weight, w_buf);
  PackedOutput dx(grad_input);
  run_conv<BackwardDataOps>(Problem("conv2d_backward_input", dx.arg(), w, dy, p));
  dx.finish();
}

void CudaBackend::conv2d_backward_weight(const TensorArg& grad_weight, const TensorArg& grad_out,
                                         const TensorArg& input, const Conv2dParams& p) {
  check_args(grad_weight, grad_out, input, "conv2d_backward_weight");
  if (grad_weight.numel() == 0) return;
  const int dev = grad_weight.device.index();
  cuda::detail::CudaDeviceScope scope(dev);
  if (grad_out.numel() == 0 || input.numel() == 0) {  // an empty batch or image: empty sums
    cuda_backend().fill(grad_weight, Scalar(0.0));
    return;
  }
  DataPtr x_buf, dy_buf;
  const TensorArg x = packed_input(input, x_buf), dy = packed_input(grad_out, dy_buf);
  PackedOutput dw(grad_weight);
  run_conv<BackwardFilterOps>(Problem("conv2d_backward_weight", x, dw.arg(), dy, p));
  dw.finish();
}

}  // namespace octo::kernels
