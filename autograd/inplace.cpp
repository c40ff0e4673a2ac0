// In-place ops on the tape: the leaf checks, rebasing a tensor's history, and views (CopySlices).
#include "autograd/inplace.h"

#include <mutex>

#include "core/error.h"
#include "tensor/autograd_meta.h"
#include "tensor/factories.h"

namespace octo::autograd {

// Note [In-place ops on views]: `y = x.select(1, 0); y.mul_(2)` changes x as well, so x's history
// must change with it, as PyTorch's CopySlices does:
//
//  * Every view op run under grad mode remembers its base (mark_view): the tensor owning the
//    storage, never itself a view, so views of views share one base.
//  * An in-place op on such a view records its node `fn` as usual, as if the view stood alone,
//    and then gives the *base* a new grad_fn, CopySlices(fn). Its backward takes the base's
//    gradient, hands the part the view covers to fn, writes fn's gradient for the old view
//    value back into that part, and passes the whole on to the base's old history; fn's
//    gradients for its other inputs (the `2` of `mul_(other)`) go straight to them.
//  * The view itself gets a fresh grad_fn, AsStridedBackward, whose one edge is the base's new
//    history: a gradient of y is embedded into zeros of x's shape.
//  * Other views of the same base made before the op still point at the old history. Each view
//    keeps the storage version at which its grad_fn was set; Tensor::grad_fn() and
//    requires_grad() rebuild it from the base (refresh_view) when the version moved on. This is
//    what makes `a = x[0]; b = x[1]; b.mul_(w); a.sum().backward()` correct.
//
// The view's geometry is kept relative to the base as a contiguous tensor, which is how the base's
// gradient arrives. A base is the output of an op or a leaf, so it is contiguous in practice; an
// in-place op on a view of a non-contiguous base that requires grad is refused with an error.
// Views made under NoGradGuard are not tracked (PyTorch tracks them to refuse in-place use later;
// octo just treats them as plain tensors).
// Backward through CopySlices and AsStridedBackward is itself differentiable: under create_graph
// they are written with recorded ops (strided_part / strided_embed below).

namespace {

/// Where a view sits inside its base, as a contiguous tensor of the base's shape.
struct ViewGeometry {
  Shape base_sizes;
  Shape sizes;
  Shape strides;
  int64_t offset = 0;  // in elements, from the base's first element
};

ViewGeometry geometry_of(const Tensor& view, const Tensor& base) {
  return {base.sizes(), view.sizes(), view.strides(),
          view.storage_offset() - base.storage_offset()};
}

Tensor strided_embed(const Tensor& g, const ViewGeometry& geom);

/// The part of a base-shaped tensor that the view covers (a view of a contiguous copy).
Tensor strided_part(const Tensor& t, const ViewGeometry& geom) {
  Tensor c = t.contiguous();
  Tensor part = detail::make_view(c, geom.sizes, geom.strides, c.storage_offset() + geom.offset);
  return record("AsStridedBackward", part, {c}, {},
                [geom](const TensorList& g, const TensorList&) -> TensorList {
                  return {strided_embed(g[0], geom)};
                });
}

/// Zeros of the base's shape with g written where the view sits.
Tensor strided_embed(const Tensor& g, const ViewGeometry& geom) {
  Tensor out = zeros(geom.base_sizes, g.options());
  {
    NoGradGuard no_grad;
    detail::make_view(out, geom.sizes, geom.strides, geom.offset).copy_(g);
  }
  return record("AsStridedScatterBackward", out, {g}, {},
                [geom](const TensorList& h, const TensorList&) -> TensorList {
                  return {strided_part(h[0], geom)};
                });
}

/// The base's grad_fn after an in-place op on one of its views: see the Note.
class CopySlices final : public Node {
 public:
  CopySlices(const Tensor& base, ViewGeometry geom, std::shared_ptr<FunctionNode> fn)
      : Node("CopySlices", base.device()), geom_(std::move(geom)), fn_(std::move(fn)) {
    add_next_edge(gradient_edge(base));  // the base's history before the op
    for (size_t i = 1; i < fn_->next_edges().size(); ++i) add_next_edge(fn_->next_edges()[i]);
    set_num_inputs(1);
  }

  TensorList apply(TensorList&& grads) override {
    TensorList out(next_edges().size());
    const Tensor& g = grads[0];
    if (!g.defined()) return out;
    TensorList res;
    if (GradMode::is_enabled()) {  // create_graph: every step recorded
      Tensor part = strided_part(g, geom_);
      res = fn_->apply({part});
      Tensor rest = g - strided_embed(part, geom_);
      out[0] = res[0].defined() ? rest + strided_embed(res[0], geom_) : rest;
    } else {
      Tensor result = g.is_contiguous() ? g.clone() : g.contiguous();
      Tensor slot = detail::make_view(result, geom_.sizes, geom_.strides,
                                      result.storage_offset() + geom_.offset);
      res = fn_->apply({slot.clone()});
      if (res[0].defined()) {
        slot.copy_(res[0]);
      } else {
        slot.zero_();  // the op overwrote the view (copy_, fill_): the old values get nothing
      }
      out[0] = result;
    }
    for (size_t i = 1; i < res.size(); ++i) out[i] = res[i];
    return out;
  }
  void release_saved() override { fn_->release_saved(); }
  std::vector<const SavedTensor*> saved_tensors() const override { return fn_->saved_tensors(); }

 private:
  ViewGeometry geom_;
  std::shared_ptr<FunctionNode> fn_;
};

AutogradMeta& meta_of(const Tensor& t) {
  auto& m = t.impl().autograd;
  if (!m) m = std::make_unique<AutogradMeta>();
  return *m;
}

/// Gives view `t` the grad_fn AsStridedBackward(base's current history).
void derive_view_grad_fn(const Tensor& t, AutogradMeta& meta) {
  ViewGeometry geom = geometry_of(t, meta.view_base);
  auto node =
      std::make_shared<FunctionNode>("AsStridedBackward", t.device(), std::vector<SavedTensor>{},
                                     [geom](const TensorList& g, const TensorList&) -> TensorList {
                                       return {strided_embed(g[0], geom)};
                                     });
  node->add_next_edge(gradient_edge(meta.view_base));
  node->set_num_inputs(1);
  meta.grad_fn = std::move(node);
  meta.output_nr = 0;
}

std::mutex& view_mutex() {
  static std::mutex m;
  return m;
}

bool overlaps_itself(const Tensor& t) {
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.sizes()[d] > 1 && t.strides()[d] == 0) return true;
  return false;
}

}  // namespace

void mark_view(const Tensor& view, const Tensor& base) {
  if (!GradMode::is_enabled()) return;
  const auto& bm = base.impl().autograd;
  Tensor root = bm && bm->view_base.defined() ? bm->view_base : base;
  AutogradMeta& meta = meta_of(view);
  meta.view_base = std::move(root);
  meta.view_version = view.version();
}

void refresh_view(const Tensor& t) {
  if (!t.defined()) return;
  AutogradMeta* meta = t.impl().autograd.get();
  if (!meta || !meta->view_base.defined()) return;
  uint32_t now = t.version();
  if (meta->view_version == now) return;
  std::lock_guard<std::mutex> lock(view_mutex());
  if (meta->view_version == now) return;
  meta->view_version = now;
  const Tensor& base = meta->view_base;
  if (base.requires_grad() && base.is_contiguous()) derive_view_grad_fn(t, *meta);
}

void check_inplace(const Tensor& self) {
  if (!GradMode::is_enabled()) return;
  OCTO_CHECK(
      !(self.is_leaf() && self.requires_grad()),
      "a leaf Variable that requires grad is being used in an in-place operation; do it under NoGradGuard, or on a clone()");
  const auto& meta = self.impl().autograd;
  if (!meta || !meta->view_base.defined()) return;
  const Tensor& base = meta->view_base;
  OCTO_CHECK(
      !(base.is_leaf() && base.requires_grad()),
      "a view of a leaf Variable that requires grad is being used in an in-place operation; do it under NoGradGuard, or on a clone() of the leaf");
  OCTO_CHECK(
      !overlaps_itself(self),
      "unsupported operation: more than one element of the written-to tensor refers to a single memory location (a view of shape ",
      self.sizes(), " with strides ", self.strides(),
      "); clone() the tensor before the in-place operation");
  OCTO_CHECK_T(::octo::NotImplementedError, !base.requires_grad() || base.is_contiguous(),
               "in-place operation on a view of a non-contiguous tensor of shape ", base.sizes(),
               " with strides ", base.strides(),
               " that requires grad; make the base contiguous() first");
}

void record_inplace(const char* name, const Tensor& self, const TensorList& others,
                    const TensorList& saved, FunctionNode::BackwardFn backward) {
  TensorList inputs{self};
  inputs.insert(inputs.end(), others.begin(), others.end());
  const bool record = needs_grad(inputs);
  // Saved tensors record their version before the op's own bump, as in PyTorch: a saved tensor
  // that is or aliases self (b in a.mul_(b), b = a or a.detach()) was overwritten by the op, and
  // unpacking it at backward reports that. Edges too are taken from self's history before it is
  // replaced (and before the bump, which would make a view rebuild its grad_fn needlessly).
  std::vector<SavedTensor> saved_tensors;
  std::vector<Edge> edges;
  if (record) {
    for (const Tensor& s : saved)
      saved_tensors.emplace_back(s, s.defined() && &s.impl() == &self.impl() ? 0 : -1);
    for (const Tensor& in : inputs) edges.push_back(gradient_edge(in));
  }
  self.bump_version();
  if (!record) return;
  auto node = std::make_shared<FunctionNode>(name, self.device(), std::move(saved_tensors),
                                             std::move(backward));
  for (Edge& e : edges) node->add_next_edge(std::move(e));
  node->set_num_inputs(1);
  AutogradMeta& meta = meta_of(self);
  if (!meta.view_base.defined()) {
    meta.requires_grad = true;
    meta.grad_fn = std::move(node);
    meta.output_nr = 0;
    return;
  }
  // self is a view: the base takes the op into its history, and self is derived from that.
  const Tensor& base = meta.view_base;
  OCTO_CHECK_T(::octo::NotImplementedError, base.is_contiguous(),
               "in-place operation on a view of a non-contiguous tensor of shape ", base.sizes(),
               " with strides ", base.strides(),
               " that requires grad; make the base contiguous() first");
  auto copy_slices = std::make_shared<CopySlices>(base, geometry_of(self, base), std::move(node));
  AutogradMeta& base_meta = meta_of(base);
  base_meta.grad_fn = std::move(copy_slices);
  base_meta.output_nr = 0;
  std::lock_guard<std::mutex> lock(view_mutex());
  derive_view_grad_fn(self, meta);
  meta.view_version = self.version();
}

}  // namespace octo::autograd
