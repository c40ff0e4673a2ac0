// cuDNN handles per (thread, device), RAII descriptors, packed scratch buffers and the algorithm
// cache.
#include "kernels/cuda/cudnn_util.h"

#include <cudnn.h>

#include <climits>
#include <unordered_map>

#include "core/error.h"
#include "kernels/cuda/caching_allocator.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/stream.h"

namespace octo::cuda {

size_t conv_algorithm_cache_size() { return detail::ConvAlgorithmCache::instance().size(); }

namespace detail {

namespace {

cudnnDataType_t data_type(DType dtype) {
  switch (dtype) {
    case kFloat64:
      return CUDNN_DATA_DOUBLE;
    case kBFloat16:
      return CUDNN_DATA_BFLOAT16;
    case kFloat16:
      return CUDNN_DATA_HALF;
    default:
      OCTO_INTERNAL_ASSERT(dtype == kFloat32, "no cuDNN data type for ", dtype);
      return CUDNN_DATA_FLOAT;
  }
}

/// The convolution's compute (accumulation) type: float32 for 16-bit data, cuDNN's
/// PSEUDO_HALF_CONFIG / PSEUDO_BFLOAT16_CONFIG (Note [16-bit kernels]); the data type otherwise.
cudnnDataType_t compute_type(DType dtype) {
  return is_half(dtype) ? CUDNN_DATA_FLOAT : data_type(dtype);
}

DataPtr allocate(Device device, DType dtype, int64_t numel) {
  return caching_allocator(device.index())->allocate(static_cast<size_t>(numel) * itemsize(dtype));
}

}  // namespace

cudnnContext* cudnn_handle(int device) {
  thread_local std::unordered_map<int, cudnnHandle_t> handles;
  auto it = handles.find(device);
  if (it == handles.end()) {
    cudnnHandle_t h = nullptr;
    OCTO_CUDNN_CHECK(cudnnCreate(&h));
    it = handles.emplace(device, h).first;
  }
  OCTO_CUDNN_CHECK(cudnnSetStream(it->second, current_stream(device).handle()));
  return it->second;
}

void check_cudnn_dtype(DType dtype, const char* op) {
  if (dtype != kFloat32 && dtype != kFloat64 && !is_half(dtype)) {
    OCTO_THROW(NotImplementedError, "cuda backend: ", op, " is not implemented for dtype ", dtype,
               " (float32, float64, bfloat16 and float16 are)");
  }
}

int to_cudnn_int(int64_t value, const char* op, const char* what) {
  if (value > INT_MAX) {
    OCTO_THROW(NotImplementedError, "cuda backend: ", op, ": ", what, " = ", value,
               " exceeds what cuDNN takes (at most ", INT_MAX, ")");
  }
  return static_cast<int>(value);
}

const void* cudnn_one(DType dtype) {
  static const float kOneF = 1.0f;
  static const double kOneD = 1.0;
  return dtype == kFloat64 ? static_cast<const void*>(&kOneD) : static_cast<const void*>(&kOneF);
}

const void* cudnn_zero(DType dtype) {
  static const float kZeroF = 0.0f;
  static const double kZeroD = 0.0;
  return dtype == kFloat64 ? static_cast<const void*>(&kZeroD) : static_cast<const void*>(&kZeroF);
}

TensorDescriptor::TensorDescriptor() { OCTO_CUDNN_CHECK(cudnnCreateTensorDescriptor(&desc_)); }
TensorDescriptor::~TensorDescriptor() { cudnnDestroyTensorDescriptor(desc_); }

void TensorDescriptor::set_packed(DType dtype, int ndim, const int64_t* sizes, const char* op) {
  OCTO_INTERNAL_ASSERT(ndim >= 4 && ndim <= 5, "cuDNN tensors here have 4 or 5 dims, got ", ndim);
  int dims[5], strides[5];
  int64_t numel = 1;
  for (int d = 0; d < ndim; ++d) {
    OCTO_INTERNAL_ASSERT(sizes[d] > 0, "empty tensors never reach cuDNN");
    numel *= sizes[d];
    dims[d] = to_cudnn_int(sizes[d], op, "a tensor size");
  }
  to_cudnn_int(numel, op, "a tensor's element count");
  int64_t stride = 1;
  for (int d = ndim - 1; d >= 0; --d) {
    strides[d] = static_cast<int>(stride);
    stride *= sizes[d];
  }
  OCTO_CUDNN_CHECK(cudnnSetTensorNdDescriptor(desc_, data_type(dtype), ndim, dims, strides));
}

FilterDescriptor::FilterDescriptor() { OCTO_CUDNN_CHECK(cudnnCreateFilterDescriptor(&desc_)); }
FilterDescriptor::~FilterDescriptor() { cudnnDestroyFilterDescriptor(desc_); }

void FilterDescriptor::set(DType dtype, const int64_t* sizes, const char* op) {
  int64_t numel = 1;
  for (int d = 0; d < 4; ++d) {
    OCTO_INTERNAL_ASSERT(sizes[d] > 0, "empty filters never reach cuDNN");
    numel *= sizes[d];
  }
  to_cudnn_int(numel, op, "the weight's element count");
  OCTO_CUDNN_CHECK(cudnnSetFilter4dDescriptor(
      desc_, data_type(dtype), CUDNN_TENSOR_NCHW, static_cast<int>(sizes[0]),
      static_cast<int>(sizes[1]), static_cast<int>(sizes[2]), static_cast<int>(sizes[3])));
}

ConvolutionDescriptor::ConvolutionDescriptor() {
  OCTO_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&desc_));
}

ConvolutionDescriptor::~ConvolutionDescriptor() { cudnnDestroyConvolutionDescriptor(desc_); }

void ConvolutionDescriptor::set(DType dtype, const kernels::Conv2dParams& p, bool allow_tf32,
                                const char* op) {
  OCTO_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(
      desc_, to_cudnn_int(p.padding[0], op, "padding"), to_cudnn_int(p.padding[1], op, "padding"),
      to_cudnn_int(p.stride[0], op, "stride"), to_cudnn_int(p.stride[1], op, "stride"),
      to_cudnn_int(p.dilation[0], op, "dilation"), to_cudnn_int(p.dilation[1], op, "dilation"),
      CUDNN_CROSS_CORRELATION, compute_type(dtype)));
  OCTO_CUDNN_CHECK(cudnnSetConvolutionGroupCount(desc_, to_cudnn_int(p.groups, op, "groups")));
  OCTO_CUDNN_CHECK(cudnnSetConvolutionMathType(
      desc_, static_cast<cudnnMathType_t>(math_type_for(dtype, allow_tf32))));
}

int math_type_for(DType dtype, bool allow_tf32) {
  // CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION is never used: it lets cuDNN convert float32 data to
  // float16, whose range is far narrower than TF32's (float32's exponent).
  if (dtype == kFloat32) return allow_tf32 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH;
  if (is_half(dtype)) return CUDNN_TENSOR_OP_MATH;  // 16-bit data, float32 accumulation
  return CUDNN_DEFAULT_MATH;
}

kernels::TensorArg packed_input(const kernels::TensorArg& t, DataPtr& buffer) {
  if (t.is_contiguous()) return t;
  buffer = allocate(t.device, t.dtype, t.numel());
  const kernels::TensorArg packed = kernels::contiguous_like(t, buffer.get());
  kernels::cuda_backend().copy(packed, t);
  return packed;
}

PackedOutput::PackedOutput(const kernels::TensorArg& out, bool keep_contents)
    : out_(out), packed_(out) {
  if (out.is_contiguous()) return;
  buffer_ = allocate(out.device, out.dtype, out.numel());
  packed_ = kernels::contiguous_like(out, buffer_.get());
  if (keep_contents) kernels::cuda_backend().copy(packed_, out_);
}

void PackedOutput::finish() {
  if (buffer_) kernels::cuda_backend().copy(out_, packed_);
}

kernels::TensorArg scratch_tensor(Device device, DType dtype, int ndim, const int64_t* sizes,
                                  DataPtr& buffer, std::optional<double> fill) {
  kernels::TensorArg t;
  t.dtype = dtype;
  t.device = device;
  t.ndim = ndim;
  for (int d = 0; d < ndim; ++d) t.sizes[d] = sizes[d];
  buffer = allocate(device, dtype, t.numel());
  t = kernels::contiguous_like(t, buffer.get());
  if (fill) kernels::cuda_backend().fill(t, Scalar(*fill));
  return t;
}

ConvAlgorithmCache& ConvAlgorithmCache::instance() {
  // Never destroyed: kernels may still run on other threads while statics are destroyed at exit.
  static ConvAlgorithmCache* cache = new ConvAlgorithmCache();
  return *cache;
}

std::optional<ConvAlgorithm> ConvAlgorithmCache::find(const std::vector<int64_t>& key) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = map_.find(key);
  if (it == map_.end()) return std::nullopt;
  return it->second;
}

ConvAlgorithm ConvAlgorithmCache::insert(const std::vector<int64_t>& key, ConvAlgorithm choice) {
  std::lock_guard<std::mutex> lock(mutex_);
  return map_.emplace(key, choice).first->second;
}

size_t ConvAlgorithmCache::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return map_.size();
}

}  // namespace detail
}  // namespace octo::cuda
