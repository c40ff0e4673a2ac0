// scatter and gather for nested inputs and outputs (nn::Value), with autograd.
#pragma once

#include <vector>

#include "nn/value.h"

namespace octo::parallel {

/// Splits every tensor in `inputs` along dim into torch.chunk pieces, one per device (lists are
/// recursed; numbers and strings go to every replica unchanged). Returns one input list per
/// replica; with fewer rows than devices, fewer replicas (the shortest split wins).
std::vector<std::vector<nn::Value>> scatter(const std::vector<nn::Value>& inputs,
                                            const std::vector<Device>& devices, int64_t dim = 0);

/// Concatenates the replicas' outputs along dim on `destination`, recursing into lists (every
/// replica must return the same structure). 0-dim tensors become a 1-d tensor of one value per
/// replica, as in PyTorch.
nn::Value gather(const std::vector<nn::Value>& outputs, Device destination, int64_t dim = 0);

}  // namespace octo::parallel
