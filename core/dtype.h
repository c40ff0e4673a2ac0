// DType: the element types a tensor can hold, their sizes and names, and dispatch macros.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string_view>

#include "core/error.h"
#include "core/half.h"

namespace octo {

enum class DType : int8_t { Float32, Float64, Int64, Int32, UInt8, Bool, BFloat16, Float16 };

inline constexpr DType kFloat32 = DType::Float32;
inline constexpr DType kFloat64 = DType::Float64;
inline constexpr DType kInt64 = DType::Int64;
inline constexpr DType kInt32 = DType::Int32;
inline constexpr DType kUInt8 = DType::UInt8;
inline constexpr DType kBool = DType::Bool;
inline constexpr DType kBFloat16 = DType::BFloat16;
inline constexpr DType kFloat16 = DType::Float16;

/// Bytes per element.
size_t itemsize(DType t);
/// PyTorch-style name: "float32", "int64", "bool", ...
std::string_view dtype_name(DType t);
/// Parses dtype_name()'s output; throws ValueError otherwise.
DType dtype_from_name(std::string_view name);
std::ostream& operator<<(std::ostream& os, DType t);

inline bool is_floating(DType t) {
  return t == kFloat32 || t == kFloat64 || t == kBFloat16 || t == kFloat16;
}
inline bool is_integral(DType t, bool include_bool = false) {
  return t == kInt64 || t == kInt32 || t == kUInt8 || (include_bool && t == kBool);
}
/// The dtype of a binary op's result, following PyTorch's promotion for tensor-tensor ops.
DType promote_types(DType a, DType b);

template <typename T>
struct CppToDType;
#define OCTO_CPP_TO_DTYPE(T, D)       \
  template <>                         \
  struct CppToDType<T> {              \
    static constexpr DType value = D; \
  };
OCTO_CPP_TO_DTYPE(float, kFloat32)
OCTO_CPP_TO_DTYPE(double, kFloat64)
OCTO_CPP_TO_DTYPE(int64_t, kInt64)
OCTO_CPP_TO_DTYPE(int32_t, kInt32)
OCTO_CPP_TO_DTYPE(uint8_t, kUInt8)
OCTO_CPP_TO_DTYPE(bool, kBool)
OCTO_CPP_TO_DTYPE(BFloat16, kBFloat16)
OCTO_CPP_TO_DTYPE(Float16, kFloat16)
#undef OCTO_CPP_TO_DTYPE
template <typename T>
inline constexpr DType dtype_of = CppToDType<T>::value;

}  // namespace octo

// OCTO_DISPATCH_*(dtype, "op", [&] { ... scalar_t ... }) runs the lambda with scalar_t bound to
// the C++ type of dtype, and throws a ValueError naming the op for dtypes the op does not support.
#define OCTO_DISPATCH_CASE_(D, T, ...) \
  case D: {                            \
    using scalar_t = T;                \
    return __VA_ARGS__();              \
  }

#define OCTO_DISPATCH_UNSUPPORTED_(dtype, name) \
  default:                                      \
    OCTO_THROW(::octo::ValueError, name, ": unsupported dtype ", dtype);

#define OCTO_DISPATCH_FLOATING(dtype, name, ...)                       \
  [&] {                                                                \
    switch (dtype) {                                                   \
      OCTO_DISPATCH_CASE_(::octo::DType::Float32, float, __VA_ARGS__)  \
      OCTO_DISPATCH_CASE_(::octo::DType::Float64, double, __VA_ARGS__) \
      OCTO_DISPATCH_UNSUPPORTED_(dtype, name)                          \
    }                                                                  \
  }()

#define OCTO_DISPATCH_ALL(dtype, name, ...)                            \
  [&] {                                                                \
    switch (dtype) {                                                   \
      OCTO_DISPATCH_CASE_(::octo::DType::Float32, float, __VA_ARGS__)  \
      OCTO_DISPATCH_CASE_(::octo::DType::Float64, double, __VA_ARGS__) \
      OCTO_DISPATCH_CASE_(::octo::DType::Int64, int64_t, __VA_ARGS__)  \
      OCTO_DISPATCH_CASE_(::octo::DType::Int32, int32_t, __VA_ARGS__)  \
      OCTO_DISPATCH_CASE_(::octo::DType::UInt8, uint8_t, __VA_ARGS__)  \
      OCTO_DISPATCH_CASE_(::octo::DType::Bool, bool, __VA_ARGS__)      \
      OCTO_DISPATCH_UNSUPPORTED_(dtype, name)                          \
    }                                                                  \
  }()

// Every dtype including the 16-bit storage types (for copies and conversions).
#define OCTO_DISPATCH_ALL_AND_HALF(dtype, name, ...)                              \
  [&] {                                                                           \
    switch (dtype) {                                                              \
      OCTO_DISPATCH_CASE_(::octo::DType::Float32, float, __VA_ARGS__)             \
      OCTO_DISPATCH_CASE_(::octo::DType::Float64, double, __VA_ARGS__)            \
      OCTO_DISPATCH_CASE_(::octo::DType::Int64, int64_t, __VA_ARGS__)             \
      OCTO_DISPATCH_CASE_(::octo::DType::Int32, int32_t, __VA_ARGS__)             \
      OCTO_DISPATCH_CASE_(::octo::DType::UInt8, uint8_t, __VA_ARGS__)             \
      OCTO_DISPATCH_CASE_(::octo::DType::Bool, bool, __VA_ARGS__)                 \
      OCTO_DISPATCH_CASE_(::octo::DType::BFloat16, ::octo::BFloat16, __VA_ARGS__) \
      OCTO_DISPATCH_CASE_(::octo::DType::Float16, ::octo::Float16, __VA_ARGS__)   \
      OCTO_DISPATCH_UNSUPPORTED_(dtype, name)                                     \
    }                                                                             \
  }()
