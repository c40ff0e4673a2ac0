// main() for GPU test executables: exit 77 (meson's "skipped") when no CUDA device is visible.
#pragma once

#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <cstdio>

#include "core/device_hooks.h"

int main(int argc, char** argv) {
  if (!octo::cuda::is_available()) {
    std::printf("no CUDA device visible (octo built with CUDA: %s); skipping\n",
                octo::cuda_hooks().is_built() ? "yes" : "no");
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
