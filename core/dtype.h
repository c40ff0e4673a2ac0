// DType: the element types a tensor can hold, their sizes and names, and dtype dispatch.
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
/// bfloat16 or float16: the 16-bit floating types, stored in 16 bits and computed in float.
inline bool is_half(DType t) { return t == kBFloat16 || t == kFloat16; }
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

/// The C++ type of a dtype: cpp_type_t<kFloat32> is float (the inverse of dtype_of).
template <DType D>
struct DTypeToCpp;
#define OCTO_DTYPE_TO_CPP(D, T) \
  template <>                   \
  struct DTypeToCpp<D> {        \
    using type = T;             \
  };
OCTO_DTYPE_TO_CPP(kFloat32, float)
OCTO_DTYPE_TO_CPP(kFloat64, double)
OCTO_DTYPE_TO_CPP(kInt64, int64_t)
OCTO_DTYPE_TO_CPP(kInt32, int32_t)
OCTO_DTYPE_TO_CPP(kUInt8, uint8_t)
OCTO_DTYPE_TO_CPP(kBool, bool)
OCTO_DTYPE_TO_CPP(kBFloat16, BFloat16)
OCTO_DTYPE_TO_CPP(kFloat16, Float16)
#undef OCTO_DTYPE_TO_CPP
template <DType D>
using cpp_type_t = typename DTypeToCpp<D>::type;

// --- dispatch over a list of dtypes
// ----------------------------------------------------------------
//
// Note [One dtype dispatch]
// A kernel that is built for a fixed set of dtypes names the set once, as a DTypes<...> list, and
// dispatches with
//
//   dispatch_dtypes<FloatingTypes>(param.dtype, "sgd_update", [&](auto tag) {
//     using T = decltype(tag);  // float, double, BFloat16 or Float16
//     ...
//   });
//
// f receives a value-initialised T as a type tag. Any other dtype throws, naming the op, the dtype
// found and the ones the list holds: a ValueError ("op: unsupported dtype int64; expected one of
// float32, float64, bfloat16, float16") when the op is not defined for it, or with
// DTypeError::NotImplemented a NotImplementedError ("op is not implemented for dtype int32 on this
// backend yet (float32, float64 are)") when another backend has it and this one does not yet. Plain
// host templates, so nvcc compiles them in the host code of .cu files. (The OCTO_DISPATCH_* macros
// below, which bind `scalar_t`, are the older form for the CPU kernels' fixed sets.)

template <DType... Ds>
struct DTypes {
  static constexpr DType values[] = {Ds...};
};
/// The floating dtypes including the 16-bit storage types (computed in float by the kernels).
using FloatingTypes = DTypes<kFloat32, kFloat64, kBFloat16, kFloat16>;
/// float32 and float64 only.
using Float32And64 = DTypes<kFloat32, kFloat64>;

/// What dispatch_dtypes throws for a dtype outside its list.
enum class DTypeError : int8_t {
  Unsupported,     // ValueError: the op is not defined for that dtype
  NotImplemented,  // NotImplementedError: this backend does not have it yet
};

namespace detail {
[[noreturn]] void throw_dtype_error(DTypeError kind, const char* op, DType found,
                                    const DType* supported, size_t count);

template <DType... Ds, typename F>
void dispatch_in(DTypes<Ds...>, DType dtype, const char* op, F& f, DTypeError error) {
  const bool found = ((dtype == Ds ? (f(cpp_type_t<Ds>{}), true) : false) || ...);
  if (!found) throw_dtype_error(error, op, dtype, DTypes<Ds...>::values, sizeof...(Ds));
}
}  // namespace detail

/// Calls f(T{}) with T = cpp_type_t<dtype> when dtype is in List (a DTypes<...>), else throws
/// (Note [One dtype dispatch]).
template <typename List, typename F>
void dispatch_dtypes(DType dtype, const char* op, F&& f,
                     DTypeError error = DTypeError::Unsupported) {
  detail::dispatch_in(List{}, dtype, op, f, error);
}

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
