// cuDNN plumbing shared by conv.cpp and norm.cpp: handles, descriptors, packed buffers, the cache.
//
// This header includes no CUDA or cuDNN header (tests include it for conv_algorithm_cache_size()):
// cuDNN's opaque handle and descriptor types are pointers to the structs declared below
// (cudnnHandle_t is cudnnContext*, cudnnTensorDescriptor_t is cudnnTensorStruct*, ...), and every
// cuDNN enum stays inside the .cpp files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "core/allocator.h"
#include "core/dtype.h"
#include "kernels/backend.h"
#include "kernels/tensor_arg.h"

struct cudnnContext;
struct cudnnTensorStruct;
struct cudnnFilterStruct;
struct cudnnConvolutionStruct;

namespace octo::cuda {

/// How many convolution algorithm choices are cached, over every device, direction (forward,
/// backward data, backward filter), shape and math mode. A new shape adds one entry per direction
/// it runs; repeating a shape adds none.
size_t conv_algorithm_cache_size();

namespace detail {

/// This thread's cuDNN handle for cuda:device, bound to current_stream(device). Created on first
/// use (the caller holds a CudaDeviceScope for device) and never destroyed, like the cuBLAS handles
/// of linalg.cpp; one per (thread, device) because a cuDNN handle must not be shared by threads
/// that call it concurrently.
cudnnContext* cudnn_handle(int device);

/// Throws NotImplementedError naming `op` and the dtype unless cuDNN takes it here (float32,
/// float64, and for convolution bfloat16 and float16; batch norm stages 16-bit inputs before it
/// gets here, Note [16-bit kernels]).
void check_cudnn_dtype(DType dtype, const char* op);

/// Throws NotImplementedError naming `op`, `what` and the value when value does not fit the int
/// that cuDNN's legacy API takes for sizes and strides.
int to_cudnn_int(int64_t value, const char* op, const char* what);

/// Host pointers to 1 and 0 in the type cuDNN expects for alpha/beta with `dtype` data (double for
/// float64, float otherwise).
const void* cudnn_one(DType dtype);
const void* cudnn_zero(DType dtype);

/// A cudnnTensorDescriptor_t (created in the constructor, destroyed in the destructor).
class TensorDescriptor {
 public:
  TensorDescriptor();
  ~TensorDescriptor();
  TensorDescriptor(const TensorDescriptor&) = delete;
  TensorDescriptor& operator=(const TensorDescriptor&) = delete;
  /// A packed (row-major contiguous) tensor of 4 or 5 dims; throws NotImplementedError naming op
  /// when a size or the element count exceeds INT_MAX.
  void set_packed(DType dtype, int ndim, const int64_t* sizes, const char* op);
  cudnnTensorStruct* get() const { return desc_; }

 private:
  cudnnTensorStruct* desc_ = nullptr;
};

/// A cudnnFilterDescriptor_t in NCHW layout: [C_out, C_in / groups, kH, kW].
class FilterDescriptor {
 public:
  FilterDescriptor();
  ~FilterDescriptor();
  FilterDescriptor(const FilterDescriptor&) = delete;
  FilterDescriptor& operator=(const FilterDescriptor&) = delete;
  void set(DType dtype, const int64_t* sizes, const char* op);
  cudnnFilterStruct* get() const { return desc_; }

 private:
  cudnnFilterStruct* desc_ = nullptr;
};

/// A cudnnConvolutionDescriptor_t for a 2-d cross-correlation (what conv2d computes) with p's
/// padding, stride, dilation and group count, computing in `dtype`. Its math type starts as the
/// one octo allows for the dtype (see math_type_for); conv.cpp then sets the cached algorithm's.
class ConvolutionDescriptor {
 public:
  ConvolutionDescriptor();
  ~ConvolutionDescriptor();
  ConvolutionDescriptor(const ConvolutionDescriptor&) = delete;
  ConvolutionDescriptor& operator=(const ConvolutionDescriptor&) = delete;
  void set(DType dtype, const kernels::Conv2dParams& p, bool allow_tf32, const char* op);
  cudnnConvolutionStruct* get() const { return desc_; }

 private:
  cudnnConvolutionStruct* desc_ = nullptr;
};

/// The cudnnMathType_t (as an int) a convolution may use: float32 gets CUDNN_TENSOR_OP_MATH when
/// allow_tf32 (TF32 tensor cores) and CUDNN_FMA_MATH otherwise (the only mode that rules TF32
/// out: CUDNN_DEFAULT_MATH permits it on Ampere and later); float64 gets CUDNN_DEFAULT_MATH.
int math_type_for(DType dtype, bool allow_tf32);

/// t itself when it is packed (row-major contiguous), else a packed copy on t's device held by
/// `buffer` (from the device's caching allocator, queued on the current stream).
kernels::TensorArg packed_input(const kernels::TensorArg& t, DataPtr& buffer);

/// Where a kernel writes an output that cuDNN needs packed: the output itself when it is packed,
/// else a scratch buffer that finish() copies into it. keep_contents: the scratch starts as a
/// copy of the output (for in/out arguments such as running statistics).
class PackedOutput {
 public:
  explicit PackedOutput(const kernels::TensorArg& out, bool keep_contents = false);
  const kernels::TensorArg& arg() const { return packed_; }
  void* data() const { return packed_.data; }
  /// Copies the scratch into the output (a no-op when the output was packed).
  void finish();

 private:
  kernels::TensorArg out_;
  kernels::TensorArg packed_;
  DataPtr buffer_;
};

/// A packed scratch tensor of the given sizes on `device`, held by `buffer` (from the device's
/// caching allocator), filled with `fill` when given: ones for a missing batch-norm weight, zeros
/// for a missing bias, nothing for a gradient nobody asked for.
kernels::TensorArg scratch_tensor(Device device, DType dtype, int ndim, const int64_t* sizes,
                                  DataPtr& buffer, std::optional<double> fill = std::nullopt);

/// A convolution algorithm choice: cuDNN's algorithm enum and math type (cudnnMathType_t) as ints.
struct ConvAlgorithm {
  int algo = 0;
  int math_type = 0;
};

/// The process-wide cache of convolution algorithm choices, keyed by everything that can change
/// the choice (built by conv.cpp: direction, device, dtype, sizes, strides, parameters, math mode,
/// pointer alignment). Thread-safe; entries are never evicted.
class ConvAlgorithmCache {
 public:
  static ConvAlgorithmCache& instance();
  std::optional<ConvAlgorithm> find(const std::vector<int64_t>& key) const;
  /// Keeps the first choice when two threads race to insert the same key.
  ConvAlgorithm insert(const std::vector<int64_t>& key, ConvAlgorithm choice);
  size_t size() const;

 private:
  mutable std::mutex mutex_;
  std::map<std::vector<int64_t>, ConvAlgorithm> map_;
};

}  // namespace detail
}  // namespace octo::cuda
