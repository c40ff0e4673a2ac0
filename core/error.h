// octo::Error and its subclasses, and the OCTO_CHECK family that throws them.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/macros.h"

namespace octo {

/// Base of every error octo throws. what() is the message first, then " (file:line)".
class Error : public std::runtime_error {
 public:
  Error(std::string msg, const char* file, int line);
  explicit Error(std::string msg) : std::runtime_error(msg), msg_(std::move(msg)) {}
  /// The message without the source location.
  const std::string& msg() const { return msg_; }

 private:
  std::string msg_;
};

/// An argument has the wrong value, shape or dtype (Python's ValueError / TypeError).
class ValueError : public Error {
  using Error::Error;
};
/// A dimension or index is out of range (Python's IndexError).
class IndexError : public Error {
  using Error::Error;
};
/// Tensors on the wrong device, or a device that does not exist or is not built in.
class DeviceError : public Error {
  using Error::Error;
};
/// An allocation failed; the message says how much was asked for and on which device.
class OutOfMemoryError : public Error {
  using Error::Error;
};
/// A file could not be read or written, or its contents are malformed.
class IOError : public Error {
  using Error::Error;
};
/// The operation exists in the API but not for these arguments (yet).
class NotImplementedError : public Error {
  using Error::Error;
};

namespace detail {

template <typename T>
void str_put(std::ostringstream& os, const T& x) {
  os << x;
}
/// Shapes and other vectors print as [2, 3].
template <typename T>
void str_put(std::ostringstream& os, const std::vector<T>& v) {
  os << '[';
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) os << ", ";
    os << v[i];
  }
  os << ']';
}

inline void str_append(std::ostringstream&) {}
template <typename T, typename... Rest>
void str_append(std::ostringstream& os, const T& first, const Rest&... rest) {
  str_put(os, first);
  str_append(os, rest...);
}

/// Concatenates its arguments with operator<<. Only called on the failure path.
template <typename... Args>
std::string str(const Args&... args) {
  std::ostringstream os;
  str_append(os, args...);
  return os.str();
}

template <typename E, typename... Args>
[[noreturn]] void throw_error(const char* file, int line, const Args&... args) {
  throw E(str(args...), file, line);
}

}  // namespace detail
}  // namespace octo

// OCTO_CHECK(cond, "shapes ", a, " and ", b, " cannot be multiplied") throws octo::Error whose
// message is built from the arguments -- only when cond is false, so checks cost one branch.
#define OCTO_CHECK_T(ErrorType, cond, ...)                                     \
  do {                                                                         \
    if (OCTO_UNLIKELY(!(cond))) {                                              \
      ::octo::detail::throw_error<ErrorType>(__FILE__, __LINE__, __VA_ARGS__); \
    }                                                                          \
  } while (0)

#define OCTO_CHECK(cond, ...) OCTO_CHECK_T(::octo::Error, cond, __VA_ARGS__)
#define OCTO_CHECK_VALUE(cond, ...) OCTO_CHECK_T(::octo::ValueError, cond, __VA_ARGS__)
#define OCTO_CHECK_INDEX(cond, ...) OCTO_CHECK_T(::octo::IndexError, cond, __VA_ARGS__)
#define OCTO_CHECK_DEVICE(cond, ...) OCTO_CHECK_T(::octo::DeviceError, cond, __VA_ARGS__)
#define OCTO_CHECK_IO(cond, ...) OCTO_CHECK_T(::octo::IOError, cond, __VA_ARGS__)
#define OCTO_THROW(ErrorType, ...) \
  ::octo::detail::throw_error<ErrorType>(__FILE__, __LINE__, __VA_ARGS__)

// For octo's own invariants: a failure is a bug in octo, not in the caller's code.
#define OCTO_INTERNAL_ASSERT(cond, ...)                                                        \
  OCTO_CHECK_T(::octo::Error, cond,                                                            \
               "internal assert failed: " #cond ". This is a bug in octo; please report it. ", \
               ##__VA_ARGS__)
