// The umbrella header: #include <octo/octo.h> brings in the whole public API.
#pragma once

#include "octo_config.h"

#include "core/allocator.h"
#include "core/device.h"
#include "core/device_hooks.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/philox.h"
#include "core/random.h"
#include "core/scalar.h"
#include "core/threads.h"

#include "tensor/factories.h"
#include "tensor/tensor.h"

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/node.h"
#include "autograd/ops/elementwise.h"
#include "autograd/ops/indexing.h"
#include "autograd/ops/linalg.h"
#include "autograd/ops/nn_ops.h"
#include "autograd/ops/reduce.h"
