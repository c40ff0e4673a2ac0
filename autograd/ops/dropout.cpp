// dropout, forward and backward. (placeholder: not implemented yet)
#include "autograd/ops/nn_ops.h"
#include "core/error.h"

#define OCTO_TODO(name) OCTO_THROW(::octo::NotImplementedError, name " is not implemented yet")

namespace octo {

Tensor dropout(const Tensor& input, double p, bool training) { OCTO_TODO("dropout"); }

}  // namespace octo
