// Tensor: a cheap shared handle over a TensorImpl, with views, conversions and autograd entry
// points.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/scalar.h"
#include "kernels/tensor_arg.h"
#include "tensor/tensor_impl.h"

namespace octo {

namespace autograd {
class Node;
}

/// How a factory should make a tensor, in the libtorch spirit:
///   octo::randn({2, 3}, {.dtype = octo::kFloat64, .device = "cpu:1", .requires_grad = true})
struct TensorOptions {
  DType dtype = kFloat32;
  Device device = kCPU;
  bool requires_grad = false;
};

// Note [Tensor methods defined in autograd/]: Tensor is declared here, in tensor/, but every
// method that computes -- conversions and copies (to, contiguous, clone, copy_, fill_,
// pin_memory), views (view, reshape, transpose, ..., expand), the math methods and operators,
// and the autograd entry points (requires_grad_, grad, grad_fn, backward, detach, hooks,
// version) -- is an autograd op or touches the tape, so it is defined in autograd/: copy.cpp,
// views.cpp, elementwise.cpp, operators.cpp, linalg.cpp, reduce.cpp, softmax.cpp in
// autograd/ops/, and tensor_autograd.cpp. tensor/ itself defines only the metadata accessors,
// raw_data/data_ptr, item/to_vector, arg() and the detail:: helpers (tensor.cpp). This is the one
// sanctioned reference from a layer to a later one (docs/architecture.md, "Layering"): it keeps
// the libtorch-style API (t.to(dev), t.view(...), t.backward(), a.matmul(b)) on the class where
// users look for it, at the price that tensor/ links only together with autograd/. No header of
// tensor/ includes autograd/; tensor/'s own code reaches autograd only through these methods and
// tensor/autograd_hooks.h.

/// A tensor. Copying a Tensor copies the handle, not the data (like torch.Tensor in Python);
/// use clone() for a deep copy. A default-constructed Tensor is undefined (defined() == false).
class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // --- metadata -------------------------------------------------------------------------------
  bool defined() const { return impl_ != nullptr; }
  const Shape& sizes() const { return impl().sizes; }
  const Shape& shape() const { return impl().sizes; }
  const Shape& strides() const { return impl().strides; }
  /// Size of dim d; negative d counts from the end.
  int64_t size(int64_t d) const;
  int64_t stride(int64_t d) const;
  int64_t dim() const { return static_cast<int64_t>(impl().sizes.size()); }
  int64_t numel() const;
  DType dtype() const { return impl().dtype; }
  Device device() const { return impl().device; }
  int64_t storage_offset() const { return impl().offset; }
  size_t itemsize() const { return octo::itemsize(dtype()); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * itemsize(); }
  bool is_contiguous() const;
  bool is_floating_point() const { return is_floating(dtype()); }
  TensorOptions options() const { return {dtype(), device(), false}; }
  /// Pointer to the first element (storage offset applied). T must match dtype().
  template <typename T>
  T* data_ptr() const;
  void* raw_data() const;
  /// True when both share storage (one is a view of the other, or of a common base).
  bool is_alias_of(const Tensor& other) const;
  /// The kernel-side view of this tensor.
  kernels::TensorArg arg() const;
  TensorImpl& impl() const;
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }

  // --- conversions and copies (autograd/ops/copy.cpp; is_pinned: tensor.cpp) ----------------
  /// Same data on another device or dtype; returns *this when nothing changes (like PyTorch).
  ///
  /// non_blocking (torch's `non_blocking=True`) only matters between a GPU and pinned host
  /// memory (see pin_memory()); otherwise the copy is complete on return, as without it.
  ///  * cpu (pinned) -> cuda: the upload is queued on the GPU's current stream and to() returns
  ///    at once; work queued later on that stream sees the data. Do not write into the source
  ///    until the stream has passed the copy (freeing it is safe: the pinned allocator waits).
  ///  * cuda -> cpu: the result is allocated in pinned memory and to() returns BEFORE THE DATA
  ///    HAS ARRIVED. Reading it before octo::synchronize(device) (or synchronising the current
  ///    stream) reads garbage:
  ///      Tensor h = g.to(octo::kCPU, /*non_blocking=*/true);
  ///      octo::synchronize(g.device());   // now h holds g's values
  ///  * pageable host memory, a strided host side, or a dtype conversion: non_blocking is ignored
  ///    and the copy synchronises.
  Tensor to(Device device, bool non_blocking = false) const;
  Tensor to(DType dtype) const;
  Tensor to(Device device, DType dtype, bool non_blocking = false) const;
  Tensor cpu() const { return to(kCPU); }
  Tensor contiguous() const;
  Tensor clone() const;
  /// Copies src into this tensor in place (src is broadcast to this shape; dtype converted;
  /// devices may differ). Returns *this. non_blocking as for to(): a copy between a GPU and a
  /// contiguous pinned host tensor of the same dtype returns before it has finished, and the
  /// caller must synchronise before reading a downloaded result.
  const Tensor& copy_(const Tensor& src, bool non_blocking = false) const;
  /// A copy of this CPU tensor in pinned (page-locked) host memory, contiguous (torch's
  /// pin_memory()); a tensor that is already pinned is returned as is. Copies between pinned
  /// memory and a GPU are faster and can be non-blocking (see to()). Throws ValueError for a
  /// tensor that is not on a CPU device, and DeviceError when octo was built without CUDA or no
  /// GPU is visible (pinning needs the CUDA driver).
  ///   Tensor batch = images.pin_memory();
  ///   Tensor on_gpu = batch.to(Device("cuda"), /*non_blocking=*/true);
  Tensor pin_memory() const;
  /// True when this CPU tensor's storage is pinned host memory (views of a pinned tensor too).
  /// Always false without CUDA, for GPU tensors, and for tensors whose storage holds no bytes.
  bool is_pinned() const;
  /// Fills in place. Returns *this.
  const Tensor& fill_(Scalar value) const;
  const Tensor& zero_() const { return fill_(0); }
  /// The single value of a one-element tensor.
  template <typename T>
  T item() const;
  /// All elements in row-major order, converted to T.
  template <typename T>
  std::vector<T> to_vector() const;

  // --- views (share storage; defined in autograd/ops/views.cpp) ------------------------------
  Tensor view(const Shape& shape) const;
  Tensor reshape(const Shape& shape) const;
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor t() const;
  Tensor permute(const Shape& dims) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor slice(int64_t dim, std::optional<int64_t> start = std::nullopt,
               std::optional<int64_t> end = std::nullopt, int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor operator[](int64_t index) const { return select(0, index); }
  Tensor expand(const Shape& shape) const;
  Tensor expand_as(const Tensor& other) const { return expand(other.sizes()); }
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor view_as(const Tensor& other) const { return view(other.sizes()); }

  // --- common math as methods (free functions in autograd/ops/*.h) -----------------------------
  Tensor add(const Tensor& other) const;
  Tensor sub(const Tensor& other) const;
  Tensor mul(const Tensor& other) const;
  Tensor div(const Tensor& other) const;
  Tensor matmul(const Tensor& other) const;
  Tensor pow(Scalar exponent) const;
  Tensor neg() const;
  Tensor abs() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor relu() const;
  Tensor sigmoid() const;
  Tensor tanh() const;
  Tensor sum() const;
  Tensor sum(const Shape& dims, bool keepdim = false) const;
  Tensor mean() const;
  Tensor mean(const Shape& dims, bool keepdim = false) const;
  Tensor max() const;
  Tensor min() const;
  Tensor argmax(int64_t dim, bool keepdim = false) const;
  Tensor softmax(int64_t dim) const;
  Tensor log_softmax(int64_t dim) const;
  // In-place arithmetic (bumps the version counter; see Note [Version counter]). Like libtorch,
  // in-place methods are const: the handle is const, the data it refers to is not.
  const Tensor& add_(const Tensor& other, Scalar alpha = 1) const;
  const Tensor& mul_(const Tensor& other) const;
  const Tensor& mul_(Scalar s) const;
  const Tensor& sub_(const Tensor& other) const { return add_(other, -1); }

  // --- autograd (autograd/tensor_autograd.cpp) ------------------------------------------------
  bool requires_grad() const;
  /// Makes this leaf record operations for autograd (or stop). Returns *this.
  Tensor& requires_grad_(bool requires_grad = true);
  /// The accumulated gradient of a leaf (or of a tensor that called retain_grad()); may be
  /// undefined before the first backward.
  Tensor grad() const;
  void set_grad(const Tensor& grad) const;
  /// The node that created this tensor; null for leaves.
  std::shared_ptr<autograd::Node> grad_fn() const;
  int output_nr() const;
  bool is_leaf() const;
  /// Computes gradients of this tensor w.r.t. graph leaves. grad defaults to 1 for a scalar;
  /// retain_graph defaults to create_graph, which records the backward itself so the gradients
  /// can be differentiated again (double backward).
  void backward(const Tensor& grad = {}, std::optional<bool> retain_graph = {},
                bool create_graph = false) const;
  /// Makes backward() store this non-leaf's gradient in grad().
  void retain_grad() const;
  /// A tensor sharing data (and version counter) but outside the graph.
  Tensor detach() const;
  /// Registers fn to run on this tensor's gradient during backward; fn may return a replacement
  /// (return an undefined Tensor to keep the gradient). Hooks run in registration order.
  void register_hook(std::function<Tensor(const Tensor&)> fn) const;
  /// Leaves only: fn(leaf) runs after the gradient has been accumulated into leaf.grad().
  void register_post_accumulate_grad_hook(std::function<void(Tensor&)> fn) const;
  /// The storage's version counter (Note [Version counter]).
  uint32_t version() const;
  void bump_version() const;

 private:
  std::shared_ptr<TensorImpl> impl_;
};

// Defined in autograd/ops/operators.cpp (Note [Tensor methods defined in autograd/]).
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, Scalar b);
Tensor operator-(const Tensor& a, Scalar b);
Tensor operator*(const Tensor& a, Scalar b);
Tensor operator/(const Tensor& a, Scalar b);
Tensor operator+(Scalar a, const Tensor& b);
Tensor operator-(Scalar a, const Tensor& b);
Tensor operator*(Scalar a, const Tensor& b);
Tensor operator/(Scalar a, const Tensor& b);
Tensor operator-(const Tensor& a);
Tensor& operator+=(Tensor& a, const Tensor& b);
Tensor& operator-=(Tensor& a, const Tensor& b);
Tensor& operator*=(Tensor& a, const Tensor& b);
Tensor& operator*=(Tensor& a, Scalar b);

/// Prints like PyTorch: tensor([[1.0000, 2.0000]], device='cpu:1', dtype=float64).
std::ostream& operator<<(std::ostream& os, const Tensor& t);
/// Shapes print as [2, 3].
std::ostream& operator<<(std::ostream& os, const Shape& shape);
std::string shape_str(const Shape& shape);

namespace detail {
/// Creates an uninitialised contiguous tensor (no autograd).
Tensor make_empty(const Shape& sizes, DType dtype, Device device);
/// A view of t's storage with new geometry (no autograd; views.cpp wraps it).
Tensor make_view(const Tensor& t, Shape sizes, Shape strides, int64_t offset);
/// Points t's TensorImpl at data's storage and geometry, keeping the handle and its autograd
/// metadata (PyTorch's `t.data = data`): Module::to() and DataParallel's replicas use it.
void set_data(const Tensor& t, const Tensor& data);
/// Row-major strides for a shape.
Shape contiguous_strides(const Shape& sizes);
int64_t shape_numel(const Shape& sizes);
/// shape_numel for a shape not yet known to fit: ValueError "<op>: shape S has more elements
/// than fit in 64 bits" when the product overflows (sizes must be non-negative).
int64_t checked_numel(const Shape& sizes, const char* op = nullptr);
/// Wraps a possibly negative dim into [0, ndim); IndexError naming `op` otherwise.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op = "dim");
/// Throws DeviceError "Expected all tensors to be on the same device, but found at least two
/// devices, a and b!" unless all defined tensors share a device.
void check_same_device(std::initializer_list<const Tensor*> tensors);
void check_same_device(const std::vector<Tensor>& tensors);
/// One operand of a check_floating call: its name in the error message, and its dtype.
struct NamedDType {
  const char* name;
  DType dtype;
};
/// The dtype rule of a primitive (convolution, pooling, batch norm, cross-entropy, products):
/// `dt`, the operands' common dtype, must be floating: float32, float64, bfloat16 or float16, on
/// every backend (Note [16-bit kernels]). Otherwise a ValueError naming each operand's dtype.
void check_floating(const char* op, DType dt, std::initializer_list<NamedDType> operands);
}  // namespace detail

}  // namespace octo
