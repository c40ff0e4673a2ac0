// gradcheck: the full Jacobian, analytic (one backward per output element) vs numerical.
#include "autograd/gradcheck.h"

#include <cmath>
#include <sstream>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/ops/indexing.h"
#include "core/error.h"
#include "tensor/factories.h"

namespace octo::autograd {

namespace {

/// Pointer to element k (row-major order) of a float64 tensor of any strides.
double* element(const Tensor& t, int64_t k) {
  int64_t off = 0;
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    off += (k % t.size(d)) * t.stride(d);
    k /= t.size(d);
  }
  return static_cast<double*>(t.raw_data()) + off;
}

std::vector<double> values(const Tensor& t) { return t.contiguous().to_vector<double>(); }

}  // namespace

bool gradcheck(const std::function<Tensor(const TensorList&)>& fn, const TensorList& inputs,
               double eps, double atol, double rtol, bool raise) {
  std::vector<size_t> checked;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined() || !inputs[i].requires_grad()) continue;
    OCTO_CHECK_VALUE(inputs[i].dtype() == kFloat64 && inputs[i].device().is_cpu(),
                     "gradcheck: input ", i, " must be a float64 cpu tensor, got ",
                     inputs[i].dtype(), " on ", inputs[i].device());
    checked.push_back(i);
  }
  OCTO_CHECK_VALUE(!checked.empty(), "gradcheck: no input requires grad");

  Tensor out = fn(inputs);
  OCTO_CHECK_VALUE(out.dtype() == kFloat64, "gradcheck: the function must return float64, got ",
                   out.dtype());
  const int64_t n_out = out.numel();

  // Analytic Jacobian: row j is the gradient of output element j.
  TensorList wrt;
  for (size_t i : checked) wrt.push_back(inputs[i]);
  std::vector<std::vector<std::vector<double>>> analytic(checked.size());  // [input][out][elem]
  for (int64_t j = 0; j < n_out; ++j) {
    Tensor seed = zeros(out.sizes(), out.options());
    *element(seed, j) = 1.0;
    TensorList g;
    if (out.requires_grad())
      g = grad({out}, wrt, {seed}, /*retain_graph=*/true, /*allow_unused=*/true);
    for (size_t c = 0; c < checked.size(); ++c) {
      const Tensor& x = inputs[checked[c]];
      analytic[c].push_back(c < g.size() && g[c].defined()
                                ? values(g[c])
                                : std::vector<double>(static_cast<size_t>(x.numel()), 0.0));
    }
  }

  // Numerical Jacobian, column by column, perturbing the input's storage directly.
  NoGradGuard no_grad;
  for (size_t c = 0; c < checked.size(); ++c) {
    const Tensor& x = inputs[checked[c]];
    for (int64_t k = 0; k < x.numel(); ++k) {
      double* p = element(x, k);
      double orig = *p;
      *p = orig + eps;
      std::vector<double> plus = values(fn(inputs));
      *p = orig - eps;
      std::vector<double> minus = values(fn(inputs));
      *p = orig;
      for (int64_t j = 0; j < n_out; ++j) {
        double numeric = (plus[j] - minus[j]) / (2 * eps);
        double a = analytic[c][static_cast<size_t>(j)][static_cast<size_t>(k)];
        if (!(std::fabs(a - numeric) <= atol + rtol * std::fabs(numeric))) {
          if (!raise) return false;
          OCTO_THROW(Error, "gradcheck: Jacobian mismatch for input ", checked[c], " (shape ",
                     x.sizes(), "), input element ", k, ", output element ", j,
                     ":\n  numerical: ", numeric, "\n  analytical: ", a, "\n  (atol ", atol,
                     ", rtol ", rtol, ")");
        }
      }
    }
  }
  return true;
}

bool gradgradcheck(const std::function<Tensor(const TensorList&)>& fn, const TensorList& inputs,
                   double eps, double atol, double rtol, bool raise) {
  Tensor out;
  {
    EnableGradGuard grad_mode;
    out = fn(inputs);
  }
  // A fixed random direction for the output gradient; it is an input of the checked function,
  // so the derivative of the gradient with respect to it (the backward's linearity) is checked
  // too.
  const Tensor v = randn(out.sizes(), {.dtype = kFloat64, .device = out.device()}).requires_grad_();
  const size_t n = inputs.size();
  std::vector<size_t> wrt;
  for (size_t i = 0; i < n; ++i)
    if (inputs[i].defined() && inputs[i].requires_grad()) wrt.push_back(i);
  auto first_derivative = [&](const TensorList& in) -> Tensor {
    EnableGradGuard grad_mode;  // gradcheck runs its numerical pass under NoGradGuard
    TensorList x(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(n));
    TensorList targets;
    for (size_t i : wrt) targets.push_back(x[i]);
    Tensor y = fn(x);
    TensorList g = grad({y}, targets, {in[n]}, /*retain_graph=*/true, /*allow_unused=*/true,
                        /*create_graph=*/true);
    TensorList parts;
    for (size_t k = 0; k < g.size(); ++k) {
      parts.push_back(g[k].defined() ? g[k].reshape({-1})
                                     : zeros({targets[k].numel()}, targets[k].options()));
    }
    return cat(parts);
  };
  TensorList all(inputs);
  all.push_back(v);
  return gradcheck(first_derivative, all, eps, atol, rtol, raise);
}

}  // namespace octo::autograd
