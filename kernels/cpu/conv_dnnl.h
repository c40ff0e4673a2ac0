// conv2d forward and backward through oneDNN's convolution primitives, when octo is built with it.
#pragma once

#include "kernels/backend.h"
#include "kernels/tensor_arg.h"

namespace octo::kernels::cpu {

// Each returns false, having written nothing, when oneDNN cannot take the call (octo built
// without it, a dtype other than float32 or bfloat16, a non-contiguous tensor, or no oneDNN
// implementation for the shape on this CPU); conv.cpp then runs its own im2col kernels.
bool dnnl_conv2d_forward(const TensorArg& out, const TensorArg& input, const TensorArg& weight,
                         const TensorArg& bias, const Conv2dParams& p);
bool dnnl_conv2d_backward_input(const TensorArg& grad_input, const TensorArg& grad_out,
                                const TensorArg& weight, const Conv2dParams& p);
bool dnnl_conv2d_backward_weight(const TensorArg& grad_weight, const TensorArg& grad_out,
                                 const TensorArg& input, const Conv2dParams& p);

}  // namespace octo::kernels::cpu
