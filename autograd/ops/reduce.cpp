// Reductions (sum, mean, prod, max, min, arg*, var, std, logsumexp) and their backward.
//
// Every reduction runs the Backend::reduce kernel into the keepdim form of its result (size 1 in
// each reduced dim), then views it as the shape the caller asked for. Backward formulas start by
// viewing the incoming gradient back in keepdim form, which then broadcasts against the input.
#include "autograd/ops/reduce.h"

#include <algorithm>
#include <limits>

#include "autograd/autocast.h"
#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "autograd/ops/elementwise.h"
#include "core/error.h"
#include "kernels/backend.h"
#include "tensor/factories.h"

namespace octo {

using autograd::TensorList;
using kernels::ReduceOp;

namespace {

/// Which dims `dims` names (negative count from the end; an empty list means all dims, as in
/// torch). ValueError on a repeated dim, IndexError on one out of range.
std::vector<bool> reduce_mask(const Tensor& x, const Shape& dims, const char* op) {
  const int64_t nd = x.dim();
  std::vector<bool> mask(static_cast<size_t>(nd), dims.empty());
  for (int64_t d : dims) {
    int64_t w = detail::wrap_dim(d, nd, op);  // a 0-d tensor accepts 0 and -1
    if (nd == 0) continue;
    OCTO_CHECK_VALUE(!mask[w], op, ": dim ", w, " appears multiple times in the list of dims ",
                     dims);
    mask[w] = true;
  }
  return mask;
}

/// The mask for a single dim.
std::vector<bool> dim_mask(const Tensor& x, int64_t d) {
  std::vector<bool> mask(static_cast<size_t>(x.dim()), false);
  if (x.dim() > 0) mask[d] = true;
  return mask;
}

Shape keep_shape(const Tensor& x, const std::vector<bool>& mask) {
  Shape s = x.sizes();
  for (size_t d = 0; d < s.size(); ++d)
    if (mask[d]) s[d] = 1;
  return s;
}

Shape result_shape(const Tensor& x, const std::vector<bool>& mask, bool keepdim) {
  if (keepdim) return keep_shape(x, mask);
  Shape s;
  for (size_t d = 0; d < mask.size(); ++d)
    if (!mask[d]) s.push_back(x.sizes()[d]);
  return s;
}

/// Number of input elements folded into each output element.
int64_t reduced_count(const Tensor& x, const std::vector<bool>& mask) {
  int64_t n = 1;
  for (size_t d = 0; d < mask.size(); ++d)
    if (mask[d]) n *= x.sizes()[d];
  return n;
}

/// Runs the kernel into a fresh tensor in keepdim form (no autograd).
Tensor reduce_raw(ReduceOp op, const Tensor& x, const std::vector<bool>& mask, DType dtype,
                  Scalar alpha = {}) {
  Tensor out = detail::make_empty(keep_shape(x, mask), dtype, x.device());
  if (out.numel() > 0) kernels::backend(x.device()).reduce(op, out.arg(), x.arg(), alpha);
  return out;
}

/// A contiguous tensor seen with another shape of the same numel (no autograd).
Tensor as_shape(const Tensor& t, const Shape& shape) {
  return detail::make_view(t, shape, detail::contiguous_strides(shape), t.storage_offset());
}

/// The gradient of a reduction seen in keepdim form, ready to broadcast against the input.
/// (A 0-d gradient is expanded rather than reshaped: viewing a 0-d tensor as [1, ...] does not
/// work in views.cpp at the moment.)
Tensor keepdim_grad(const Tensor& g, const Shape& kshape) {
  return g.dim() == 0 ? g.expand(kshape) : g.reshape(kshape);
}

void check_floating(const Tensor& x, const char* op) {
  OCTO_CHECK_VALUE(
      x.is_floating_point(), op,
      "(): could not infer output dtype. Input dtype must be a floating point dtype, got ",
      x.dtype());
}

/// Sum over the masked dims, viewed as `shape`; the backward broadcasts the gradient back.
Tensor sum_masked(const Tensor& x, const std::vector<bool>& mask, const Shape& shape) {
  DType dtype = is_integral(x.dtype(), /*include_bool=*/true) ? kInt64 : x.dtype();
  Tensor keep = reduce_raw(ReduceOp::Sum, x, mask, dtype);
  Shape kshape = keep.sizes(), in_shape = x.sizes();
  return autograd::record("SumBackward", as_shape(keep, shape), {x}, {},
                          [kshape, in_shape](const TensorList& g, const TensorList&) -> TensorList {
                            return {keepdim_grad(g[0], kshape).expand(in_shape)};
                          });
}

/// max / min of all elements; the gradient is shared evenly between tied extremes.
Tensor extreme_all(const Tensor& x, bool is_max) {
  const char* name = is_max ? "max" : "min";
  OCTO_CHECK_INDEX(
      x.numel() > 0, name,
      "(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim with the 'dim' argument.");
  std::vector<bool> mask(static_cast<size_t>(x.dim()), true);
  Tensor out = as_shape(reduce_raw(is_max ? ReduceOp::Max : ReduceOp::Min, x, mask, x.dtype()), {});
  return autograd::record(is_max ? "MaxBackward" : "MinBackward", out, {x}, {x, out},
                          [](const TensorList& g, const TensorList& s) -> TensorList {
                            Tensor hit = eq(s[0], s[1]).to(s[0].dtype());
                            return {hit * (g[0] / sum(hit))};
                          });
}

/// (values, indices) of the max / min along dim; the gradient goes to the index positions.
std::pair<Tensor, Tensor> extreme_dim(const Tensor& x, int64_t dim, bool keepdim, bool is_max) {
  const char* name = is_max ? "max" : "min";
  int64_t d = detail::wrap_dim(dim, x.dim(), name);
  OCTO_CHECK_INDEX(x.dim() == 0 || x.size(d) > 0, name, "(): Expected reduction dim ", d,
                   " to have non-zero size.");
  std::vector<bool> mask = dim_mask(x, d);
  Tensor values = reduce_raw(is_max ? ReduceOp::Max : ReduceOp::Min, x, mask, x.dtype());
  Tensor indices = reduce_raw(is_max ? ReduceOp::ArgMax : ReduceOp::ArgMin, x, mask, kInt64);
  Shape shape = result_shape(x, mask, keepdim), kshape = values.sizes(), in_shape = x.sizes();
  TensorList outs = autograd::record_multi(
      is_max ? "MaxBackward" : "MinBackward", {as_shape(values, shape), as_shape(indices, shape)},
      {x}, {indices},
      [d, kshape, in_shape](const TensorList& g, const TensorList& s) -> TensorList {
        if (!g[0].defined()) return {Tensor()};
        if (in_shape.empty()) return {g[0]};
        // One-hot along d: position == index.
        Shape line(in_shape.size(), 1);
        line[d] = in_shape[d];
        Tensor positions = arange(in_shape[d], {.dtype = kInt64, .device = g[0].device()});
        Tensor hit = eq(positions.reshape(line), s[0]);
        return {where(hit, keepdim_grad(g[0], kshape), scalar_tensor(0, g[0].options()))};
      });
  return {outs[0], outs[1]};
}

Tensor arg_extreme(const Tensor& x, int64_t dim, bool keepdim, bool is_max) {
  const char* name = is_max ? "argmax" : "argmin";
  int64_t d = detail::wrap_dim(dim, x.dim(), name);
  OCTO_CHECK_INDEX(x.dim() == 0 || x.size(d) > 0, name, "(): Expected reduction dim ", d,
                   " to have non-zero size.");
  std::vector<bool> mask = dim_mask(x, d);
  Tensor out = reduce_raw(is_max ? ReduceOp::ArgMax : ReduceOp::ArgMin, x, mask, kInt64);
  return as_shape(out, result_shape(x, mask, keepdim));
}

}  // namespace

Tensor sum(const Tensor& x) { return sum(x, {}, false); }

Tensor sum(const Tensor& x, const Shape& dims, bool keepdim) {
  if (amp::Cast cast{"sum", x}) return sum(cast(x), dims, keepdim);  // Note [Autocast]
  std::vector<bool> mask = reduce_mask(x, dims, "sum");
  return sum_masked(x, mask, result_shape(x, mask, keepdim));
}

Tensor mean(const Tensor& x) { return mean(x, {}, false); }

Tensor mean(const Tensor& x, const Shape& dims, bool keepdim) {
  check_floating(x, "mean");
  std::vector<bool> mask = reduce_mask(x, dims, "mean");
  Tensor keep = reduce_raw(ReduceOp::Mean, x, mask, x.dtype());
  Shape kshape = keep.sizes(), in_shape = x.sizes();
  double scale = 1.0 / static_cast<double>(reduced_count(x, mask));
  return autograd::record(
      "MeanBackward", as_shape(keep, result_shape(x, mask, keepdim)), {x}, {},
      [kshape, in_shape, scale](const TensorList& g, const TensorList&) -> TensorList {
        return {keepdim_grad(g[0], kshape).expand(in_shape) * scale};
      });
}

Tensor prod(const Tensor& x, int64_t dim, bool keepdim) {
  if (amp::Cast cast{"prod", x}) return prod(cast(x), dim, keepdim);  // Note [Autocast]
  int64_t d = detail::wrap_dim(dim, x.dim(), "prod");
  std::vector<bool> mask = dim_mask(x, d);
  DType dtype = is_integral(x.dtype(), /*include_bool=*/true) ? kInt64 : x.dtype();
  Tensor keep = reduce_raw(ReduceOp::Prod, x, mask, dtype);
  Shape kshape = keep.sizes();
  // d(prod)/dx_i is the product of the others. Written with zeros in mind: with no zero in the
  // slice it is prod / x_i; with exactly one zero only that element gets the product of the
  // non-zeros; with more, everything is 0.
  return autograd::record(
      "ProdBackward", as_shape(keep, result_shape(x, mask, keepdim)), {x}, {x},
      [d, kshape](const TensorList& g, const TensorList& s) -> TensorList {
        const Tensor& in = s[0];
        Tensor gk = keepdim_grad(g[0], kshape);
        if (in.dim() == 0) return {gk};
        Tensor zero = eq(in, scalar_tensor(0, in.options()));
        Tensor safe = where(zero, scalar_tensor(1, in.options()), in);
        Tensor nonzero_prod = prod(safe, d, true);
        Tensor zeros_in_slice = sum(zero, {d}, true);
        Tensor none = eq(zeros_in_slice, scalar_tensor(0, zeros_in_slice.options()));
        Tensor one = eq(zeros_in_slice, scalar_tensor(1, zeros_in_slice.options()));
        Tensor others =
            where(none, nonzero_prod / safe,
                  where(logical_and(zero, one), nonzero_prod, scalar_tensor(0, in.options())));
        return {gk * others};
      });
}

Tensor max(const Tensor& x) { return extreme_all(x, true); }
Tensor min(const Tensor& x) { return extreme_all(x, false); }
std::pair<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim) {
  return extreme_dim(x, dim, keepdim, true);
}
std::pair<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim) {
  return extreme_dim(x, dim, keepdim, false);
}
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) {
  return arg_extreme(x, dim, keepdim, true);
}
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim) {
  return arg_extreme(x, dim, keepdim, false);
}

Tensor var(const Tensor& x, const Shape& dims, int64_t correction, bool keepdim) {
  OCTO_CHECK_VALUE(x.is_floating_point(),
                   "var(): std and var only support floating point dtypes, got ", x.dtype());
  std::vector<bool> mask = reduce_mask(x, dims, "var");
  Tensor keep = reduce_raw(ReduceOp::Var, x, mask, x.dtype(), correction);
  Shape kshape = keep.sizes(), wrapped;
  for (size_t d = 0; d < mask.size(); ++d)
    if (mask[d]) wrapped.push_back(static_cast<int64_t>(d));
  // In double, as the kernels do: N - correction overflows int64 for a hostile correction.
  double divisor =
      std::max(0.0, static_cast<double>(reduced_count(x, mask)) - static_cast<double>(correction));
  // d var / dx_i = 2 (x_i - mean) / (N - correction)
  return autograd::record(
      "VarBackward", as_shape(keep, result_shape(x, mask, keepdim)), {x}, {x},
      [kshape, wrapped, divisor](const TensorList& g, const TensorList& s) -> TensorList {
        Tensor centered = s[0] - mean(s[0], wrapped, true);
        return {centered * (keepdim_grad(g[0], kshape) * (2.0 / divisor))};
      });
}

Tensor std(const Tensor& x, const Shape& dims, int64_t correction, bool keepdim) {
  return sqrt(var(x, dims, correction, keepdim));
}

Tensor logsumexp(const Tensor& x, int64_t dim, bool keepdim) {
  if (amp::Cast cast{"logsumexp", x}) return logsumexp(cast(x), dim, keepdim);  // Note [Autocast]
  check_floating(x, "logsumexp");
  int64_t d = detail::wrap_dim(dim, x.dim(), "logsumexp");
  // Shift by the (constant) max for stability; an infinite max shifts by 0 so that all -inf
  // gives -inf and any +inf gives +inf, as torch.
  Tensor shift;
  {
    NoGradGuard no_grad;
    if (x.dim() > 0 && x.size(d) == 0) {
      shift = zeros(keep_shape(x, dim_mask(x, d)), x.options());
    } else {
      Tensor m = max(x, d, true).first;
      Tensor inf = scalar_tensor(std::numeric_limits<double>::infinity(), x.options());
      shift = where(eq(abs(m), inf), scalar_tensor(0, x.options()), m);
    }
  }
  Tensor out = log(sum(exp(x - shift), {d}, true)) + shift;
  return keepdim || x.dim() == 0 ? out : out.squeeze(d);
}

Tensor Tensor::sum() const { return octo::sum(*this); }
Tensor Tensor::sum(const Shape& dims, bool keepdim) const {
  return octo::sum(*this, dims, keepdim);
}
Tensor Tensor::mean() const { return octo::mean(*this); }
Tensor Tensor::mean(const Shape& dims, bool keepdim) const {
  return octo::mean(*this, dims, keepdim);
}
Tensor Tensor::max() const { return octo::max(*this); }
Tensor Tensor::min() const { return octo::min(*this); }
Tensor Tensor::argmax(int64_t dim, bool keepdim) const { return octo::argmax(*this, dim, keepdim); }

}  // namespace octo
