// softmax and log_softmax, forward and backward. (placeholder: not implemented yet)
#include "autograd/ops/nn_ops.h"
#include "core/error.h"

#define OCTO_TODO(name) OCTO_THROW(::octo::NotImplementedError, name " is not implemented yet")

namespace octo {

Tensor softmax(const Tensor& x, int64_t dim) { OCTO_TODO("softmax"); }
Tensor log_softmax(const Tensor& x, int64_t dim) { OCTO_TODO("log_softmax"); }
Tensor Tensor::softmax(int64_t dim) const { OCTO_TODO("softmax"); }
Tensor Tensor::log_softmax(int64_t dim) const { OCTO_TODO("log_softmax"); }

}  // namespace octo
