// Float32Staging: how the CPU backend runs a float32 kernel on bfloat16 / float16 tensors.
//
// Note [16-bit on the CPU]: bfloat16 and float16 are storage types on the CPU. Elementwise ops
// and reductions compute them in float directly (compute_t in elementwise.cpp, reduce.cpp). The
// other primitives (GEMM, convolution, pooling, softmax, batch norm, cross-entropy) stage them:
// each 16-bit input is widened into a contiguous float32 copy, each 16-bit output gets a float32
// buffer, the float32 kernel runs, and finish() rounds the outputs back, once each. So a 16-bit
// GEMM or convolution accumulates in float32 and rounds once, like cuBLAS with
// CUBLAS_COMPUTE_32F. The copies cost memory traffic, not accuracy: this is the reference
// behaviour, and a CPU with native 16-bit matrix instructions (AVX512-BF16, AMX) can take a
// faster path in the kernel itself later.
//
//   void CpuBackend::softmax(const TensorArg& out, const TensorArg& in, int dim, bool log) {
//     if (cpu::any_half({&out, &in})) {
//       cpu::Float32Staging s;
//       softmax(s.output(out), s.input(in), dim, log);
//       return s.finish();
//     }
//     ...  // the float32 / float64 kernel
#pragma once

#include <initializer_list>
#include <utility>
#include <vector>

#include "core/allocator.h"
#include "kernels/backend.h"
#include "kernels/tensor_arg.h"

namespace octo::kernels::cpu {

/// Whether any defined argument is bfloat16 or float16.
inline bool any_half(std::initializer_list<const TensorArg*> args) {
  for (const TensorArg* a : args)
    if (a->defined() && is_half(a->dtype)) return true;
  return false;
}

class Float32Staging {
 public:
  Float32Staging() = default;
  Float32Staging(const Float32Staging&) = delete;
  Float32Staging& operator=(const Float32Staging&) = delete;

  /// `a` itself unless it is 16-bit; then a contiguous float32 copy of it.
  TensorArg input(const TensorArg& a) {
    if (!stages(a)) return a;
    TensorArg f = widened(a);
    backend(a.device).copy(f, a);
    return f;
  }
  /// `a` itself unless it is 16-bit; then a float32 buffer that finish() rounds back into `a`.
  /// `read`: the kernel reads the output too (bmm with beta != 0), so it starts with a's values.
  TensorArg output(const TensorArg& a, bool read = false) {
    if (!stages(a)) return a;
    TensorArg f = widened(a);
    if (read) backend(a.device).copy(f, a);
    outputs_.emplace_back(a, f);
    return f;
  }
  /// Rounds every staged output back into its 16-bit tensor.
  void finish() {
    for (const auto& [dst, src] : outputs_) backend(dst.device).copy(dst, src);
    outputs_.clear();
  }

 private:
  static bool stages(const TensorArg& a) { return a.defined() && is_half(a.dtype); }
  TensorArg widened(const TensorArg& a) {
    buffers_.push_back(cpu_allocator()->allocate(size_t(a.numel()) * sizeof(float)));
    TensorArg f = contiguous_like(a, buffers_.back().get());
    f.dtype = kFloat32;
    return f;
  }

  std::vector<DataPtr> buffers_;
  std::vector<std::pair<TensorArg, TensorArg>> outputs_;  // (16-bit tensor, float32 buffer)
};

}  // namespace octo::kernels::cpu
