// The CUDA backend object, and the primitives that are not implemented on the GPU yet
// (conv2d, pooling and batch norm: they are meant for cuDNN).
#include "core/error.h"
#include "kernels/cuda/cuda_backend.h"

namespace octo::kernels {

Backend& cuda_backend() {
  static CudaBackend instance;
  return instance;
}

namespace {
[[noreturn]] void not_yet(const char* name) {
  OCTO_THROW(NotImplementedError, "cuda backend: ", name, " is not implemented yet");
}
}  // namespace

void CudaBackend::conv2d_forward(const TensorArg&, const TensorArg&, const TensorArg&,
                                 const TensorArg&, const Conv2dParams&) {
  not_yet("conv2d_forward");
}
void CudaBackend::conv2d_backward_input(const TensorArg&, const TensorArg&, const TensorArg&,
                                        const Conv2dParams&) {
  not_yet("conv2d_backward_input");
}
void CudaBackend::conv2d_backward_weight(const TensorArg&, const TensorArg&, const TensorArg&,
                                         const Conv2dParams&) {
  not_yet("conv2d_backward_weight");
}
void CudaBackend::max_pool2d_forward(const TensorArg&, const TensorArg&, const TensorArg&,
                                     const Pool2dParams&) {
  not_yet("max_pool2d_forward");
}
void CudaBackend::max_pool2d_backward(const TensorArg&, const TensorArg&, const TensorArg&,
                                      const Pool2dParams&) {
  not_yet("max_pool2d_backward");
}
void CudaBackend::avg_pool2d_forward(const TensorArg&, const TensorArg&, const Pool2dParams&) {
  not_yet("avg_pool2d_forward");
}
void CudaBackend::avg_pool2d_backward(const TensorArg&, const TensorArg&, const Pool2dParams&) {
  not_yet("avg_pool2d_backward");
}
void CudaBackend::batch_norm_forward(const TensorArg&, const TensorArg&, const TensorArg&,
                                     const TensorArg&, const TensorArg&, const TensorArg&,
                                     const TensorArg&, const TensorArg&, bool, double, double) {
  not_yet("batch_norm_forward");
}
void CudaBackend::batch_norm_backward(const TensorArg&, const TensorArg&, const TensorArg&,
                                      const TensorArg&, const TensorArg&, const TensorArg&,
                                      const TensorArg&, const TensorArg&) {
  not_yet("batch_norm_backward");
}
}  // namespace octo::kernels
