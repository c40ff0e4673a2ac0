// Activation layers: each forwards to its op (nn::functional for GELU's tanh form).
#include "nn/activation.h"

#include "autograd/ops/elementwise.h"
#include "autograd/ops/nn_ops.h"
#include "nn/functional.h"

namespace octo::nn {

Tensor ReLU::forward(const Tensor& x) { return octo::relu(x); }

Tensor LeakyReLU::forward(const Tensor& x) { return octo::leaky_relu(x, negative_slope); }
std::string LeakyReLU::extra_repr() const {
  return "negative_slope=" + detail::py_float(negative_slope);
}

GELU::GELU(std::string approx) : Cloneable("GELU"), approximate(std::move(approx)) {
  OCTO_CHECK_VALUE(approximate == "none" || approximate == "tanh",
                   "GELU: approximate must be 'none' or 'tanh', got '", approximate, "'");
}
Tensor GELU::forward(const Tensor& x) { return functional::gelu(x, approximate); }
std::string GELU::extra_repr() const { return "approximate='" + approximate + "'"; }

Tensor SiLU::forward(const Tensor& x) { return octo::silu(x); }
Tensor Tanh::forward(const Tensor& x) { return octo::tanh(x); }
Tensor Sigmoid::forward(const Tensor& x) { return octo::sigmoid(x); }

Tensor Softmax::forward(const Tensor& x) { return octo::softmax(x, dim); }
std::string Softmax::extra_repr() const { return "dim=" + std::to_string(dim); }

Tensor LogSoftmax::forward(const Tensor& x) { return octo::log_softmax(x, dim); }
std::string LogSoftmax::extra_repr() const { return "dim=" + std::to_string(dim); }

}  // namespace octo::nn
