// Collective copies between devices: broadcast, reduce_add, scatter, gather (no autograd).
#pragma once

#include <optional>
#include <vector>

#include "tensor/tensor.h"

namespace octo::parallel::comm {

/// Copies of `tensor` on each device; the entry for the tensor's own device is the tensor itself.
/// Each device's copy runs on that device's worker, concurrently.
std::vector<Tensor> broadcast(const Tensor& tensor, const std::vector<Device>& devices);
/// out[i][j] is tensors[j] on devices[i] (one worker task per device copies all of its tensors).
std::vector<std::vector<Tensor>> broadcast_coalesced(const std::vector<Tensor>& tensors,
                                                     const std::vector<Device>& devices);
/// The sum of same-shaped tensors from several devices, on `destination`.
Tensor reduce_add(const std::vector<Tensor>& inputs, Device destination);
/// inputs[i][j]: tensor j from device i; returns the sums of each j on `destination`.
std::vector<Tensor> reduce_add_coalesced(const std::vector<std::vector<Tensor>>& inputs,
                                         Device destination);
/// Splits `tensor` along dim -- in torch.chunk sizes, or `chunk_sizes` -- and copies piece i to
/// devices[i]. With fewer rows than devices, fewer pieces come back.
std::vector<Tensor> scatter(const Tensor& tensor, const std::vector<Device>& devices,
                            const std::optional<Shape>& chunk_sizes = std::nullopt,
                            int64_t dim = 0);
/// Concatenates along dim on `destination`; all other dims must match.
Tensor gather(const std::vector<Tensor>& tensors, Device destination, int64_t dim = 0);

}  // namespace octo::parallel::comm
