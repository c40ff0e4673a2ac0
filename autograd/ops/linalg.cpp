// matmul, mm, bmm, linear and their backward; every product runs on the Backend's bmm primitive.
//
// Gradients of a product out = a @ b are grad_a = g @ b^T and grad_b = a^T @ g, written with the
// same tensor ops as the forward (so backward runs on any device the forward does).
// Where a's or b's batch dims were broadcast, the gradient is summed back to its input's shape
// with sum_to.
#include "autograd/ops/linalg.h"

#include "autograd/autocast.h"
#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "autograd/ops/reduce.h"
#include "core/error.h"
#include "kernels/backend.h"

namespace octo {

using autograd::TensorList;

namespace {

/// Checks what every product needs of its two operands and returns their common dtype.
DType check_operands(const char* op, const Tensor& a, const Tensor& b) {
  OCTO_CHECK_VALUE(a.defined() && b.defined(), op, ": expected defined tensors");
  detail::check_same_device({&a, &b});
  return promote_types(a.dtype(), b.dtype());
}

/// float32, float64, bfloat16 and float16 (staged through float32 on the CPU, cuBLAS on CUDA);
/// the error calls the operands input and `b_name`.
void check_floating(const char* op, DType dt, const Tensor& a, const Tensor& b,
                    const char* b_name = "other") {
  detail::check_floating(op, dt, {{"input", a.dtype()}, {b_name, b.dtype()}});
}

/// The kernel-side view of a 2-d or 3-d tensor as 3-d: [rows, cols] -> [1, rows, cols].
kernels::TensorArg arg3(const Tensor& t) {
  kernels::TensorArg arg = t.arg();
  if (arg.ndim == 3) return arg;
  OCTO_INTERNAL_ASSERT(arg.ndim == 2);
  for (int d = 2; d >= 1; --d) {
    arg.sizes[d] = arg.sizes[d - 1];
    arg.strides[d] = arg.strides[d - 1];
  }
  arg.sizes[0] = 1;
  arg.strides[0] = 0;
  arg.ndim = 3;
  return arg;
}

/// out = a @ b + beta * out on the backend (2-d or 3-d, validated, same dtype; no autograd).
void product_into(const Tensor& out, const Tensor& a, const Tensor& b, double beta = 0.0) {
  if (out.numel() == 0) return;
  kernels::backend(out.device()).bmm(arg3(out), arg3(a), arg3(b), 1.0, beta);
}

/// [M, K] @ [K, N] without autograd.
Tensor mm_raw(const Tensor& a, const Tensor& b) {
  Tensor out = detail::make_empty({a.size(0), b.size(1)}, a.dtype(), a.device());
  product_into(out, a, b);
  return out;
}

/// Product of the dims before the last `keep` (the rows a batched product folds together).
int64_t leading_numel(const Shape& s, size_t keep) {
  int64_t n = 1;
  for (size_t i = 0; i + keep < s.size(); ++i) n *= s[i];
  return n;
}

Shape concat(Shape head, std::initializer_list<int64_t> tail) {
  head.insert(head.end(), tail);
  return head;
}

/// NumPy broadcast of two batch shapes; ValueError naming the operands' shapes otherwise.
Shape broadcast_batch(const Shape& x, const Shape& y, const Tensor& a, const Tensor& b) {
  size_t n = std::max(x.size(), y.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t dx = i < n - x.size() ? 1 : x[i - (n - x.size())];
    int64_t dy = i < n - y.size() ? 1 : y[i - (n - y.size())];
    OCTO_CHECK_VALUE(dx == dy || dx == 1 || dy == 1, "matmul: batch dims ", x, " and ", y,
                     " cannot be broadcast together, got ", a.sizes(), " and ", b.sizes());
    out[i] = dx == 1 ? dy : dx;
  }
  return out;
}

/// a [..., M, K] @ b [..., K, N] with broadcast batch dims (both at least 2-d), no autograd.
Tensor matmul_raw(const Tensor& a, const Tensor& b) {
  NoGradGuard no_grad;
  const int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
  if (a.dim() == 2 && b.dim() == 2) return mm_raw(a, b);
  if (b.dim() == 2) {
    // One matrix on the right: fold a's batch dims into its rows -- one large product.
    Shape out_shape(a.sizes().begin(), a.sizes().end() - 1);
    out_shape.push_back(N);
    return mm_raw(a.reshape({leading_numel(a.sizes(), 1), K}), b).view(out_shape);
  }
  Shape batch = broadcast_batch(Shape(a.sizes().begin(), a.sizes().end() - 2),
                                Shape(b.sizes().begin(), b.sizes().end() - 2), a, b);
  const int64_t B = detail::shape_numel(batch);
  // expand gives stride-0 batch dims; reshape keeps them as views when they merge into one
  // dim (the kernel reads stride-0 batches directly) and copies otherwise, as PyTorch does.
  Tensor a3 = a.expand(concat(batch, {M, K})).reshape({B, M, K});
  Tensor b3 = b.expand(concat(batch, {K, N})).reshape({B, K, N});
  Tensor out = detail::make_empty(concat(batch, {M, N}), a.dtype(), a.device());
  product_into(out.view({B, M, N}), a3, b3);
  return out;
}

/// x summed down to shape when broadcasting made it larger (sum_to), else x itself.
Tensor reduce_to(const Tensor& x, const Shape& shape) {
  return x.sizes() == shape ? x : sum_to(x, shape);
}

}  // namespace

Tensor mm(const Tensor& a_in, const Tensor& b_in) {
  if (amp::Cast cast{"mm", a_in}) return mm(cast(a_in), cast(b_in));  // Note [Autocast]
  DType dt = check_operands("mm", a_in, b_in);
  OCTO_CHECK_VALUE(a_in.dim() == 2 && b_in.dim() == 2, "mm: expected 2-d tensors, got ",
                   a_in.sizes(), " and ", b_in.sizes());
  OCTO_CHECK_VALUE(a_in.size(1) == b_in.size(0), "mm: expected a.size(1) == b.size(0), got ",
                   a_in.sizes(), " and ", b_in.sizes());
  check_floating("mm", dt, a_in, b_in);
  Tensor a = a_in.to(dt), b = b_in.to(dt);
  // a: [M, K], b: [K, N] -> out: [M, N]
  Tensor out = mm_raw(a, b);
  bool need_a = a.requires_grad(), need_b = b.requires_grad();
  return autograd::record(
      "MmBackward", out, {a, b}, {a, b},
      [need_a, need_b](const TensorList& g, const TensorList& s) -> TensorList {
        return {need_a ? mm(g[0], s[1].t()) : Tensor(), need_b ? mm(s[0].t(), g[0]) : Tensor()};
      });
}

Tensor bmm(const Tensor& a_in, const Tensor& b_in) {
  if (amp::Cast cast{"bmm", a_in}) return bmm(cast(a_in), cast(b_in));  // Note [Autocast]
  DType dt = check_operands("bmm", a_in, b_in);
  OCTO_CHECK_VALUE(a_in.dim() == 3 && b_in.dim() == 3, "bmm: expected 3-d tensors, got ",
                   a_in.sizes(), " and ", b_in.sizes());
  OCTO_CHECK_VALUE(a_in.size(0) == b_in.size(0),
                   "bmm: expected a.size(0) == b.size(0) (batch sizes), got ", a_in.sizes(),
                   " and ", b_in.sizes());
  OCTO_CHECK_VALUE(a_in.size(2) == b_in.size(1), "bmm: expected a.size(2) == b.size(1), got ",
                   a_in.sizes(), " and ", b_in.sizes());
  check_floating("bmm", dt, a_in, b_in);
  Tensor a = a_in.to(dt), b = b_in.to(dt);
  // a: [B, M, K], b: [B, K, N] -> out: [B, M, N]
  Tensor out = detail::make_empty({a.size(0), a.size(1), b.size(2)}, dt, a.device());
  product_into(out, a, b);
  bool need_a = a.requires_grad(), need_b = b.requires_grad();
  return autograd::record("BmmBackward", out, {a, b}, {a, b},
                          [need_a, need_b](const TensorList& g, const TensorList& s) -> TensorList {
                            return {need_a ? bmm(g[0], s[1].transpose(1, 2)) : Tensor(),
                                    need_b ? bmm(s[0].transpose(1, 2), g[0]) : Tensor()};
                          });
}

Tensor matmul(const Tensor& a_in, const Tensor& b_in) {
  if (amp::Cast cast{"matmul", a_in}) return matmul(cast(a_in), cast(b_in));  // Note [Autocast]
  DType dt = check_operands("matmul", a_in, b_in);
  const int64_t da = a_in.dim(), db = b_in.dim();
  OCTO_CHECK_VALUE(da >= 1 && db >= 1, "matmul: both arguments need to be at least 1-d, got ",
                   a_in.sizes(), " and ", b_in.sizes());
  const int64_t k_b = db == 1 ? b_in.size(0) : b_in.size(-2);
  OCTO_CHECK_VALUE(a_in.size(-1) == k_b, "matmul: expected a.size(-1) == b.size(",
                   db == 1 ? "0" : "-2", "), got ", a_in.sizes(), " and ", b_in.sizes());
  check_floating("matmul", dt, a_in, b_in);
  if (da == 2 && db == 2) return mm(a_in, b_in);
  Tensor a = a_in.to(dt), b = b_in.to(dt);

  // 1-d operands are promoted to matrices -- a: [K] -> [1, K], b: [K] -> [K, 1] -- and the
  // added dim is dropped from the result again.
  Tensor out;
  {
    NoGradGuard no_grad;
    Tensor out2 = matmul_raw(da == 1 ? a.unsqueeze(0) : a, db == 1 ? b.unsqueeze(1) : b);
    Shape shape = out2.sizes();
    if (da == 1) shape.erase(shape.end() - 2);  // the M = 1 dim
    if (db == 1) shape.erase(shape.end() - 1);  // the N = 1 dim
    out = out2.view(shape);
  }
  bool need_a = a.requires_grad(), need_b = b.requires_grad();
  return autograd::record(
      "MatmulBackward", out, {a, b}, {a, b},
      [da, db, need_a, need_b](const TensorList& g, const TensorList& s) -> TensorList {
        const Tensor& a = s[0];
        const Tensor& b = s[1];
        Tensor a2 = da == 1 ? a.unsqueeze(0) : a;  // [..., M, K]
        Tensor b2 = db == 1 ? b.unsqueeze(1) : b;  // [..., K, N]
        Tensor g2 = g[0];                          // -> [batch..., M, N]
        if (da == 1 && db == 1) {
          g2 = g2.unsqueeze(0).unsqueeze(0);  // 0-d -> [1, 1]
        } else {
          if (da == 1) g2 = g2.unsqueeze(-2);
          if (db == 1) g2 = g2.unsqueeze(-1);
        }
        Tensor grad_a, grad_b;
        if (need_a)
          grad_a = reduce_to(matmul(g2, b2.transpose(-1, -2)), a2.sizes()).reshape(a.sizes());
        if (need_b) {
          if (b2.dim() == 2 && a2.dim() > 2) {
            // b was shared by every batch entry: fold the batch into one product.
            int64_t rows = leading_numel(a2.sizes(), 1);
            grad_b = mm(a2.reshape({rows, a2.size(-1)}).t(), g2.reshape({rows, g2.size(-1)}));
          } else {
            grad_b = reduce_to(matmul(a2.transpose(-1, -2), g2), b2.sizes());
          }
          grad_b = grad_b.reshape(b.sizes());
        }
        return {grad_a, grad_b};
      });
}

Tensor Tensor::matmul(const Tensor& other) const { return octo::matmul(*this, other); }

Tensor linear(const Tensor& x_in, const Tensor& w_in, const Tensor& bias_in) {
  if (amp::Cast cast{"linear", x_in})  // Note [Autocast]
    return linear(cast(x_in), cast(w_in), cast(bias_in));
  DType dt = check_operands("linear", x_in, w_in);
  if (bias_in.defined()) {
    detail::check_same_device({&x_in, &w_in, &bias_in});
    dt = promote_types(dt, bias_in.dtype());
  }
  OCTO_CHECK_VALUE(w_in.dim() == 2,
                   "linear: expected a 2-d weight [out_features, in_features], got ", w_in.sizes());
  OCTO_CHECK_VALUE(x_in.dim() >= 1, "linear: expected an input of at least 1 dim, got ",
                   x_in.sizes());
  OCTO_CHECK_VALUE(x_in.size(-1) == w_in.size(1),
                   "linear: expected x.size(-1) == weight.size(1), got ", x_in.sizes(), " and ",
                   w_in.sizes());
  const int64_t in_f = w_in.size(1), out_f = w_in.size(0);
  OCTO_CHECK_VALUE(!bias_in.defined() || (bias_in.dim() == 1 && bias_in.size(0) == out_f),
                   "linear: expected bias of shape [", out_f, "], got ",
                   bias_in.defined() ? bias_in.sizes() : Shape{});
  check_floating("linear", dt, x_in, w_in, "weight");
  Tensor x = x_in.to(dt), w = w_in.to(dt);
  Tensor bias = bias_in.defined() ? bias_in.to(dt) : Tensor();

  // x: [*, in] -> x2: [R, in]; out2 = x2 @ w^T + bias: [R, out] (the bias is copied in first and
  // the product accumulates onto it, beta = 1).
  const int64_t rows = leading_numel(x.sizes(), 1);
  Shape out_shape(x.sizes().begin(), x.sizes().end() - 1);
  out_shape.push_back(out_f);
  Tensor out;
  {
    NoGradGuard no_grad;
    Tensor out2 = detail::make_empty({rows, out_f}, dt, x.device());
    if (bias.defined() && out2.numel() > 0)
      kernels::backend(x.device()).copy(out2.arg(), bias.expand({rows, out_f}).arg());
    product_into(out2, x.reshape({rows, in_f}), w.t(), bias.defined() ? 1.0 : 0.0);
    out = out2.view(out_shape);
  }
  bool need_x = x.requires_grad(), need_w = w.requires_grad();
  bool has_bias = bias.defined(), need_b = has_bias && bias.requires_grad();
  TensorList inputs{x, w};
  if (bias.defined()) inputs.push_back(bias);
  return autograd::record("LinearBackward", out, inputs, {x, w},
                          [rows, in_f, out_f, has_bias, need_x, need_w, need_b](
                              const TensorList& g, const TensorList& s) -> TensorList {
                            const Tensor& x = s[0];
                            const Tensor& w = s[1];
                            Tensor g2 = g[0].reshape({rows, out_f});  // [R, out]
                            TensorList grads{
                                need_x ? mm(g2, w).reshape(x.sizes()) : Tensor(),
                                need_w ? mm(g2.t(), x.reshape({rows, in_f})) : Tensor()};
                            if (has_bias)
                              grads.push_back(need_b ? sum_to(g[0], {out_f}) : Tensor());
                            return grads;
                          });
}

}  // namespace octo
