// Scalar: a number passed to an op (fill value, clamp bound, ...), kept exact for integers.
#pragma once

#include <cstdint>
#include <ostream>
#include <type_traits>

#include "core/macros.h"

namespace octo {

/// A double or an int64, so that integer fills stay exact above 2^53. Trivially copyable so
/// CUDA kernels can take it by value.
class Scalar {
 public:
  Scalar() = default;
  // A floating value keeps i_ unused: converting inf or NaN to int64 would be undefined.
  template <typename T, std::enable_if_t<std::is_floating_point_v<T>, int> = 0>
  Scalar(T v) : d_(static_cast<double>(v)), i_(0), is_int_(false) {}  // NOLINT
  template <typename T, std::enable_if_t<std::is_integral_v<T>, int> = 0>
  Scalar(T v) : d_(static_cast<double>(v)), i_(static_cast<int64_t>(v)), is_int_(true) {}  // NOLINT

  bool is_integral() const { return is_int_; }
  OCTO_HOST_DEVICE double to_double() const { return d_; }
  /// Integers exactly; a floating value truncated toward zero, saturated at the int64 range,
  /// NaN as 0 (a plain cast of those is undefined behaviour).
  OCTO_HOST_DEVICE int64_t to_int() const {
    if (is_int_) return i_;
    if (!(d_ == d_)) return 0;
    if (d_ >= 9223372036854775807.0) return INT64_MAX;
    if (d_ <= -9223372036854775808.0) return INT64_MIN;
    return static_cast<int64_t>(d_);
  }
  /// The value as T: integers convert from the exact int64, floats from the double.
  template <typename T>
  OCTO_HOST_DEVICE T to() const {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(to_int());
    } else {
      return static_cast<T>(d_);
    }
  }

 private:
  double d_ = 0.0;
  int64_t i_ = 0;
  bool is_int_ = false;
};

inline std::ostream& operator<<(std::ostream& os, const Scalar& s) {
  return s.is_integral() ? os << s.to_int() : os << s.to_double();
}

}  // namespace octo
