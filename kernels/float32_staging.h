// Float32Staging: how a backend runs its float32 kernel on bfloat16 / float16 tensors.
//
// Note [16-bit kernels]: bfloat16 and float16 are storage types. Elementwise ops and reductions
// compute them in float directly, on both backends (compute_t in kernels/functors.h; the reduce
// kernels accumulate in double). GEMM runs them natively where the hardware has a 16-bit path
// (cuBLAS with CUBLAS_COMPUTE_32F; on the CPU oneDNN's bfloat16 matmul and convolution, Notes
// [oneDNN bf16 matmul] and [oneDNN convolution]), and so does cuDNN's convolution (float32
// compute type, tensor cores). A few CPU kernels are native because their float32 arithmetic
// is easy to reproduce exactly: 2x2 max pooling (a max never rounds, Note [16-bit max pooling])
// and batch norm of a 16-bit input beside float32 parameters (Note [16-bit batch norm]). The
// other primitives (the other pooling, softmax, cross-entropy, batch norm on CUDA, and on the
// CPU float16 GEMM and convolution) stage them: each 16-bit input is widened into a contiguous
// float32 copy on its own device, each 16-bit output gets a float32 buffer, the float32 kernel
// runs, and finish() rounds the outputs back, once each. So a staged 16-bit kernel accumulates
// in float32 and rounds once, like cuBLAS with CUBLAS_COMPUTE_32F, and a CUDA kernel gives what
// the CPU kernel gives up to float32 summation order. The copies cost memory traffic, not accuracy.
//
//   void CpuBackend::softmax(const TensorArg& out, const TensorArg& in, int dim, bool log) {
//     if (staged_softmax(*this, out, in, dim, log)) return;  // re-enters with float32 copies
//     ...  // the float32 / float64 kernel
//
// On CUDA the copies and the kernel are queued on the current stream in order, and the scratch
// buffers go back to the caching allocator when the Float32Staging dies, which is safe for
// work on that same stream (docs/internals/cuda.md).
#pragma once

#include <initializer_list>
#include <utility>
#include <vector>

#include "core/allocator.h"
#include "kernels/backend.h"
#include "kernels/tensor_arg.h"

namespace octo::kernels {

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
    buffers_.push_back(allocator_for(a.device)->allocate(size_t(a.numel()) * sizeof(float)));
    TensorArg f = contiguous_like(a, buffers_.back().get());
    f.dtype = kFloat32;
    return f;
  }

  std::vector<DataPtr> buffers_;
  std::vector<std::pair<TensorArg, TensorArg>> outputs_;  // (16-bit tensor, float32 buffer)
};

/// When any of `args` is 16-bit: runs kernel(staging), which calls the primitive again with each
/// argument passed through staging.input() or .output(), rounds the outputs back and returns
/// true. Otherwise returns false and runs nothing (Note [16-bit kernels]).
template <typename F>
bool staged_in_float32(std::initializer_list<const TensorArg*> args, F&& kernel) {
  if (!any_half(args)) return false;
  Float32Staging s;
  kernel(s);
  s.finish();
  return true;
}

// --- the staged primitives ---------------------------------------------------------------------
// staged_X(b, args...) is Backend::X of `b` on float32 copies when any floating argument is
// 16-bit, returning true; otherwise it runs nothing and returns false. A backend whose X has no
// 16-bit kernel begins X with
//
//   if (staged_softmax(*this, out, in, dim, log)) return;  // Note [16-bit kernels]
//
// so the staging of every backend is written once, here.

inline bool staged_softmax(Backend& b, const TensorArg& out, const TensorArg& in, int dim,
                           bool log) {
  return staged_in_float32(
      {&out, &in}, [&](Float32Staging& s) { b.softmax(s.output(out), s.input(in), dim, log); });
}

inline bool staged_softmax_backward(Backend& b, const TensorArg& grad_in, const TensorArg& grad_out,
                                    const TensorArg& out, int dim, bool log) {
  return staged_in_float32({&grad_in, &grad_out, &out}, [&](Float32Staging& s) {
    b.softmax_backward(s.output(grad_in), s.input(grad_out), s.input(out), dim, log);
  });
}

inline bool staged_max_pool2d_forward(Backend& b, const TensorArg& out, const TensorArg& indices,
                                      const TensorArg& input, const Pool2dParams& p) {
  return staged_in_float32({&out, &input}, [&](Float32Staging& s) {
    b.max_pool2d_forward(s.output(out), indices, s.input(input), p);
  });
}

inline bool staged_max_pool2d_backward(Backend& b, const TensorArg& grad_input,
                                       const TensorArg& grad_out, const TensorArg& indices,
                                       const Pool2dParams& p) {
  return staged_in_float32({&grad_input, &grad_out}, [&](Float32Staging& s) {
    b.max_pool2d_backward(s.output(grad_input), s.input(grad_out), indices, p);
  });
}

inline bool staged_avg_pool2d_forward(Backend& b, const TensorArg& out, const TensorArg& input,
                                      const Pool2dParams& p) {
  return staged_in_float32({&out, &input}, [&](Float32Staging& s) {
    b.avg_pool2d_forward(s.output(out), s.input(input), p);
  });
}

inline bool staged_avg_pool2d_backward(Backend& b, const TensorArg& grad_input,
                                       const TensorArg& grad_out, const Pool2dParams& p) {
  return staged_in_float32({&grad_input, &grad_out}, [&](Float32Staging& s) {
    b.avg_pool2d_backward(s.output(grad_input), s.input(grad_out), p);
  });
}

inline bool staged_cross_entropy_forward(Backend& b, const TensorArg& loss, const TensorArg& lse,
                                         const TensorArg& logits, const TensorArg& target,
                                         const TensorArg& weight, const CrossEntropyParams& p) {
  return staged_in_float32({&loss, &lse, &logits, &weight}, [&](Float32Staging& s) {
    b.cross_entropy_forward(s.output(loss), s.output(lse), s.input(logits), target, s.input(weight),
                            p);
  });
}

inline bool staged_cross_entropy_backward(Backend& b, const TensorArg& grad_logits,
                                          const TensorArg& grad_loss, const TensorArg& logits,
                                          const TensorArg& lse, const TensorArg& target,
                                          const TensorArg& weight, const CrossEntropyParams& p) {
  return staged_in_float32(
      {&grad_logits, &grad_loss, &logits, &lse, &weight}, [&](Float32Staging& s) {
        b.cross_entropy_backward(s.output(grad_logits), s.input(grad_loss), s.input(logits),
                                 s.input(lse), target, s.input(weight), p);
      });
}

/// The running statistics are read and written.
inline bool staged_batch_norm_forward(Backend& b, const TensorArg& out, const TensorArg& save_mean,
                                      const TensorArg& save_invstd, const TensorArg& input,
                                      const TensorArg& weight, const TensorArg& bias,
                                      const TensorArg& running_mean, const TensorArg& running_var,
                                      bool training, double momentum, double eps) {
  return staged_in_float32(
      {&out, &save_mean, &save_invstd, &input, &weight, &bias, &running_mean, &running_var},
      [&](Float32Staging& s) {
        b.batch_norm_forward(s.output(out), s.output(save_mean), s.output(save_invstd),
                             s.input(input), s.input(weight), s.input(bias),
                             s.output(running_mean, true), s.output(running_var, true), training,
                             momentum, eps);
      });
}

inline bool staged_batch_norm_backward(Backend& b, const TensorArg& grad_input,
                                       const TensorArg& grad_weight, const TensorArg& grad_bias,
                                       const TensorArg& grad_out, const TensorArg& input,
                                       const TensorArg& weight, const TensorArg& save_mean,
                                       const TensorArg& save_invstd) {
  return staged_in_float32(
      {&grad_input, &grad_weight, &grad_bias, &grad_out, &input, &weight, &save_mean, &save_invstd},
      [&](Float32Staging& s) {
        b.batch_norm_backward(s.output(grad_input), s.output(grad_weight), s.output(grad_bias),
                              s.input(grad_out), s.input(input), s.input(weight),
                              s.input(save_mean), s.input(save_invstd));
      });
}

}  // namespace octo::kernels
