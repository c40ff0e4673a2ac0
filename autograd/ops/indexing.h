// Joining, splitting and indexing: cat, stack, split, chunk, index_select, gather, embedding.
#pragma once

#include <vector>

#include "tensor/tensor.h"

namespace octo {

/// Concatenates along an existing dim; all other dims must match.
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
/// Stacks along a new dim.
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
/// Views of `split_size` along dim (the last may be smaller).
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
/// Views with the given sizes along dim (they must sum to x.size(dim)).
std::vector<Tensor> split_with_sizes(const Tensor& x, const Shape& sizes, int64_t dim = 0);
/// torch.chunk: ceil(n / chunks) per piece, so fewer pieces than asked when n is small.
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);
/// Rows (or slices along dim) picked by a 1-d int64 index.
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
/// out[i][j] = x[i][index[i][j]] along dim (torch.gather).
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
/// A copy of x with src added at index along dim (torch.scatter_add).
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
/// weight[indices]: indices (int64, any shape) -> indices.shape + [embedding_dim].
Tensor embedding(const Tensor& weight, const Tensor& indices);
/// One-hot encoding (int64 result) of int64 class indices.
Tensor one_hot(const Tensor& indices, int64_t num_classes);
/// x with elements where mask is true replaced by value (mask broadcasts).
Tensor masked_fill(const Tensor& x, const Tensor& mask, Scalar value);

}  // namespace octo
