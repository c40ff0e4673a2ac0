// Device parsing and printing, and the calling thread's current device index.
#include "core/device.h"

#include <charconv>

#include "core/error.h"

namespace octo {

namespace {
thread_local int tls_current[2] = {0, 0};  // indexed by DeviceType
}

int current_device_index(DeviceType type) { return tls_current[static_cast<int>(type)]; }

void detail::set_current_device_index(DeviceType type, int index) {
  tls_current[static_cast<int>(type)] = index;
}

Device::Device(std::string_view spec) : type_(DeviceType::CPU), index_(0) {
  auto colon = spec.find(':');
  std::string_view name = spec.substr(0, colon);
  if (name == "cpu") {
    type_ = DeviceType::CPU;
  } else if (name == "cuda") {
    type_ = DeviceType::CUDA;
  } else {
    OCTO_THROW(ValueError, "Expected a device like 'cpu', 'cpu:1', 'cuda' or 'cuda:0', but got '",
               spec, "'");
  }
  if (colon == std::string_view::npos) {
    index_ = type_ == DeviceType::CUDA ? current_device_index(DeviceType::CUDA) : 0;
    return;
  }
  std::string_view digits = spec.substr(colon + 1);
  int idx = -1;
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), idx);
  OCTO_CHECK_T(
      ValueError,
      !digits.empty() && ec == std::errc() && ptr == digits.data() + digits.size() && idx >= 0,
      "Invalid device index in '", spec, "': expected a non-negative integer after ':'");
  index_ = idx;
}

std::string Device::str() const {
  return std::string(is_cpu() ? "cpu:" : "cuda:") + std::to_string(index_);
}

std::ostream& operator<<(std::ostream& os, const Device& d) { return os << d.str(); }

}  // namespace octo
