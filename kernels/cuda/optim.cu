// Fused optimizer updates on the GPU: one grid-stride kernel per (dtype, optimizer) over
// kernels/optim_math.h, the per-element math the CPU backend runs too.
//
// The host computes the hyper-parameter factors once per call (optim_math::sgd_factors /
// adam_factors) and passes them by value; device code is built with -fmad=false, so for float32
// and float64 each parameter ends bit for bit where the CPU backend puts it (Note [Fused optimizer
// arithmetic]). Optional state tensors (the momentum buffer without momentum, max_exp_avg_sq
// without amsgrad) reach the kernel with a null data pointer and are neither read nor written.
#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>

#include "core/error.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/loops.h"
#include "kernels/cuda/stream.h"
#include "kernels/optim_math.h"

namespace octo::kernels {

namespace {

using cuda_loops::blocks_for;
using cuda_loops::kThreads;
using cuda_loops::offset;
using optim_math::opmath_t;

template <typename T>
__global__ void sgd_kernel(TensorArg param, TensorArg grad, TensorArg buf, int64_t n,
                           optim_math::SgdFactors<opmath_t<T>> f) {
  using C = opmath_t<T>;
  T* p = param.data_as<T>();
  const T* g = grad.data_as<const T>();
  T* b = buf.data_as<T>();  // null without momentum
  OCTO_CUDA_KERNEL_LOOP(i, n) {
    const int64_t ip = offset(param, i);
    C w = static_cast<C>(p[ip]);
    C m = C(0);
    int64_t ib = 0;
    if (b != nullptr) {
      ib = offset(buf, i);
      m = static_cast<C>(b[ib]);
    }
    optim_math::sgd_element(w, static_cast<C>(g[offset(grad, i)]), m, f);
    p[ip] = static_cast<T>(w);
    if (b != nullptr) b[ib] = static_cast<T>(m);
  }
}

template <typename T>
__global__ void adam_kernel(TensorArg param, TensorArg grad, TensorArg exp_avg,
                            TensorArg exp_avg_sq, TensorArg max_exp_avg_sq, int64_t n,
                            optim_math::AdamFactors<opmath_t<T>> f) {
  using C = opmath_t<T>;
  T* p = param.data_as<T>();
  const T* g = grad.data_as<const T>();
  T* m = exp_avg.data_as<T>();
  T* v = exp_avg_sq.data_as<T>();
  T* v_max = max_exp_avg_sq.data_as<T>();  // null without amsgrad
  OCTO_CUDA_KERNEL_LOOP(i, n) {
    const int64_t ip = offset(param, i), im = offset(exp_avg, i), iv = offset(exp_avg_sq, i);
    C w = static_cast<C>(p[ip]);
    C mv = static_cast<C>(m[im]);
    C vv = static_cast<C>(v[iv]);
    C vmax = C(0);
    int64_t ix = 0;
    if (v_max != nullptr) {
      ix = offset(max_exp_avg_sq, i);
      vmax = static_cast<C>(v_max[ix]);
    }
    optim_math::adam_element(w, static_cast<C>(g[offset(grad, i)]), mv, vv, vmax, f);
    p[ip] = static_cast<T>(w);
    m[im] = static_cast<T>(mv);
    v[iv] = static_cast<T>(vv);
    if (v_max != nullptr) v_max[ix] = static_cast<T>(vmax);
  }
}

/// Coalesces the args (all of param's shape) for the kernel. An optional arg that is not used
/// joins the coalescing as a stand-in copy of param and then loses its data pointer.
template <size_t N>
std::array<TensorArg, N> prepare(std::array<TensorArg, N> args, const std::array<bool, N>& used) {
  for (size_t k = 0; k < N; ++k)
    if (!used[k]) args[k] = args[0];
  cuda_loops::coalesce(args);
  for (size_t k = 0; k < N; ++k)
    if (!used[k]) args[k].data = nullptr;
  return args;
}

}  // namespace

void CudaBackend::sgd_update(const TensorArg& param, const TensorArg& grad,
                             const TensorArg& momentum_buf, const SgdParams& p) {
  optim_math::check_operand(param, grad);
  const bool use_momentum = p.momentum != 0.0;
  if (use_momentum) optim_math::check_operand(param, momentum_buf);
  const int64_t n = param.numel();
  dispatch_dtypes<FloatingTypes>(param.dtype, "sgd_update", [&](auto tag) {
    using T = decltype(tag);
    const auto f = optim_math::sgd_factors<opmath_t<T>>(p);
    if (n == 0) return;
    auto args = prepare<3>({param, grad, momentum_buf}, {true, true, use_momentum});
    cuda::detail::CudaDeviceScope scope(param.device.index());
    auto stream = cuda::current_stream(param.device.index()).handle();
    sgd_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(args[0], args[1], args[2], n, f);
    OCTO_CUDA_CHECK_LAUNCH("sgd_update");
  });
}

void CudaBackend::adam_update(const TensorArg& param, const TensorArg& grad,
                              const TensorArg& exp_avg, const TensorArg& exp_avg_sq,
                              const TensorArg& max_exp_avg_sq, const AdamParams& p) {
  optim_math::check_adam_args(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, p);
  const int64_t n = param.numel();
  dispatch_dtypes<FloatingTypes>(param.dtype, "adam_update", [&](auto tag) {
    using T = decltype(tag);
    const auto f = optim_math::adam_factors<opmath_t<T>>(p);
    if (n == 0) return;
    auto args = prepare<5>({param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq},
                           {true, true, true, true, p.amsgrad});
    cuda::detail::CudaDeviceScope scope(param.device.index());
    auto stream = cuda::current_stream(param.device.index()).handle();
    adam_kernel<T>
        <<<blocks_for(n), kThreads, 0, stream>>>(args[0], args[1], args[2], args[3], args[4], n, f);
    OCTO_CUDA_CHECK_LAUNCH("adam_update");
  });
}

}  // namespace octo::kernels
