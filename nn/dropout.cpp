// Dropout: a module over octo::dropout that follows the module's training mode.
#include "nn/dropout.h"

#include "autograd/ops/nn_ops.h"
#include "nn/functional.h"

namespace octo::nn {

Dropout::Dropout(double p_) : Cloneable("Dropout"), p(p_) {
  OCTO_CHECK_VALUE(p >= 0.0 && p <= 1.0,
                   "Dropout: dropout probability has to be between 0 and 1, but got ", p);
}

Tensor Dropout::forward(const Tensor& x) { return dropout(x, p, is_training()); }

std::string Dropout::extra_repr() const { return "p=" + detail::py_float(p) + ", inplace=False"; }

}  // namespace octo::nn
