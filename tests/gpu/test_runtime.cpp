// GPU runtime basics: devices are counted, named and made current.
#include "gpu/gpu_main.h"

#include <octo/octo.h>

TEST_CASE("cuda devices are visible and named") {
  REQUIRE(octo::cuda::device_count() >= 1);
  CHECK_FALSE(octo::cuda_hooks().device_name(0).empty());
  octo::DeviceGuard guard(octo::Device("cuda:0"));
  CHECK(octo::Device("cuda") == octo::Device("cuda:0"));
  octo::synchronize(octo::Device("cuda:0"));
}
