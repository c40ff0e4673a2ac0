// Reductions and their backward. (placeholder: not implemented yet)
#include "autograd/ops/reduce.h"
#include "core/error.h"

#define OCTO_TODO(name) OCTO_THROW(::octo::NotImplementedError, name " is not implemented yet")

namespace octo {

Tensor sum(const Tensor& x) { OCTO_TODO("sum"); }
Tensor sum(const Tensor& x, const Shape& dims, bool keepdim) { OCTO_TODO("sum"); }
Tensor mean(const Tensor& x) { OCTO_TODO("mean"); }
Tensor mean(const Tensor& x, const Shape& dims, bool keepdim) { OCTO_TODO("mean"); }
Tensor prod(const Tensor& x, int64_t dim, bool keepdim) { OCTO_TODO("prod"); }
Tensor max(const Tensor& x) { OCTO_TODO("max"); }
Tensor min(const Tensor& x) { OCTO_TODO("min"); }
std::pair<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim) { OCTO_TODO("max"); }
std::pair<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim) { OCTO_TODO("min"); }
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) { OCTO_TODO("argmax"); }
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim) { OCTO_TODO("argmin"); }
Tensor var(const Tensor& x, const Shape& dims, int64_t correction, bool keepdim) { OCTO_TODO("var"); }
Tensor std(const Tensor& x, const Shape& dims, int64_t correction, bool keepdim) { OCTO_TODO("std"); }
Tensor logsumexp(const Tensor& x, int64_t dim, bool keepdim) { OCTO_TODO("logsumexp"); }
Tensor sum_to(const Tensor& x, const Shape& shape) { OCTO_TODO("sum_to"); }
Tensor Tensor::sum() const { OCTO_TODO("sum"); }
Tensor Tensor::sum(const Shape& dims, bool keepdim) const { OCTO_TODO("sum"); }
Tensor Tensor::mean() const { OCTO_TODO("mean"); }
Tensor Tensor::mean(const Shape& dims, bool keepdim) const { OCTO_TODO("mean"); }
Tensor Tensor::max() const { OCTO_TODO("max"); }
Tensor Tensor::min() const { OCTO_TODO("min"); }
Tensor Tensor::argmax(int64_t dim, bool keepdim) const { OCTO_TODO("argmax"); }

}  // namespace octo
