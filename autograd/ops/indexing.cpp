// Joining, splitting and indexing ops (cat, stack, split, chunk, index_select, gather, scatter_add,
// embedding, one_hot, masked_fill), each with its backward beside it.
//
// split/split_with_sizes/chunk return narrow() views, whose backward already exists. The
// indexing ops pair up: index_select's backward is an index_add into zeros (and vice versa),
// gather's is a scatter_add into zeros (and vice versa), so every backward is itself
// differentiable.
#include "autograd/ops/indexing.h"

#include <algorithm>
#include <exception>
#include <limits>
#include <vector>

#include "autograd/function.h"
#include "core/error.h"
#include "kernels/backend.h"
#include "tensor/factories.h"

namespace octo {

using autograd::TensorList;

namespace {

void check_index_dtype(const Tensor& index, const char* op) {
  OCTO_CHECK_VALUE(index.defined(), op, ": the index tensor is undefined");
  OCTO_CHECK_VALUE(index.dtype() == kInt64, op, ": expected an int64 index tensor, got ",
                   index.dtype());
}

/// The gradient for an input of dtype `t`: g converted, or none for non-float inputs.
Tensor grad_as(const Tensor& g, DType t) { return is_floating(t) ? g.to(t) : Tensor(); }

/// zeros(shape).index_add_(dim, index, src), differentiable in src (backward: index_select).
Tensor index_add_zeros(const Shape& shape, int64_t dim, const Tensor& index, const Tensor& src) {
  Tensor out = zeros(shape, src.options());
  if (src.numel() > 0)
    kernels::backend(src.device())
        .index_add(out.arg(), static_cast<int>(dim), index.arg(), src.arg());
  return autograd::record("IndexAddBackward", out, {src}, {index},
                          [dim](const TensorList& g, const TensorList& s) -> TensorList {
                            return {index_select(g[0], dim, s[0])};
                          });
}

}  // namespace

// --- joining ------------------------------------------------------------------------------------

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  OCTO_CHECK_VALUE(!tensors.empty(), "cat: expected a non-empty list of tensors");
  for (size_t i = 0; i < tensors.size(); ++i)
    OCTO_CHECK_VALUE(tensors[i].defined(), "cat: tensor ", i, " in the list is undefined");
  detail::check_same_device(tensors);
  // Like PyTorch, 1-d empty tensors (shape [0]) are skipped whatever the other shapes are.
  auto skipped = [](const Tensor& t) { return t.dim() == 1 && t.numel() == 0; };
  size_t ref = 0;
  while (ref < tensors.size() && skipped(tensors[ref])) ++ref;
  if (ref == tensors.size()) ref = 0;
  const Tensor& first = tensors[ref];
  OCTO_CHECK_VALUE(first.dim() > 0, "cat: zero-dimensional tensor (at position ", ref,
                   ") cannot be concatenated");
  const int64_t d = detail::wrap_dim(dim, first.dim(), "cat");

  DType dtype = tensors[0].dtype();
  for (const Tensor& t : tensors) dtype = promote_types(dtype, t.dtype());
  Shape shape = first.sizes();
  shape[d] = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (skipped(t) && i != ref) continue;
    OCTO_CHECK_VALUE(t.dim() == first.dim(), "cat: tensors must have the same number of dims, got ",
                     first.sizes(), " (tensor ", ref, ") and ", t.sizes(), " (tensor ", i, ")");
    for (int64_t k = 0; k < t.dim(); ++k) {
      OCTO_CHECK_VALUE(k == d || t.size(k) == first.size(k),
                       "cat: tensors must have the same shape except in dim ", d, ", got ",
                       first.sizes(), " (tensor ", ref, ") and ", t.sizes(), " (tensor ", i, ")");
    }
    shape[d] += t.size(d);
  }

  // out: [.., sum of sizes along d, ..]; input i is copied into out.narrow(d, starts[i], size).
  Tensor out = detail::make_empty(shape, dtype, first.device());
  std::vector<int64_t> starts(tensors.size(), 0), lengths(tensors.size(), -1);
  std::vector<DType> dtypes(tensors.size());
  int64_t offset = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    dtypes[i] = t.dtype();
    if (skipped(t) && i != ref) continue;
    starts[i] = offset;
    lengths[i] = t.size(d);
    if (t.numel() > 0) {
      Tensor part = detail::make_view(out, t.sizes(), out.strides(),
                                      out.storage_offset() + offset * out.stride(d));
      kernels::backend(out.device()).copy(part.arg(), t.arg());
    }
    offset += t.size(d);
  }
  return autograd::record(
      "CatBackward", out, tensors, {},
      [d, starts, lengths, dtypes](const TensorList& g, const TensorList&) -> TensorList {
        TensorList grads(starts.size());
        for (size_t i = 0; i < starts.size(); ++i) {
          if (lengths[i] < 0) continue;  // a skipped empty tensor
          grads[i] = grad_as(g[0].narrow(d, starts[i], lengths[i]), dtypes[i]);
        }
        return grads;
      });
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  OCTO_CHECK_VALUE(!tensors.empty(), "stack: expected a non-empty list of tensors");
  for (size_t i = 0; i < tensors.size(); ++i) {
    OCTO_CHECK_VALUE(tensors[i].defined(), "stack: tensor ", i, " in the list is undefined");
    OCTO_CHECK_VALUE(tensors[i].sizes() == tensors[0].sizes(),
                     "stack: expected each tensor to be equal size, but got ", tensors[0].sizes(),
                     " at entry 0 and ", tensors[i].sizes(), " at entry ", i);
  }
  const int64_t d = detail::wrap_dim(dim, tensors[0].dim() + 1, "stack");
  std::vector<Tensor> parts;
  parts.reserve(tensors.size());
  for (const Tensor& t : tensors) parts.push_back(t.unsqueeze(d));
  return cat(parts, d);
}

// --- splitting (views) ---------------------------------------------------------------------------

namespace {
/// Room for `pieces` views of dim d of x; a count no vector can hold (a split of an expanded
/// dim of 2^62 elements) is an OutOfMemoryError, not std::length_error.
std::vector<Tensor> reserve_pieces(int64_t pieces, const char* op, const Tensor& x, int64_t d) {
  std::vector<Tensor> out;
  try {
    out.reserve(static_cast<size_t>(pieces));
  } catch (const std::exception&) {  // std::length_error or std::bad_alloc
    OCTO_THROW(OutOfMemoryError, op, ": cannot hold ", pieces, " pieces of dim ", d, " of ",
               x.sizes());
  }
  return out;
}
}  // namespace

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  OCTO_CHECK_VALUE(x.dim() > 0, "split: expected a tensor with at least 1 dim, got a 0-d tensor");
  const int64_t d = detail::wrap_dim(dim, x.dim(), "split");
  const int64_t n = x.size(d);
  OCTO_CHECK_VALUE(split_size > 0 || (split_size == 0 && n == 0),
                   "split: split_size must be positive, got ", split_size, " for dim ", d,
                   " of size ", n);
  // ceil(n / split_size), at least 1, without forming n + split_size (which may overflow).
  const int64_t pieces = n == 0 ? 1 : 1 + (n - 1) / split_size;
  std::vector<Tensor> out = reserve_pieces(pieces, "split", x, d);
  for (int64_t i = 0; i < pieces; ++i) {
    const int64_t start = i * split_size;
    out.push_back(x.narrow(d, start, std::min(split_size, n - start)));
  }
  return out;
}

std::vector<Tensor> split_with_sizes(const Tensor& x, const Shape& sizes, int64_t dim) {
  OCTO_CHECK_VALUE(x.dim() > 0,
                   "split_with_sizes: expected a tensor with at least 1 dim, got a 0-d tensor");
  const int64_t d = detail::wrap_dim(dim, x.dim(), "split_with_sizes");
  int64_t total = 0;
  for (int64_t s : sizes) {
    OCTO_CHECK_VALUE(s >= 0, "split_with_sizes: sizes must be non-negative, got ", sizes);
    OCTO_CHECK_VALUE(!__builtin_add_overflow(total, s, &total), "split_with_sizes: sizes ", sizes,
                     " sum to more than fit in 64 bits; expected them to sum to ", x.size(d));
  }
  OCTO_CHECK_VALUE(total == x.size(d), "split_with_sizes: expected sizes ", sizes, " to sum to ",
                   x.size(d), " (the size of dim ", d, " of ", x.sizes(), "), but they sum to ",
                   total);
  std::vector<Tensor> out;
  out.reserve(sizes.size());
  int64_t start = 0;
  for (int64_t s : sizes) {
    out.push_back(x.narrow(d, start, s));
    start += s;
  }
  return out;
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  OCTO_CHECK_VALUE(chunks > 0, "chunk: expected chunks > 0, got ", chunks);
  OCTO_CHECK_VALUE(x.dim() > 0, "chunk: expected a tensor with at least 1 dim, got a 0-d tensor");
  const int64_t d = detail::wrap_dim(dim, x.dim(), "chunk");
  const int64_t n = x.size(d);
  // An empty dim gives `chunks` empty pieces, as in PyTorch.
  if (n == 0) {
    std::vector<Tensor> out = reserve_pieces(chunks, "chunk", x, d);
    for (int64_t i = 0; i < chunks; ++i) out.push_back(x.narrow(d, 0, 0));
    return out;
  }
  return split(x, 1 + (n - 1) / chunks, d);  // ceil(n / chunks) without overflow
}

// --- indexing
// -------------------------------------------------------------------------------------

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  check_index_dtype(index, "index_select");
  detail::check_same_device({&x, &index});
  OCTO_CHECK_VALUE(index.dim() <= 1, "index_select: expected a 1-d index, got shape ",
                   index.sizes());
  OCTO_CHECK_VALUE(x.dim() > 0,
                   "index_select: expected a tensor with at least 1 dim, got a 0-d tensor");
  const int64_t d = detail::wrap_dim(dim, x.dim(), "index_select");
  // out: x's shape with size index.numel() along d.
  Shape shape = x.sizes();
  shape[d] = index.numel();
  Tensor out = detail::make_empty(shape, x.dtype(), x.device());
  kernels::backend(x.device()).index_select(out.arg(), x.arg(), static_cast<int>(d), index.arg());
  Shape x_shape = x.sizes();
  return autograd::record("IndexSelectBackward", out, {x}, {index},
                          [d, x_shape](const TensorList& g, const TensorList& s) -> TensorList {
                            return {index_add_zeros(x_shape, d, s[0], g[0])};
                          });
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  check_index_dtype(index, "gather");
  detail::check_same_device({&x, &index});
  OCTO_CHECK_VALUE(x.dim() > 0, "gather: expected a tensor with at least 1 dim, got a 0-d tensor");
  OCTO_CHECK_VALUE(index.dim() == x.dim(),
                   "gather: index must have as many dims as the input, got index shape ",
                   index.sizes(), " and input shape ", x.sizes());
  const int64_t d = detail::wrap_dim(dim, x.dim(), "gather");
  for (int64_t k = 0; k < x.dim(); ++k) {
    OCTO_CHECK_VALUE(k == d || index.size(k) <= x.size(k), "gather: expected index.size(", k,
                     ") <= input.size(", k, ") for dims other than ", d, ", got index shape ",
                     index.sizes(), " and input shape ", x.sizes());
  }
  Tensor out = detail::make_empty(index.sizes(), x.dtype(), x.device());
  kernels::backend(x.device()).gather(out.arg(), x.arg(), static_cast<int>(d), index.arg());
  Shape x_shape = x.sizes();
  return autograd::record("GatherBackward", out, {x}, {index},
                          [d, x_shape](const TensorList& g, const TensorList& s) -> TensorList {
                            return {scatter_add(zeros(x_shape, g[0].options()), d, s[0], g[0])};
                          });
}

Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  check_index_dtype(index, "scatter_add");
  detail::check_same_device({&x, &index, &src});
  OCTO_CHECK_VALUE(x.dim() > 0,
                   "scatter_add: expected a tensor with at least 1 dim, got a 0-d tensor");
  OCTO_CHECK_VALUE(
      index.dim() == x.dim() && src.dim() == x.dim(),
      "scatter_add: index and src must have as many dims as the input, got input shape ", x.sizes(),
      ", index shape ", index.sizes(), " and src shape ", src.sizes());
  const int64_t d = detail::wrap_dim(dim, x.dim(), "scatter_add");
  for (int64_t k = 0; k < x.dim(); ++k) {
    OCTO_CHECK_VALUE(
        index.size(k) <= src.size(k) && (k == d || index.size(k) <= x.size(k)),
        "scatter_add: expected index.size(k) <= src.size(k) for every dim and index.size(k) <= input.size(k) for dims other than ",
        d, ", got input shape ", x.sizes(), ", index shape ", index.sizes(), " and src shape ",
        src.sizes());
  }
  const DType dtype = promote_types(x.dtype(), src.dtype());
  Tensor out = detail::make_empty(x.sizes(), dtype, x.device());
  auto& backend = kernels::backend(x.device());
  if (out.numel() > 0) backend.copy(out.arg(), x.arg());
  Tensor src_c = src;
  if (src.dtype() != dtype) {
    NoGradGuard no_grad;
    src_c = src.to(dtype);
  }
  backend.scatter_add(out.arg(), static_cast<int>(d), index.arg(), src_c.arg());
  const DType x_dtype = x.dtype(), src_dtype = src.dtype();
  Shape src_shape = src.sizes();
  return autograd::record(
      "ScatterAddBackward", out, {x, src}, {index},
      [d, x_dtype, src_dtype, src_shape](const TensorList& g, const TensorList& s) -> TensorList {
        // x passes straight through; src gets the gradient at the positions it was added to.
        Tensor gs = gather(g[0], d, s[0]);
        if (gs.sizes() != src_shape) {  // src larger than index: zeros outside index's extent
          Tensor full = zeros(src_shape, gs.options());
          Tensor region = full;
          for (int64_t k = 0; k < region.dim(); ++k) region = region.narrow(k, 0, gs.size(k));
          region.copy_(gs);
          gs = full;
        }
        return {grad_as(g[0], x_dtype), grad_as(gs, src_dtype)};
      });
}

Tensor embedding(const Tensor& weight, const Tensor& indices) {
  OCTO_CHECK_VALUE(weight.dim() == 2,
                   "embedding: expected a 2-d weight [num_embeddings, embedding_dim], got shape ",
                   weight.sizes());
  check_index_dtype(indices, "embedding");
  detail::check_same_device({&weight, &indices});
  // [*] indices -> rows [n, D] -> [*, D]
  Tensor rows;
  try {
    rows = index_select(weight, 0, indices.reshape({-1}));
  } catch (const IndexError& e) {
    OCTO_THROW(IndexError, "embedding: ", e.msg(), " (num_embeddings is ", weight.size(0), ")");
  }
  Shape shape = indices.sizes();
  shape.push_back(weight.size(1));
  return rows.reshape(shape);
}

Tensor one_hot(const Tensor& indices, int64_t num_classes) {
  check_index_dtype(indices, "one_hot");
  if (num_classes < 0) {  // -1: infer from the data, like PyTorch's default
    OCTO_CHECK_VALUE(num_classes == -1, "one_hot: num_classes must be -1 or non-negative, got ",
                     num_classes);
    OCTO_CHECK_VALUE(indices.numel() > 0,
                     "one_hot: cannot infer num_classes from an empty tensor; pass num_classes");
    std::vector<int64_t> v = indices.cpu().contiguous().to_vector<int64_t>();
    const int64_t largest = *std::max_element(v.begin(), v.end());
    OCTO_CHECK_VALUE(largest < std::numeric_limits<int64_t>::max(), "one_hot: the largest index, ",
                     largest, ", leaves no num_classes = largest + 1 in int64");
    num_classes = largest + 1;
  }
  // out: indices.shape + [C]; out[..., indices[...]] = 1.
  Shape shape = indices.sizes();
  shape.push_back(num_classes);
  Tensor out = zeros(shape, {.dtype = kInt64, .device = indices.device()});
  if (indices.numel() == 0) return out;
  Tensor idx = indices.unsqueeze(-1);
  Tensor one = ones({}, {.dtype = kInt64, .device = indices.device()});
  Tensor src = detail::make_view(one, idx.sizes(), Shape(idx.sizes().size(), 0), 0);
  try {
    kernels::backend(out.device())
        .scatter_add(out.arg(), static_cast<int>(out.dim() - 1), idx.arg(), src.arg());
  } catch (const IndexError& e) {
    OCTO_THROW(IndexError, "one_hot: class values must be in [0, ", num_classes, "): ", e.msg());
  }
  return out;
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, Scalar value) {
  OCTO_CHECK_VALUE(mask.defined() && mask.dtype() == kBool,
                   "masked_fill: expected a bool mask, got ",
                   mask.defined() ? dtype_name(mask.dtype()) : "an undefined tensor");
  detail::check_same_device({&x, &mask});
  bool ok = mask.dim() <= x.dim();
  for (int64_t k = 1; ok && k <= mask.dim(); ++k)
    ok = mask.size(-k) == 1 || mask.size(-k) == x.size(-k);
  OCTO_CHECK_VALUE(ok, "masked_fill: the mask of shape ", mask.sizes(),
                   " cannot be broadcast to the input's shape ", x.sizes());
  Tensor out = detail::make_empty(x.sizes(), x.dtype(), x.device());
  if (out.numel() > 0) {
    NoGradGuard no_grad;  // raw broadcasts of constants
    Tensor m = mask.expand(x.sizes());
    Tensor v = full({}, value, x.options()).expand(x.sizes());
    kernels::backend(x.device()).where(out.arg(), m.arg(), v.arg(), x.arg());
  }
  return autograd::record("MaskedFillBackward", out, {x}, {mask},
                          [](const TensorList& g, const TensorList& s) -> TensorList {
                            return {masked_fill(g[0], s[0], 0)};
                          });
}

}  // namespace octo
