// Autocast's op lists, its thread-local state and the casting step ops call.
#include "autograd/autocast.h"

#include <array>

#include "core/error.h"
#include "tensor/tensor.h"

namespace octo::amp {

// Note [Autocast]: autocast is PyTorch's, op by op. An op on the lists starts with an amp::Cast;
// when autocast is on for its device type, the Cast casts its floating arguments by the op's
// policy and turns autocast off for the op's body, so a composite op (linear, cross_entropy) is
// cast once at the top and its parts run as written. Everything else runs in its inputs' dtypes,
// which type promotion then carries: relu of a bfloat16 conv output is bfloat16, and a bfloat16
// activation plus a float32 bias is float32.
//
// The casts are ordinary differentiable `to` ops, so the float32 parameters get float32
// gradients, and backward runs with autocast off (the engine's StateGuard): each op's backward
// runs in the dtypes its forward saw. PyTorch also caches the low-precision copy of each
// parameter for the life of the autocast region; octo casts at each use (a model uses each
// weight once per forward, so the cache would save nothing there).
//
// The table below is PyTorch's lists (aten/src/ATen/autocast_mode.{h,cpp}, "Autocast Op
// Reference" in torch.amp's docs) restricted to the ops octo has. On the CPU: products and
// convolutions in the low precision, the losses (and prod) in float32. On CUDA the float32 list
// also holds the pointwise ops whose results leave 16-bit range or precision (exp, log, pow,
// rsqrt, ...), softmax and log_softmax, layer_norm, sum and logsumexp; binary_cross_entropy is
// banned there, as in PyTorch, because its input is a probability that float16 rounds to 0 or 1.

namespace {

constexpr auto kLow = Policy::kLowerPrecision;
constexpr auto kF32 = Policy::kFloat32;
constexpr std::nullopt_t kNone = std::nullopt;

constexpr std::array kOpPolicies = {
    // op                                cpu    cuda
    OpPolicy{"conv2d", kLow, kLow},
    OpPolicy{"linear", kLow, kLow},
    OpPolicy{"matmul", kLow, kLow},
    OpPolicy{"mm", kLow, kLow},
    OpPolicy{"bmm", kLow, kLow},
    OpPolicy{"binary_cross_entropy", kF32, Policy::kBanned},
    OpPolicy{"binary_cross_entropy_with_logits", kF32, kF32},
    OpPolicy{"cross_entropy", kF32, kF32},
    OpPolicy{"huber_loss", kF32, kF32},
    OpPolicy{"l1_loss", kF32, kF32},
    OpPolicy{"mse_loss", kF32, kF32},
    OpPolicy{"nll_loss", kF32, kF32},
    OpPolicy{"smooth_l1_loss", kF32, kF32},
    OpPolicy{"prod", kF32, kF32},
    OpPolicy{"exp", kNone, kF32},
    OpPolicy{"expm1", kNone, kF32},
    OpPolicy{"log", kNone, kF32},
    OpPolicy{"log1p", kNone, kF32},
    OpPolicy{"pow", kNone, kF32},
    OpPolicy{"reciprocal", kNone, kF32},
    OpPolicy{"rsqrt", kNone, kF32},
    OpPolicy{"softplus", kNone, kF32},
    OpPolicy{"softmax", kNone, kF32},
    OpPolicy{"log_softmax", kNone, kF32},
    OpPolicy{"layer_norm", kNone, kF32},
    OpPolicy{"sum", kNone, kF32},
    OpPolicy{"logsumexp", kNone, kF32},
};

thread_local State tls_state;

int slot(DeviceType type) { return type == DeviceType::CUDA ? 1 : 0; }

}  // namespace

std::span<const OpPolicy> op_policies() { return kOpPolicies; }

std::optional<Policy> policy(std::string_view op, DeviceType type) {
  for (const OpPolicy& p : kOpPolicies)
    if (p.op == op) return type == DeviceType::CUDA ? p.cuda : p.cpu;
  return std::nullopt;
}

State state() { return tls_state; }
bool is_enabled(DeviceType type) { return tls_state.enabled[slot(type)]; }
DType dtype(DeviceType type) { return tls_state.dtype[slot(type)]; }

StateGuard::StateGuard(const State& s) : previous_(tls_state) { tls_state = s; }
StateGuard::~StateGuard() { tls_state = previous_; }

Cast::Cast(std::string_view op, const Tensor& first) {
  if (!first.defined()) return;
  const DeviceType type = first.device().type();
  if (!tls_state.enabled[slot(type)]) return;  // the common case: one thread-local read
  const std::optional<Policy> p = policy(op, type);
  if (!p) return;
  OCTO_CHECK_VALUE(*p != Policy::kBanned, op, " is unsafe to autocast on ", first.device(),
                   ": its input is a probability that ", tls_state.dtype[slot(type)],
                   " may round to exactly 0 or 1. Use binary_cross_entropy_with_logits (which "
                   "is safe under autocast), or run this op with autocast off");
  active_ = true;
  type_ = type;
  policy_ = *p;
  dtype_ = *p == Policy::kFloat32 ? kFloat32 : tls_state.dtype[slot(type)];
  previous_ = tls_state;
  tls_state = State{};  // the op body runs as written (Note [Autocast])
}

Cast::~Cast() {
  if (active_) tls_state = previous_;
}

Tensor Cast::operator()(const Tensor& t) const {
  if (!active_ || !t.defined() || t.device().type() != type_) return t;
  const DType dt = t.dtype();
  const bool eligible =
      policy_ == Policy::kFloat32 ? is_half(dt) : (is_floating(dt) && dt != kFloat64);
  return eligible && dt != dtype_ ? t.to(dtype_) : t;
}

}  // namespace octo::amp

namespace octo {

amp::State AutocastGuard::with(DeviceType type, DType dtype, bool enabled, amp::State s) {
  OCTO_CHECK_VALUE(is_half(dtype), "autocast: expected dtype bfloat16 or float16, got ", dtype);
  s.enabled[amp::slot(type)] = enabled;
  s.dtype[amp::slot(type)] = dtype;
  return s;
}

AutocastGuard::AutocastGuard(DType dtype, bool enabled)
    : guard_(with(DeviceType::CUDA, dtype, enabled,
                  with(DeviceType::CPU, dtype, enabled, amp::state()))) {}

AutocastGuard::AutocastGuard(DeviceType device_type, DType dtype, bool enabled)
    : guard_(with(device_type, dtype, enabled, amp::state())) {}

}  // namespace octo
