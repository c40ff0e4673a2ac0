// Elementwise math written once as host-device functors; the CPU and CUDA backends instantiate them.
#pragma once

#include <cmath>

#include "core/macros.h"
#include "kernels/op_kinds.h"

namespace octo::kernels {
}  // namespace octo::kernels
