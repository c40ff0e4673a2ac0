// DType sizes, names and type promotion.
#include "core/dtype.h"

#include <array>
#include <string>

namespace octo {

namespace {
struct DTypeInfo {
  DType dtype;
  std::string_view name;
  size_t size;
};
constexpr std::array<DTypeInfo, 8> kInfo{{
    {kFloat32, "float32", 4},
    {kFloat64, "float64", 8},
    {kInt64, "int64", 8},
    {kInt32, "int32", 4},
    {kUInt8, "uint8", 1},
    {kBool, "bool", 1},
    {kBFloat16, "bfloat16", 2},
    {kFloat16, "float16", 2},
}};
const DTypeInfo& info(DType t) { return kInfo[static_cast<size_t>(t)]; }

// Rank for promotion: bool < uint8 < int32 < int64 < float16/bfloat16 < float32 < float64.
int rank(DType t) {
  switch (t) {
    case kBool:
      return 0;
    case kUInt8:
      return 1;
    case kInt32:
      return 2;
    case kInt64:
      return 3;
    case kFloat16:
      return 4;
    case kBFloat16:
      return 4;
    case kFloat32:
      return 5;
    case kFloat64:
      return 6;
  }
  return 0;
}
}  // namespace

size_t itemsize(DType t) { return info(t).size; }
std::string_view dtype_name(DType t) { return info(t).name; }

DType dtype_from_name(std::string_view name) {
  for (const auto& i : kInfo)
    if (i.name == name) return i.dtype;
  OCTO_THROW(ValueError, "unknown dtype '", name,
             "'; expected one of float32, float64, int64, int32, uint8, bool, bfloat16, float16");
}

std::ostream& operator<<(std::ostream& os, DType t) { return os << dtype_name(t); }

namespace detail {
void throw_dtype_error(DTypeError kind, const char* op, DType found, const DType* supported,
                       size_t count) {
  std::string list;
  for (size_t i = 0; i < count; ++i) {
    if (i > 0) list += ", ";
    list += dtype_name(supported[i]);
  }
  if (kind == DTypeError::NotImplemented) {
    OCTO_THROW(NotImplementedError, op, " is not implemented for dtype ", found,
               " on this backend yet (", list, count == 1 ? " is)" : " are)");
  }
  OCTO_THROW(ValueError, op, ": unsupported dtype ", found, "; expected one of ", list);
}
}  // namespace detail

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  // float16 with bfloat16 has no common 16-bit type: PyTorch promotes to float32.
  if ((a == kFloat16 && b == kBFloat16) || (a == kBFloat16 && b == kFloat16)) return kFloat32;
  return rank(a) >= rank(b) ? a : b;
}

}  // namespace octo
