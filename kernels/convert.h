// One element converted between dtypes, the same on the CPU and in CUDA kernels (Tensor::to).
//
// Note [Float to integer conversion]: C++ leaves a float -> integer cast undefined when the value
// does not fit (inf, NaN, 1e30 -> int32), and CPUs and GPUs then disagree. octo defines it: NaN
// becomes 0 and anything outside the integer's range saturates at its nearest end, so
// `full({1}, inf).to(kInt64)` is INT64_MAX on every device. In range, the value truncates toward
// zero as in C++. x -> bool is x != 0.
#pragma once

#include <limits>
#include <type_traits>

#include "core/half.h"
#include "core/macros.h"

namespace octo::kernels {

/// v as a D (Note [Float to integer conversion]).
template <typename D, typename S>
OCTO_HOST_DEVICE inline D convert(S v) {
  if constexpr (std::is_same_v<D, S>) {
    return v;
  } else if constexpr (kIsHalfType<S>) {
    return convert<D>(static_cast<float>(v));
  } else if constexpr (std::is_same_v<D, bool>) {
    return v != S(0);
  } else if constexpr (kIsHalfType<D>) {
    return D(static_cast<float>(v));
  } else if constexpr (std::is_floating_point_v<S> && std::is_integral_v<D>) {
    constexpr S lo = static_cast<S>(std::numeric_limits<D>::lowest());
    constexpr S hi = static_cast<S>(std::numeric_limits<D>::max());
    if (v != v) return D(0);
    if (v <= lo) return std::numeric_limits<D>::lowest();
    if (v >= hi) return std::numeric_limits<D>::max();
    return static_cast<D>(v);
  } else {
    return static_cast<D>(v);
  }
}

}  // namespace octo::kernels
