// matmul, mm, bmm, linear and their backward. (placeholder: not implemented yet)
#include "autograd/ops/linalg.h"
#include "core/error.h"

#define OCTO_TODO(name) OCTO_THROW(::octo::NotImplementedError, name " is not implemented yet")

namespace octo {

Tensor matmul(const Tensor& a, const Tensor& b) { OCTO_TODO("matmul"); }
Tensor mm(const Tensor& a, const Tensor& b) { OCTO_TODO("mm"); }
Tensor bmm(const Tensor& a, const Tensor& b) { OCTO_TODO("bmm"); }
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) { OCTO_TODO("linear"); }
Tensor Tensor::matmul(const Tensor& other) const { OCTO_TODO("matmul"); }

}  // namespace octo
