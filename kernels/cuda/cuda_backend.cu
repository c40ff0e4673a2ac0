// The CUDA backend object, and the primitives that are not implemented on the GPU yet.
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

void CudaBackend::unary(UnaryOp, const TensorArg&, const TensorArg&, Scalar, Scalar) {
  not_yet("unary");
}
void CudaBackend::binary(BinaryOp, const TensorArg&, const TensorArg&, const TensorArg&, Scalar) {
  not_yet("binary");
}
void CudaBackend::where(const TensorArg&, const TensorArg&, const TensorArg&, const TensorArg&) {
  not_yet("where");
}
void CudaBackend::reduce(ReduceOp, const TensorArg&, const TensorArg&, Scalar) {
  not_yet("reduce");
}
void CudaBackend::bmm(const TensorArg&, const TensorArg&, const TensorArg&, double, double) {
  not_yet("bmm");
}
void CudaBackend::softmax(const TensorArg&, const TensorArg&, int, bool) { not_yet("softmax"); }
void CudaBackend::softmax_backward(const TensorArg&, const TensorArg&, const TensorArg&, int,
                                   bool) {
  not_yet("softmax_backward");
}
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
void CudaBackend::index_select(const TensorArg&, const TensorArg&, int, const TensorArg&) {
  not_yet("index_select");
}
void CudaBackend::index_add(const TensorArg&, int, const TensorArg&, const TensorArg&) {
  not_yet("index_add");
}
void CudaBackend::gather(const TensorArg&, const TensorArg&, int, const TensorArg&) {
  not_yet("gather");
}
void CudaBackend::scatter_add(const TensorArg&, int, const TensorArg&, const TensorArg&) {
  not_yet("scatter_add");
}
void CudaBackend::uniform(const TensorArg&, double, double, GeneratorState) { not_yet("uniform"); }
void CudaBackend::normal(const TensorArg&, double, double, GeneratorState) { not_yet("normal"); }
void CudaBackend::bernoulli(const TensorArg&, double, GeneratorState) { not_yet("bernoulli"); }
void CudaBackend::randint(const TensorArg&, int64_t, int64_t, GeneratorState) {
  not_yet("randint");
}

}  // namespace octo::kernels
