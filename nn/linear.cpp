// Linear, Identity, Flatten.
#include "nn/linear.h"

#include <cmath>

#include "autograd/ops/linalg.h"
#include "nn/init.h"
#include "tensor/factories.h"

namespace octo::nn {

Linear::Linear(int64_t in, int64_t out, bool bias_)
    : Cloneable("Linear"), in_features(in), out_features(out), has_bias(bias_) {
  OCTO_CHECK_VALUE(in > 0 && out > 0, "Linear: in_features and out_features must be positive, got ",
                   in, " and ", out);
  reset();
}

void Linear::reset() {
  weight = register_parameter("weight", empty({out_features, in_features}));
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (has_bias) {
    bias = register_parameter("bias", empty({out_features}));
    double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
    init::uniform_(bias, -bound, bound);
  } else {
    bias = Tensor();
  }
}

Tensor Linear::forward(const Tensor& x) { return linear(x, weight, bias); }

std::string Linear::extra_repr() const {
  return "in_features=" + std::to_string(in_features) +
         ", out_features=" + std::to_string(out_features) +
         ", bias=" + (has_bias ? "True" : "False");
}

std::string Flatten::extra_repr() const {
  return "start_dim=" + std::to_string(start_dim) + ", end_dim=" + std::to_string(end_dim);
}

}  // namespace octo::nn
