// cat/stack/split/chunk, index_select, gather, scatter_add, embedding. (placeholder: not implemented yet)
#include "autograd/ops/indexing.h"
#include "core/error.h"

#define OCTO_TODO(name) OCTO_THROW(::octo::NotImplementedError, name " is not implemented yet")

namespace octo {

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) { OCTO_TODO("cat"); }
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) { OCTO_TODO("stack"); }
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) { OCTO_TODO("split"); }
std::vector<Tensor> split_with_sizes(const Tensor& x, const Shape& sizes, int64_t dim) { OCTO_TODO("split_with_sizes"); }
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) { OCTO_TODO("chunk"); }
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) { OCTO_TODO("index_select"); }
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) { OCTO_TODO("gather"); }
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) { OCTO_TODO("scatter_add"); }
Tensor embedding(const Tensor& weight, const Tensor& indices) { OCTO_TODO("embedding"); }
Tensor one_hot(const Tensor& indices, int64_t num_classes) { OCTO_TODO("one_hot"); }
Tensor masked_fill(const Tensor& x, const Tensor& mask, Scalar value) { OCTO_TODO("masked_fill"); }

}  // namespace octo
