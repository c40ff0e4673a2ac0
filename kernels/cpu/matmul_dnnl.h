// bfloat16 batched products through oneDNN's matmul primitive, when octo is built with it.
#pragma once

#include "kernels/tensor_arg.h"

namespace octo::kernels::cpu {

/// out = alpha * a @ b + beta * out for bfloat16 [B, M, K] @ [B, K, N] (Note [oneDNN bf16
/// matmul]). Returns false, having written nothing, when oneDNN cannot take the call (octo built
/// without it, other dtypes, strides no plain layout expresses, an empty sum, or only oneDNN's
/// reference implementation on this CPU); the caller then stages through float32.
bool dnnl_bmm_bf16(const TensorArg& out, const TensorArg& a, const TensorArg& b, double alpha,
                   double beta);

}  // namespace octo::kernels::cpu
