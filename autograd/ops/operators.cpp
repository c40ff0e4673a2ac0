// Tensor's arithmetic methods and operators, and the in-place ops: thin wrappers over the ops of
// elementwise.cpp, and add_ / mul_ with their recorded backwards.
#include "autograd/function.h"
#include "autograd/inplace.h"
#include "autograd/ops/elementwise.h"
#include "autograd/ops/elementwise_impl.h"
#include "core/error.h"
#include "kernels/backend.h"

namespace octo {

using autograd::TensorList;
using kernels::BinaryOp;
using kernels::UnaryOp;
using namespace elementwise_impl;

// --- methods and operators -----------------------------------------------------------------------

Tensor Tensor::add(const Tensor& other) const { return octo::add(*this, other); }
Tensor Tensor::sub(const Tensor& other) const { return octo::sub(*this, other); }
Tensor Tensor::mul(const Tensor& other) const { return octo::mul(*this, other); }
Tensor Tensor::div(const Tensor& other) const { return octo::div(*this, other); }
Tensor Tensor::pow(Scalar exponent) const { return octo::pow(*this, exponent); }
Tensor Tensor::neg() const { return octo::neg(*this); }
Tensor Tensor::abs() const { return octo::abs(*this); }
Tensor Tensor::exp() const { return octo::exp(*this); }
Tensor Tensor::log() const { return octo::log(*this); }
Tensor Tensor::sqrt() const { return octo::sqrt(*this); }
Tensor Tensor::relu() const { return octo::relu(*this); }
Tensor Tensor::sigmoid() const { return octo::sigmoid(*this); }
Tensor Tensor::tanh() const { return octo::tanh(*this); }

namespace {
/// Checks an in-place op `self op= other`: other broadcasts to self, the result type casts to
/// self's dtype. Returns other as self's dtype and shape (a copy when it overlaps self).
Tensor inplace_operand(const char* op, const Tensor& self, const Tensor& other) {
  check_inputs(op, {&self, &other});
  Shape shape = broadcast_impl(self.sizes(), other.sizes(), op);
  OCTO_CHECK_VALUE(shape == self.sizes(), op, ": output with shape ", self.sizes(),
                   " doesn't match the broadcast shape ", shape);
  DType rt = result_type(self, other);
  OCTO_CHECK_VALUE(can_cast(rt, self.dtype()), op, ": result type ", rt,
                   " can't be cast to the desired output type ", self.dtype());
  Tensor o = convert_raw(other, self.dtype());
  // e.g. x.add_(x.t()): read a copy, not the values being written
  if (o.is_alias_of(self)) o = copy_raw(o);
  return broadcast_view(o, shape);
}
}  // namespace

const Tensor& Tensor::add_(const Tensor& other, Scalar alpha) const {
  autograd::check_inplace(*this);
  Tensor o = inplace_operand("add_", *this, other);
  OCTO_CHECK_VALUE(
      is_floating(dtype()) || alpha.is_integral(),
      "add_: for integral input tensors, argument alpha must not be a floating point number, got ",
      alpha);
  if (!is_one(alpha)) o = raw_unary(UnaryOp::MulScalar, o, alpha);
  if (numel() > 0) kernels::backend(device()).binary(BinaryOp::Add, arg(), arg(), o.arg(), {});
  Input io(other);
  autograd::record_inplace(
      "AddBackward", *this, {other}, {},
      [io, alpha](const TensorList& g, const TensorList&) -> TensorList {
        return {g[0], io.grad([&] { return is_one(alpha) ? g[0] : g[0] * alpha; })};
      });
  return *this;
}

const Tensor& Tensor::mul_(const Tensor& other) const {
  autograd::check_inplace(*this);
  Tensor o = inplace_operand("mul_", *this, other);
  Input io(other);
  // The value before the update, for d/d other. Cloned with its history when self has one, so
  // that under create_graph d/d other = g * old_self can be differentiated again through self.
  Tensor old_self;
  if (io.needs && autograd::GradMode::is_enabled())
    old_self = requires_grad() ? clone() : copy_raw(*this);
  if (numel() > 0) kernels::backend(device()).binary(BinaryOp::Mul, arg(), arg(), o.arg(), {});
  bool self_needs = requires_grad();
  // x.mul_(x.detach()) overwrites the saved factor: record_inplace's version check reports it.
  autograd::record_inplace(
      "MulBackward", *this, {other}, {other, old_self},
      [io, self_needs](const TensorList& g, const TensorList& s) -> TensorList {
        return {self_needs ? g[0] * s[0] : Tensor(), io.grad([&] { return g[0] * s[1]; })};
      });
  return *this;
}

const Tensor& Tensor::mul_(Scalar s) const {
  autograd::check_inplace(*this);
  OCTO_CHECK_VALUE(defined(), "mul_: expected a defined tensor");
  OCTO_CHECK_VALUE(can_cast(result_type(dtype(), s), dtype()), "mul_: result type ",
                   result_type(dtype(), s), " can't be cast to the desired output type ", dtype());
  if (numel() > 0) kernels::backend(device()).unary(UnaryOp::MulScalar, arg(), arg(), s, {});
  autograd::record_inplace(
      "MulBackward", *this, {}, {},
      [s](const TensorList& g, const TensorList&) -> TensorList { return {g[0] * s}; });
  return *this;
}

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }

Tensor operator+(const Tensor& a, Scalar b) {
  check_inputs("add", {&a});
  DType dt = result_type(a.dtype(), b);
  Tensor out = raw_unary(UnaryOp::AddScalar, convert_raw(a, dt), b);
  Input ia(a);
  return autograd::record("AddBackward", out, {a}, {},
                          [ia](const TensorList& g, const TensorList&) -> TensorList {
                            return {ia.grad([&] { return g[0]; })};
                          });
}
Tensor operator-(const Tensor& a, Scalar b) { return a + negate(b); }
Tensor operator*(const Tensor& a, Scalar b) {
  check_inputs("mul", {&a});
  DType dt = result_type(a.dtype(), b);
  Tensor out = raw_unary(UnaryOp::MulScalar, convert_raw(a, dt), b);
  Input ia(a);
  return autograd::record("MulBackward", out, {a}, {},
                          [ia, b](const TensorList& g, const TensorList&) -> TensorList {
                            return {ia.grad([&] { return g[0] * b; })};
                          });
}
Tensor operator/(const Tensor& a, Scalar b) {
  check_inputs("div", {&a});
  return div(a, wrap(b, result_type(a.dtype(), b), a.device()));
}
Tensor operator+(Scalar a, const Tensor& b) { return b + a; }
Tensor operator-(Scalar a, const Tensor& b) {
  check_inputs("sub", {&b});
  return sub(wrap(a, result_type(b.dtype(), a), b.device()), b);
}
Tensor operator*(Scalar a, const Tensor& b) { return b * a; }
Tensor operator/(Scalar a, const Tensor& b) {
  check_inputs("div", {&b});
  return div(wrap(a, result_type(b.dtype(), a), b.device()), b);
}
Tensor operator-(const Tensor& a) { return neg(a); }
Tensor& operator+=(Tensor& a, const Tensor& b) {
  a.add_(b);
  return a;
}
Tensor& operator-=(Tensor& a, const Tensor& b) {
  a.sub_(b);
  return a;
}
Tensor& operator*=(Tensor& a, const Tensor& b) {
  a.mul_(b);
  return a;
}
Tensor& operator*=(Tensor& a, Scalar b) {
  a.mul_(b);
  return a;
}

}  // namespace octo
