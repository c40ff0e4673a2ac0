// nn::init: PyTorch's initialisation formulas.
#include "nn/init.h"

#include <cmath>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "core/random.h"
#include "kernels/backend.h"

namespace octo::nn::init {

double calculate_gain(Nonlinearity nonlinearity, double param) {
  switch (nonlinearity) {
    case Nonlinearity::Linear:
    case Nonlinearity::Conv:
    case Nonlinearity::Sigmoid:
      return 1.0;
    case Nonlinearity::Tanh:
      return 5.0 / 3.0;
    case Nonlinearity::ReLU:
      return std::sqrt(2.0);
    case Nonlinearity::LeakyReLU:
      return std::sqrt(2.0 / (1.0 + param * param));
    case Nonlinearity::SELU:
      return 3.0 / 4.0;
  }
  return 1.0;
}

std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t) {
  OCTO_CHECK_VALUE(
      t.dim() >= 2,
      "Fan in and fan out can not be computed for tensor with fewer than 2 dimensions, got shape ",
      t.sizes());
  int64_t receptive = 1;
  for (int64_t d = 2; d < t.dim(); ++d) receptive *= t.size(d);
  return {t.size(1) * receptive, t.size(0) * receptive};
}

namespace {
Tensor fill_random(Tensor t, bool normal, double a, double b) {
  NoGradGuard no_grad;
  OCTO_CHECK_VALUE(is_floating(t.dtype()), "init: expected a floating tensor, got ", t.dtype());
  if (t.numel() == 0) return t;
  auto state = default_generator(t.device()).reserve(static_cast<uint64_t>(t.numel()));
  Tensor target = t.is_contiguous() ? t : detail::make_empty(t.sizes(), t.dtype(), t.device());
  auto& backend = kernels::backend(t.device());
  if (normal) {
    backend.normal(target.arg(), a, b, state);
  } else {
    backend.uniform(target.arg(), a, b, state);
  }
  if (!target.is_alias_of(t)) t.copy_(target);
  t.bump_version();
  return t;
}
int64_t fan(const Tensor& t, FanMode mode) {
  auto [in, out] = calculate_fan_in_and_fan_out(t);
  return mode == FanMode::FanIn ? in : out;
}
}  // namespace

Tensor uniform_(Tensor t, double a, double b) { return fill_random(std::move(t), false, a, b); }
Tensor normal_(Tensor t, double mean, double std) {
  return fill_random(std::move(t), true, mean, std);
}
Tensor constant_(Tensor t, double value) {
  NoGradGuard no_grad;
  t.fill_(value);
  return t;
}
Tensor zeros_(Tensor t) { return constant_(std::move(t), 0.0); }
Tensor ones_(Tensor t) { return constant_(std::move(t), 1.0); }

Tensor xavier_uniform_(Tensor t, double gain) {
  auto [in, out] = calculate_fan_in_and_fan_out(t);
  double std = gain * std::sqrt(2.0 / static_cast<double>(in + out));
  double bound = std::sqrt(3.0) * std;
  return uniform_(std::move(t), -bound, bound);
}

Tensor xavier_normal_(Tensor t, double gain) {
  auto [in, out] = calculate_fan_in_and_fan_out(t);
  return normal_(std::move(t), 0.0, gain * std::sqrt(2.0 / static_cast<double>(in + out)));
}

Tensor kaiming_uniform_(Tensor t, double a, FanMode mode, Nonlinearity nonlinearity) {
  double std = calculate_gain(nonlinearity, a) / std::sqrt(static_cast<double>(fan(t, mode)));
  double bound = std::sqrt(3.0) * std;
  return uniform_(std::move(t), -bound, bound);
}

Tensor kaiming_normal_(Tensor t, double a, FanMode mode, Nonlinearity nonlinearity) {
  double std = calculate_gain(nonlinearity, a) / std::sqrt(static_cast<double>(fan(t, mode)));
  return normal_(std::move(t), 0.0, std);
}

}  // namespace octo::nn::init
