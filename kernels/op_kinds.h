// The enumerations that name elementwise and reduction primitives in the Backend interface.
#pragma once

#include <cstdint>

// UnaryOp and BinaryOp are generated from the op table with their functors (Note [The op table]).
#include "kernels/functors.h"

namespace octo::kernels {

enum class ReduceOp : int8_t {
  Sum,
  Mean,
  Prod,
  Max,
  Min,
  ArgMax,
  ArgMin,  // out dtype int64; ties resolve to the first index; one reduced dim only
  Var,     // alpha = correction (1 for the unbiased estimator)
};

}  // namespace octo::kernels
