// Device properties through the CUDA runtime, for benchmarks and reports.
#include "kernels/cuda/device_info.h"

#include <cuda_runtime_api.h>

#include "kernels/cuda/cuda_check.h"

namespace octo::cuda {

DeviceInfo device_info(int index) {
  cudaDeviceProp prop{};
  OCTO_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  DeviceInfo info;
  info.name = prop.name;
  info.major = prop.major;
  info.minor = prop.minor;
  info.sm_count = prop.multiProcessorCount;
  info.mem_bus_bits = prop.memoryBusWidth;
  info.memory_gib = double(prop.totalGlobalMem) / double(1ull << 30);
  int khz = 0;
  OCTO_CUDA_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, index));
  info.sm_clock_mhz = khz / 1000.0;
  OCTO_CUDA_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, index));
  info.mem_clock_mhz = khz / 1000.0;
  return info;
}

}  // namespace octo::cuda
