// Autocast: ops on PyTorch's autocast lists run in a chosen precision, per thread (torch.autocast).
#pragma once

#include <optional>
#include <span>
#include <string_view>

#include "core/device.h"
#include "core/dtype.h"

namespace octo {

class Tensor;

namespace amp {

/// What autocast does to an op's floating inputs (Note [Autocast] in autograd/autocast.cpp).
enum class Policy {
  kLowerPrecision,  ///< every floating input but float64 runs in the autocast dtype (matmul,
                    ///< conv2d)
  kFloat32,         ///< bfloat16 and float16 inputs run in float32 (losses; softmax on CUDA)
  kBanned,          ///< refused under autocast (binary_cross_entropy on CUDA, as in PyTorch)
};

/// One row of the op lists: an op and its policy on CPU and on CUDA devices (none: the op runs
/// in its inputs' dtypes, as every op not on the lists does).
struct OpPolicy {
  std::string_view op;
  std::optional<Policy> cpu;
  std::optional<Policy> cuda;
};

/// Every op autocast touches, one table (autograd/autocast.cpp). tests/autograd/test_autocast.cpp
/// compares it with PyTorch's lists and runs each CPU entry.
std::span<const OpPolicy> op_policies();
/// The policy of `op` on `type`, or none.
std::optional<Policy> policy(std::string_view op, DeviceType type);

/// The calling thread's autocast state: per device type, whether it is on and its dtype.
struct State {
  bool enabled[2] = {false, false};                    // by DeviceType: CPU, CUDA
  DType dtype[2] = {DType::BFloat16, DType::Float16};  // torch.autocast's defaults
};
State state();
bool is_enabled(DeviceType type);
DType dtype(DeviceType type);

/// Sets this thread's state while alive, then restores the previous one. parallel_apply hands
/// the caller's state to each replica's thread with it; `StateGuard off{State{}}` turns autocast
/// off (the engine does so for backward, which runs in the dtypes forward chose).
class StateGuard {
 public:
  explicit StateGuard(const State& s);
  ~StateGuard();
  StateGuard(const StateGuard&) = delete;
  StateGuard& operator=(const StateGuard&) = delete;

 private:
  State previous_;
};

/// The casting step at the top of an op on the lists. Active when autocast is on for the
/// device type of `first` and `op` has a policy there; then it casts each argument by that
/// policy and turns autocast off until it dies, so the op body (and anything it calls) runs on
/// the cast tensors as written:
///
///   Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, ...) {
///     if (amp::Cast cast{"conv2d", input}) return conv2d(cast(input), cast(weight), cast(bias),
///     ...);
///     ...
///
/// A banned op throws ValueError here.
class Cast {
 public:
  Cast(std::string_view op, const Tensor& first);
  ~Cast();
  Cast(const Cast&) = delete;
  Cast& operator=(const Cast&) = delete;

  explicit operator bool() const { return active_; }
  /// t cast by the op's policy: unchanged if undefined, on another device type, not floating,
  /// float64, or already in the target dtype. Differentiable (a `to` on the graph).
  Tensor operator()(const Tensor& t) const;

 private:
  bool active_ = false;
  DeviceType type_ = DeviceType::CPU;
  Policy policy_ = Policy::kFloat32;
  DType dtype_ = DType::Float32;
  State previous_;
};

}  // namespace amp

/// torch.autocast: while alive, ops on PyTorch's autocast lists run in `dtype` in this thread --
/// products and convolutions in the low precision, losses (and on CUDA softmax, norms and
/// pointwise exp/log) in float32 -- and every other op in its inputs' dtypes. Backward runs in
/// the dtypes forward chose. Parameters stay float32; pair float16 with a GradScaler.
///
///   octo::autocast amp(octo::kBFloat16);  // CPU and CUDA ops
///   octo::Tensor loss = F::cross_entropy(model->forward(x), y);  // conv2d/linear in bfloat16,
///   loss.backward();                                             // the loss in float32
class AutocastGuard {
 public:
  /// Autocast for every device type, in `dtype` (bfloat16 or float16).
  explicit AutocastGuard(DType dtype, bool enabled = true);
  /// Autocast for one device type; the other keeps its state.
  AutocastGuard(DeviceType device_type, DType dtype, bool enabled = true);
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  static amp::State with(DeviceType type, DType dtype, bool enabled, amp::State s);
  amp::StateGuard guard_;
};

/// `octo::autocast amp(octo::kBFloat16);` reads as torch.autocast does.
using autocast = AutocastGuard;

}  // namespace octo
