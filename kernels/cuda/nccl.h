// NCCL broadcast and reduce over a group of CUDA devices in one process (what torch.cuda.nccl
// does).
#pragma once

#include <vector>

#include "kernels/tensor_arg.h"

namespace octo::cuda::nccl {

// Every function takes one buffer per device of the group: buffers[i] is rank i and lives on the
// i-th device, the devices are distinct CUDA devices, and every buffer is contiguous with the
// same dtype and number of elements. Each buffer's `data` must be the start of an allocation of
// its device's caching allocator (a fresh contiguous tensor, as comm's packed buffers are): it is
// record_stream()ed on the NCCL stream so that it is not reused before the collective finishes.
//
// The collectives run on a dedicated NCCL stream per device, after all work queued so far on the
// calling thread's current stream of that device, and that current stream waits for them; the
// host never blocks. Supported dtypes: every octo dtype (float32, float64, int64, int32, uint8,
// bool as uint8, bfloat16, float16).

/// True when octo was built with NCCL and at least one CUDA device is visible.
bool is_available();
/// The NCCL library's version code (e.g. 22809 for 2.28.9).
int version();
/// Copies buffers[root] into every other buffer.
///   cuda::nccl::broadcast({a.arg(), b.arg()}, 0);  // a on cuda:0, b on cuda:1: b = a
void broadcast(const std::vector<kernels::TensorArg>& buffers, int root);
/// output = the elementwise sum of all inputs (logical or for bool); output lives on
/// inputs[root]'s device and may be inputs[root] itself. The inputs are not changed (except
/// inputs[root] when it is the output).
void reduce(const std::vector<kernels::TensorArg>& inputs, int root,
            const kernels::TensorArg& output);

}  // namespace octo::cuda::nccl
