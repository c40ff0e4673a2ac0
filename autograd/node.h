// Node: one recorded operation on the tape -- saved tensors, edges to its inputs, tape position.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace octo::autograd {

using TensorList = std::vector<Tensor>;
class Node;

/// Where a gradient goes: input `input_nr` of `node` (a node's inputs in backward are the
/// gradients of its forward outputs). An edge with a null node means "no gradient needed".
struct Edge {
  std::shared_ptr<Node> node;
  int input_nr = 0;
  bool valid() const { return node != nullptr; }
};

/// A tensor saved for backward. It keeps a detached alias and the storage's version at save time;
/// unpack() checks both that the buffers were not freed by an earlier backward and that no
/// in-place op changed the tensor since. For double backward (Note [Saved tensors and double
/// backward]) it also keeps the tensor's place in the graph: an input that requires grad is kept
/// as itself, and an output of the saving node (`output_nr` >= 0) is given back with that node as
/// its grad_fn -- not stored with it, which would be a reference cycle.
class SavedTensor {
 public:
  SavedTensor() = default;
  explicit SavedTensor(const Tensor& t, int output_nr = -1);
  /// The saved value; while grad mode is on (a backward with create_graph), with its history.
  Tensor unpack(const Node& owner) const;
  void release();
  bool released() const { return released_; }
  /// The saved tensor without checks (for to_dot).
  const Tensor& peek() const { return data_; }

 private:
  Tensor data_;
  Tensor original_;  // an input that requires grad: a leaf itself, a non-leaf as an alias
  uint32_t version_ = 0;
  int output_nr_ = -1;
  bool released_ = false;
};

/// One recorded op. Nodes are ordered by sequence_nr, taken from one global atomic counter when
/// the op ran: that order is the tape, and backward replays it in reverse.
class Node : public std::enable_shared_from_this<Node> {
 public:
  Node(std::string name, Device device);
  virtual ~Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  const std::string& name() const { return name_; }
  uint64_t sequence_nr() const { return sequence_nr_; }
  /// The device whose worker runs this node's backward.
  Device device() const { return device_; }
  /// One edge per differentiable input of the forward op.
  const std::vector<Edge>& next_edges() const { return next_edges_; }
  void add_next_edge(Edge e) { next_edges_.push_back(std::move(e)); }
  /// How many gradients apply() takes: the number of the forward's outputs.
  int num_inputs() const { return num_inputs_; }
  void set_num_inputs(int n) { num_inputs_ = n; }

  /// Backward: grads[i] is the gradient of forward output i (undefined when none flowed);
  /// returns one gradient per next edge (undefined for "none").
  virtual TensorList apply(TensorList&& grads) = 0;
  /// Frees saved tensors after a backward without retain_graph.
  virtual void release_saved() {}
  /// Saved tensors, for to_dot and error messages.
  virtual std::vector<const SavedTensor*> saved_tensors() const { return {}; }

  /// Hooks on the gradient of forward output `output_nr` (Tensor::register_hook). A hook may
  /// return a replacement gradient.
  void add_pre_hook(int output_nr, std::function<Tensor(const Tensor&)> hook);
  void run_pre_hooks(TensorList& grads) const;

 private:
  std::string name_;
  uint64_t sequence_nr_;
  Device device_;
  int num_inputs_ = 1;
  std::vector<Edge> next_edges_;
  std::vector<std::pair<int, std::function<Tensor(const Tensor&)>>> pre_hooks_;
};

/// The node most ops create: a backward lambda written beside the forward (STYLE.md), which
/// receives the incoming gradients and the unpacked saved tensors.
class FunctionNode final : public Node {
 public:
  using BackwardFn = std::function<TensorList(const TensorList& grads, const TensorList& saved)>;
  FunctionNode(std::string name, Device device, std::vector<SavedTensor> saved, BackwardFn fn);
  TensorList apply(TensorList&& grads) override;
  void release_saved() override;
  std::vector<const SavedTensor*> saved_tensors() const override;

 private:
  std::vector<SavedTensor> saved_;
  BackwardFn fn_;
};

/// The sink for a leaf: adds the incoming gradient into leaf.grad(), then runs the leaf's
/// post-accumulate hooks (the distributed layer starts all-reduce from there).
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(Tensor leaf);
  TensorList apply(TensorList&& grads) override;
  const Tensor& variable() const { return leaf_; }

 private:
  Tensor leaf_;
};

/// The edge along which a gradient for `t` flows (its grad_fn, or its leaf accumulator), or an
/// invalid edge when t does not require grad.
Edge gradient_edge(const Tensor& t);

}  // namespace octo::autograd
