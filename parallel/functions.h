// The parallel layer's autograd functions: Broadcast, Scatter and Gather, each with its backward.
#pragma once

#include <optional>
#include <vector>

#include "tensor/tensor.h"

namespace octo::parallel {

/// Copies `tensors` (all on devices[0]) to every device; out[i][j] is tensor j on devices[i].
/// Backward reduce-adds every device's gradient of tensor j into devices[0] (the gradient of
/// the whole batch: the sum of the replicas' gradients). devices[0]'s output aliases the input.
struct Broadcast {
  static std::vector<std::vector<Tensor>> apply(const std::vector<Tensor>& tensors,
                                                const std::vector<Device>& devices);
  /// The same, writing into existing tensors (DataParallel's cached replicas): dst[i][j] gets
  /// the data of tensors[j] on devices[i] and becomes an output of one Broadcast node.
  static void apply_into(const std::vector<Tensor>& tensors, const std::vector<Device>& devices,
                         const std::vector<std::vector<Tensor>>& dst);
};

/// Splits x along dim (torch.chunk sizes or chunk_sizes) and sends piece i to devices[i].
/// Backward gathers the pieces' gradients back on x's device.
struct Scatter {
  static std::vector<Tensor> apply(const Tensor& x, const std::vector<Device>& devices,
                                   const std::optional<Shape>& chunk_sizes = std::nullopt,
                                   int64_t dim = 0);
};

/// Concatenates pieces from several devices on `destination`. Backward splits the gradient and
/// sends each piece back to the device it came from.
struct Gather {
  static Tensor apply(const std::vector<Tensor>& pieces, Device destination, int64_t dim = 0);
};

}  // namespace octo::parallel
