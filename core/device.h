// Device: where a tensor lives -- a tiny value type (type + index) that parses, prints and hashes.
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <string_view>

namespace octo {

enum class DeviceType : int8_t { CPU = 0, CUDA = 1 };

/// A device tag. "cpu" is cpu:0; "cpu:N" are virtual CPU devices over host memory that behave
/// like separate GPUs for placement and errors (see docs/architecture.md, "Virtual CPU devices").
/// "cuda" is the current CUDA device (cuda:0 unless changed with DeviceGuard).
///
///   octo::Device d("cuda:1");   d.is_cuda() == true, d.index() == 1
///   octo::Device("cpu") == octo::Device("cpu:0")
class Device {
 public:
  constexpr Device(DeviceType type = DeviceType::CPU, int index = 0) : type_(type), index_(index) {}
  /// Parses "cpu", "cpu:N", "cuda", "cuda:N"; throws ValueError on anything else.
  Device(std::string_view spec);  // NOLINT(google-explicit-constructor): "cpu:1" reads naturally
  Device(const char* spec) : Device(std::string_view(spec)) {}         // NOLINT
  Device(const std::string& spec) : Device(std::string_view(spec)) {}  // NOLINT

  DeviceType type() const { return type_; }
  int index() const { return index_; }
  bool is_cpu() const { return type_ == DeviceType::CPU; }
  bool is_cuda() const { return type_ == DeviceType::CUDA; }
  std::string str() const;

  friend bool operator==(const Device& a, const Device& b) {
    return a.type_ == b.type_ && a.index_ == b.index_;
  }
  friend bool operator!=(const Device& a, const Device& b) { return !(a == b); }
  friend bool operator<(const Device& a, const Device& b) {
    return a.type_ != b.type_ ? a.type_ < b.type_ : a.index_ < b.index_;
  }

 private:
  DeviceType type_;
  int index_;
};

std::ostream& operator<<(std::ostream& os, const Device& d);

inline constexpr Device kCPU{DeviceType::CPU, 0};

/// The calling thread's current device index of a type (cuda:0 unless a DeviceGuard changed it):
/// what Device("cuda") resolves to. DeviceGuard (core/device_hooks.h) is what changes it.
int current_device_index(DeviceType type);

namespace detail {
/// Sets the calling thread's current index of a type; only DeviceGuard calls it (it also tells
/// the CUDA runtime, which this header cannot see).
void set_current_device_index(DeviceType type, int index);
}  // namespace detail

}  // namespace octo

template <>
struct std::hash<octo::Device> {
  size_t operator()(const octo::Device& d) const noexcept {
    return std::hash<int>()(static_cast<int>(d.type()) << 16 ^ d.index());
  }
};
