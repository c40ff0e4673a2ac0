// Elementwise ops with broadcasting, forward and backward side by side. (placeholder: not implemented yet)
#include "autograd/ops/elementwise.h"
#include "core/error.h"

#define OCTO_TODO(name) OCTO_THROW(::octo::NotImplementedError, name " is not implemented yet")

namespace octo {

Tensor add(const Tensor& a, const Tensor& b, Scalar alpha) { OCTO_TODO("add"); }
Tensor sub(const Tensor& a, const Tensor& b, Scalar alpha) { OCTO_TODO("sub"); }
Tensor mul(const Tensor& a, const Tensor& b) { OCTO_TODO("mul"); }
Tensor div(const Tensor& a, const Tensor& b) { OCTO_TODO("div"); }
Tensor pow(const Tensor& a, const Tensor& exponent) { OCTO_TODO("pow"); }
Tensor pow(const Tensor& a, Scalar exponent) { OCTO_TODO("pow"); }
Tensor maximum(const Tensor& a, const Tensor& b) { OCTO_TODO("maximum"); }
Tensor minimum(const Tensor& a, const Tensor& b) { OCTO_TODO("minimum"); }
Tensor neg(const Tensor& x) { OCTO_TODO("neg"); }
Tensor abs(const Tensor& x) { OCTO_TODO("abs"); }
Tensor sign(const Tensor& x) { OCTO_TODO("sign"); }
Tensor exp(const Tensor& x) { OCTO_TODO("exp"); }
Tensor log(const Tensor& x) { OCTO_TODO("log"); }
Tensor log1p(const Tensor& x) { OCTO_TODO("log1p"); }
Tensor expm1(const Tensor& x) { OCTO_TODO("expm1"); }
Tensor sqrt(const Tensor& x) { OCTO_TODO("sqrt"); }
Tensor rsqrt(const Tensor& x) { OCTO_TODO("rsqrt"); }
Tensor sin(const Tensor& x) { OCTO_TODO("sin"); }
Tensor cos(const Tensor& x) { OCTO_TODO("cos"); }
Tensor square(const Tensor& x) { OCTO_TODO("square"); }
Tensor reciprocal(const Tensor& x) { OCTO_TODO("reciprocal"); }
Tensor erf(const Tensor& x) { OCTO_TODO("erf"); }
Tensor floor(const Tensor& x) { OCTO_TODO("floor"); }
Tensor ceil(const Tensor& x) { OCTO_TODO("ceil"); }
Tensor round(const Tensor& x) { OCTO_TODO("round"); }
Tensor relu(const Tensor& x) { OCTO_TODO("relu"); }
Tensor leaky_relu(const Tensor& x, double negative_slope) { OCTO_TODO("leaky_relu"); }
Tensor gelu(const Tensor& x) { OCTO_TODO("gelu"); }
Tensor silu(const Tensor& x) { OCTO_TODO("silu"); }
Tensor sigmoid(const Tensor& x) { OCTO_TODO("sigmoid"); }
Tensor tanh(const Tensor& x) { OCTO_TODO("tanh"); }
Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max) { OCTO_TODO("clamp"); }
Tensor clamp_min(const Tensor& x, Scalar min) { OCTO_TODO("clamp_min"); }
Tensor clamp_max(const Tensor& x, Scalar max) { OCTO_TODO("clamp_max"); }
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) { OCTO_TODO("where"); }
Tensor eq(const Tensor& a, const Tensor& b) { OCTO_TODO("eq"); }
Tensor ne(const Tensor& a, const Tensor& b) { OCTO_TODO("ne"); }
Tensor lt(const Tensor& a, const Tensor& b) { OCTO_TODO("lt"); }
Tensor le(const Tensor& a, const Tensor& b) { OCTO_TODO("le"); }
Tensor gt(const Tensor& a, const Tensor& b) { OCTO_TODO("gt"); }
Tensor ge(const Tensor& a, const Tensor& b) { OCTO_TODO("ge"); }
Tensor logical_not(const Tensor& x) { OCTO_TODO("logical_not"); }
Tensor logical_and(const Tensor& a, const Tensor& b) { OCTO_TODO("logical_and"); }
Tensor logical_or(const Tensor& a, const Tensor& b) { OCTO_TODO("logical_or"); }
Tensor operator==(const Tensor& a, const Tensor& b) { OCTO_TODO("operator=="); }
Tensor operator!=(const Tensor& a, const Tensor& b) { OCTO_TODO("operator!="); }
Tensor operator<(const Tensor& a, const Tensor& b) { OCTO_TODO("operator<"); }
Tensor operator<=(const Tensor& a, const Tensor& b) { OCTO_TODO("operator<="); }
Tensor operator>(const Tensor& a, const Tensor& b) { OCTO_TODO("operator>"); }
Tensor operator>=(const Tensor& a, const Tensor& b) { OCTO_TODO("operator>="); }
bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol) { OCTO_TODO("allclose"); }
Shape broadcast_shapes(const Shape& a, const Shape& b) { OCTO_TODO("broadcast_shapes"); }
Tensor Tensor::add(const Tensor& other) const { OCTO_TODO("add"); }
Tensor Tensor::sub(const Tensor& other) const { OCTO_TODO("sub"); }
Tensor Tensor::mul(const Tensor& other) const { OCTO_TODO("mul"); }
Tensor Tensor::div(const Tensor& other) const { OCTO_TODO("div"); }
Tensor Tensor::pow(Scalar exponent) const { OCTO_TODO("pow"); }
Tensor Tensor::neg() const { OCTO_TODO("neg"); }
Tensor Tensor::abs() const { OCTO_TODO("abs"); }
Tensor Tensor::exp() const { OCTO_TODO("exp"); }
Tensor Tensor::log() const { OCTO_TODO("log"); }
Tensor Tensor::sqrt() const { OCTO_TODO("sqrt"); }
Tensor Tensor::relu() const { OCTO_TODO("relu"); }
Tensor Tensor::sigmoid() const { OCTO_TODO("sigmoid"); }
Tensor Tensor::tanh() const { OCTO_TODO("tanh"); }
Tensor& Tensor::add_(const Tensor& other, Scalar alpha) { OCTO_TODO("add_"); }
Tensor& Tensor::mul_(const Tensor& other) { OCTO_TODO("mul_"); }
Tensor& Tensor::mul_(Scalar s) { OCTO_TODO("mul_"); }
Tensor operator+(const Tensor& a, const Tensor& b) { OCTO_TODO("operator+"); }
Tensor operator-(const Tensor& a, const Tensor& b) { OCTO_TODO("operator-"); }
Tensor operator*(const Tensor& a, const Tensor& b) { OCTO_TODO("operator*"); }
Tensor operator/(const Tensor& a, const Tensor& b) { OCTO_TODO("operator/"); }
Tensor operator+(const Tensor& a, Scalar b) { OCTO_TODO("operator+"); }
Tensor operator-(const Tensor& a, Scalar b) { OCTO_TODO("operator-"); }
Tensor operator*(const Tensor& a, Scalar b) { OCTO_TODO("operator*"); }
Tensor operator/(const Tensor& a, Scalar b) { OCTO_TODO("operator/"); }
Tensor operator+(Scalar a, const Tensor& b) { OCTO_TODO("operator+"); }
Tensor operator-(Scalar a, const Tensor& b) { OCTO_TODO("operator-"); }
Tensor operator*(Scalar a, const Tensor& b) { OCTO_TODO("operator*"); }
Tensor operator/(Scalar a, const Tensor& b) { OCTO_TODO("operator/"); }
Tensor operator-(const Tensor& a) { OCTO_TODO("operator-"); }
Tensor& operator+=(Tensor& a, const Tensor& b) { OCTO_TODO("operator+="); }
Tensor& operator-=(Tensor& a, const Tensor& b) { OCTO_TODO("operator-="); }
Tensor& operator*=(Tensor& a, const Tensor& b) { OCTO_TODO("operator*="); }
Tensor& operator*=(Tensor& a, Scalar b) { OCTO_TODO("operator*="); }

}  // namespace octo
