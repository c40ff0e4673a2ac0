// Properties of a CUDA device (name, compute capability, SMs, clocks, memory), without CUDA
// headers.
#pragma once

#include <string>

namespace octo::cuda {

struct DeviceInfo {
  std::string name;
  int major = 0, minor = 0;  // compute capability
  int sm_count = 0;
  double sm_clock_mhz = 0;   // peak SM clock the runtime reports (cudaDevAttrClockRate)
  double mem_clock_mhz = 0;  // peak memory clock (cudaDevAttrMemoryClockRate)
  int mem_bus_bits = 0;
  double memory_gib = 0;
};

/// Reads the properties of CUDA device `index` (cudaGetDeviceProperties for name, capability,
/// SMs, memory; cudaDeviceGetAttribute for the clocks, which CUDA 13 dropped from
/// cudaDeviceProp). Throws octo::Error naming the failing call.
///
///   auto info = octo::cuda::device_info(0);   // info.name == "NVIDIA H200", info.major == 9
DeviceInfo device_info(int index);

}  // namespace octo::cuda
