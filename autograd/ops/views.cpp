// Views: new geometry over the same storage (no copies), each with its backward beside it.
//
// Every view's backward maps the gradient of the view back to the base's shape. Views that only
// rearrange (view, transpose, permute, squeeze, ...) invert the rearrangement; views that pick a
// part (narrow, slice, select) scatter the gradient into zeros of the base's shape; expand sums
// over the broadcast dims (sum_to).
#include "autograd/function.h"
#include "autograd/inplace.h"
#include "autograd/ops/reduce.h"
#include "core/error.h"
#include "tensor/factories.h"

namespace octo {

using autograd::TensorList;

namespace {

/// Computes strides for viewing a tensor of `sizes`/`strides` as `shape` without copying, or
/// nullopt when the memory layout does not allow it (then reshape copies). Same rule as
/// PyTorch's computeStride: each run of merged old dims must be contiguous within itself.
std::optional<Shape> view_strides(const Shape& sizes, const Shape& strides, const Shape& shape) {
  int64_t numel = detail::shape_numel(sizes);
  Shape out(shape.size());
  if (numel == 0 || sizes.empty()) return detail::contiguous_strides(shape);  // 0-d: all ones
  int64_t view_d = static_cast<int64_t>(shape.size()) - 1;
  int64_t chunk_base_stride = strides.empty() ? 1 : strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    tensor_numel *= sizes[d];
    if (d == 0 || (sizes[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base_stride;
        view_numel *= shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base_stride = strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

/// Resolves one -1 in a requested shape and checks the element count.
Shape infer_shape(const Shape& requested, int64_t numel, const char* op) {
  Shape shape = requested;
  int64_t infer = -1, known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      OCTO_CHECK_VALUE(infer < 0, op, ": only one dimension can be inferred, got shape ",
                       requested);
      infer = static_cast<int64_t>(i);
    } else {
      OCTO_CHECK_VALUE(shape[i] >= 0, op, ": invalid shape dimension ", shape[i], " in ",
                       requested);
      // A product past int64 cannot equal any tensor's element count.
      OCTO_CHECK_VALUE(!__builtin_mul_overflow(known, shape[i], &known), op, ": shape ", requested,
                       " is invalid for input of size ", numel);
    }
  }
  if (infer >= 0) {
    OCTO_CHECK_VALUE(known != 0 && numel % known == 0, op, ": shape ", requested,
                     " is invalid for input of size ", numel);
    shape[infer] = numel / known;
  } else {
    OCTO_CHECK_VALUE(known == numel, op, ": shape ", requested, " is invalid for input of size ",
                     numel);
  }
  return shape;
}

/// The backward of a view that picks a part of its base: zeros of the base's shape with g
/// written into part(zeros). Recorded itself, with part() as its backward, so that under
/// create_graph the gradient keeps g's history (double backward).
Tensor embed_part(const char* name, const Tensor& g, const Shape& base_shape,
                  std::function<Tensor(const Tensor&)> part) {
  Tensor out = zeros(base_shape, g.options());
  {
    NoGradGuard no_grad;
    part(out).copy_(g);
  }
  return autograd::record(
      name, out, {g}, {},
      [part = std::move(part)](const TensorList& h, const TensorList&) -> TensorList {
        return {part(h[0])};
      });
}

/// Records a view whose backward is `fn` (gradient of the view -> gradient of the base), and
/// marks it as a view of base's storage (Note [In-place ops on views] in autograd/inplace.cpp).
Tensor record_view(const char* name, const Tensor& base, Tensor view,
                   std::function<Tensor(const Tensor&)> fn) {
  Tensor out =
      autograd::record(name, std::move(view), {base}, {},
                       [fn = std::move(fn)](const TensorList& g, const TensorList&) -> TensorList {
                         return {fn(g[0])};
                       });
  autograd::mark_view(out, base);
  return out;
}

}  // namespace

Tensor Tensor::view(const Shape& shape) const {
  Shape target = infer_shape(shape, numel(), "view");
  auto st = view_strides(sizes(), strides(), target);
  OCTO_CHECK_VALUE(
      st.has_value(),
      "view size is not compatible with input tensor's size and stride (at least one dimension spans across two contiguous subspaces): cannot view ",
      sizes(), " with strides ", strides(), " as ", target, ". Use reshape() instead.");
  Shape original = sizes();
  return record_view("ViewBackward", *this, detail::make_view(*this, target, *st, storage_offset()),
                     [original](const Tensor& g) { return g.reshape(original); });
}

Tensor Tensor::reshape(const Shape& shape) const {
  Shape target = infer_shape(shape, numel(), "reshape");
  if (view_strides(sizes(), strides(), target)) return view(target);
  return contiguous().view(target);
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  d0 = detail::wrap_dim(d0, dim(), "transpose");
  d1 = detail::wrap_dim(d1, dim(), "transpose");
  if (dim() == 0)
    return record_view("TransposeBackward", *this,
                       detail::make_view(*this, sizes(), strides(), storage_offset()),
                       [](const Tensor& g) { return g; });
  Shape sz = sizes(), st = strides();
  std::swap(sz[d0], sz[d1]);
  std::swap(st[d0], st[d1]);
  return record_view("TransposeBackward", *this, detail::make_view(*this, sz, st, storage_offset()),
                     [d0, d1](const Tensor& g) { return g.transpose(d0, d1); });
}

Tensor Tensor::t() const {
  OCTO_CHECK_VALUE(dim() <= 2, "t() expects a tensor with <= 2 dimensions, but this one has ",
                   dim(), "; use transpose(d0, d1)");
  return dim() < 2 ? transpose(0, 0) : transpose(0, 1);
}

Tensor Tensor::permute(const Shape& dims) const {
  OCTO_CHECK_VALUE(static_cast<int64_t>(dims.size()) == dim(),
                   "permute: number of dims don't match: the tensor has ", dim(),
                   " dims but the permutation ", dims, " has ", dims.size());
  Shape sz(dims.size()), st(dims.size()), inverse(dims.size());
  std::vector<bool> seen(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = detail::wrap_dim(dims[i], dim(), "permute");
    OCTO_CHECK_VALUE(!seen[d], "permute: repeated dim ", d, " in ", dims);
    seen[d] = true;
    sz[i] = sizes()[d];
    st[i] = strides()[d];
    inverse[d] = static_cast<int64_t>(i);
  }
  return record_view("PermuteBackward", *this, detail::make_view(*this, sz, st, storage_offset()),
                     [inverse](const Tensor& g) { return g.permute(inverse); });
}

Tensor Tensor::slice(int64_t d, std::optional<int64_t> start, std::optional<int64_t> end,
                     int64_t step) const {
  OCTO_CHECK_VALUE(dim() > 0, "slice() cannot be applied to a 0-dim tensor");
  d = detail::wrap_dim(d, dim(), "slice");
  OCTO_CHECK_VALUE(step > 0, "slice: step must be positive, got ", step);
  int64_t n = sizes()[d];
  int64_t b = start.value_or(0), e = end.value_or(n);
  if (b < 0) b += n;
  if (e < 0) e += n;
  b = std::clamp<int64_t>(b, 0, n);
  e = std::clamp<int64_t>(e, b, n);
  Shape sz = sizes(), st = strides();
  sz[d] = e == b ? 0 : 1 + (e - b - 1) / step;  // ceil((e - b) / step), without overflow
  // Two or more elements means step < n, so the product stays inside the storage's span; one
  // or none reads no second element, and its stride (like PyTorch's) is not the product.
  st[d] = sz[d] > 1 ? strides()[d] * step : strides()[d];
  Shape base_shape = sizes();
  Tensor v = detail::make_view(*this, sz, st, storage_offset() + b * strides()[d]);
  return record_view("SliceBackward", *this, v, [base_shape, d, b, e, step](const Tensor& g) {
    return embed_part("SliceBackwardBackward", g, base_shape,
                      [d, b, e, step](const Tensor& t) { return t.slice(d, b, e, step); });
  });
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  OCTO_CHECK_VALUE(dim() > 0, "narrow() cannot be applied to a 0-dim tensor");
  d = detail::wrap_dim(d, dim(), "narrow");
  int64_t n = sizes()[d];
  if (start < 0) start += n;
  OCTO_CHECK_INDEX(start >= 0 && length >= 0 && start <= n && length <= n - start,
                   "narrow: start (", start, ") + length (", length, ") exceeds dimension size (",
                   n, ") of dim ", d);
  return slice(d, start, start + length);
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  OCTO_CHECK_INDEX(dim() > 0, "select() cannot be applied to a 0-dim tensor");
  d = detail::wrap_dim(d, dim(), "select");
  int64_t n = sizes()[d];
  OCTO_CHECK_INDEX(index >= -n && index < n, "select: index ", index,
                   " is out of bounds for dimension ", d, " with size ", n);
  if (index < 0) index += n;
  Shape sz = sizes(), st = strides();
  sz.erase(sz.begin() + d);
  st.erase(st.begin() + d);
  Shape base_shape = sizes();
  Tensor v = detail::make_view(*this, sz, st, storage_offset() + index * strides()[d]);
  return record_view("SelectBackward", *this, v, [base_shape, d, index](const Tensor& g) {
    return embed_part("SelectBackwardBackward", g, base_shape,
                      [d, index](const Tensor& t) { return t.select(d, index); });
  });
}

Tensor Tensor::expand(const Shape& shape) const {
  OCTO_CHECK_VALUE(static_cast<int64_t>(shape.size()) >= dim(),
                   "expand: the number of sizes provided (", shape.size(),
                   ") must be greater or equal to the number of dimensions in the tensor (", dim(),
                   ")");
  size_t lead = shape.size() - static_cast<size_t>(dim());
  Shape sz(shape.size()), st(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i < lead) {
      OCTO_CHECK_VALUE(shape[i] >= 0,
                       "expand: -1 is not allowed in a leading, non-existing dimension; got ",
                       shape);
      sz[i] = shape[i];
      st[i] = 0;
      continue;
    }
    OCTO_CHECK_VALUE(shape[i] >= -1, "expand: size ", shape[i], " at dimension ", i,
                     " is not allowed (a size is >= 0, or -1 to keep the existing size); got ",
                     shape);
    int64_t have = sizes()[i - lead];
    int64_t want = shape[i] == -1 ? have : shape[i];
    OCTO_CHECK_VALUE(have == want || have == 1, "The expanded size of the tensor (", want,
                     ") must match the existing size (", have, ") at non-singleton dimension ", i,
                     ".  Target sizes: ", shape, ".  Tensor sizes: ", sizes());
    sz[i] = want;
    st[i] = have == want ? strides()[i - lead] : 0;
  }
  // The only view whose sizes are not bounded by its storage (a stride-0 dim repeats one
  // element), so the only one whose element count can overflow.
  detail::checked_numel(sz, "expand");
  Shape base_shape = sizes();
  return record_view("ExpandBackward", *this, detail::make_view(*this, sz, st, storage_offset()),
                     [base_shape](const Tensor& g) { return sum_to(g, base_shape); });
}

Tensor Tensor::squeeze() const {
  Shape sz, st;
  for (int64_t i = 0; i < dim(); ++i) {
    if (sizes()[i] != 1) {
      sz.push_back(sizes()[i]);
      st.push_back(strides()[i]);
    }
  }
  Shape base_shape = sizes();
  return record_view("SqueezeBackward", *this, detail::make_view(*this, sz, st, storage_offset()),
                     [base_shape](const Tensor& g) { return g.reshape(base_shape); });
}

Tensor Tensor::squeeze(int64_t d) const {
  d = detail::wrap_dim(d, dim(), "squeeze");
  if (dim() == 0 || sizes()[d] != 1) return view(sizes());  // PyTorch: a no-op, still a view
  Shape sz = sizes(), st = strides();
  sz.erase(sz.begin() + d);
  st.erase(st.begin() + d);
  Shape base_shape = sizes();
  return record_view("SqueezeBackward", *this, detail::make_view(*this, sz, st, storage_offset()),
                     [base_shape](const Tensor& g) { return g.reshape(base_shape); });
}

Tensor Tensor::unsqueeze(int64_t d) const {
  d = detail::wrap_dim(d, dim() + 1, "unsqueeze");
  Shape sz = sizes(), st = strides();
  int64_t stride = d < dim() ? sizes()[d] * strides()[d] : 1;
  sz.insert(sz.begin() + d, 1);
  st.insert(st.begin() + d, stride);
  return record_view("UnsqueezeBackward", *this, detail::make_view(*this, sz, st, storage_offset()),
                     [d](const Tensor& g) { return g.squeeze(d); });
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  if (dim() == 0) return reshape({1});
  start_dim = detail::wrap_dim(start_dim, dim(), "flatten");
  end_dim = detail::wrap_dim(end_dim, dim(), "flatten");
  OCTO_CHECK_VALUE(start_dim <= end_dim, "flatten: start_dim (", start_dim,
                   ") cannot come after end_dim (", end_dim, ")");
  Shape shape(sizes().begin(), sizes().begin() + start_dim);
  int64_t merged = 1;
  for (int64_t i = start_dim; i <= end_dim; ++i) merged *= sizes()[i];
  shape.push_back(merged);
  shape.insert(shape.end(), sizes().begin() + end_dim + 1, sizes().end());
  return reshape(shape);
}

}  // namespace octo
