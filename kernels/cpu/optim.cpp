// Fused optimizer updates on the CPU: one parallel pass per parameter over kernels/optim_math.h.
//
// Host code is built without multiply-add contraction (Note [No FMA contraction], meson.build), so
// the per-element math rounds every product as the tensor-op implementation and the CUDA backend
// do; see Note [Fused optimizer arithmetic] in kernels/optim_math.h.
#include <array>
#include <cstdint>

#include "core/error.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/loops.h"
#include "kernels/optim_math.h"

namespace octo::kernels {

namespace {

using optim_math::opmath_t;

/// Calls f(q, i) for every element of N same-shaped tensors of storage type T, where q[k][i] is
/// tensor k's element. Contiguous runs index their base pointers; strided runs get per-element
/// pointers and i = 0.
template <typename T, size_t N, typename F>
void for_each_element(const std::array<TensorArg, N>& args, F f) {
  cpu::strided_runs<N>(args, [&f](std::array<char*, N> p, std::array<int64_t, N> s, int64_t n) {
    std::array<T*, N> q;
    bool contiguous = true;
    for (size_t k = 0; k < N; ++k) {
      q[k] = reinterpret_cast<T*>(p[k]);
      contiguous = contiguous && s[k] == static_cast<int64_t>(sizeof(T));
    }
    if (contiguous) {
      for (int64_t i = 0; i < n; ++i) f(q, i);
    } else {
      for (int64_t i = 0; i < n; ++i) {
        for (size_t k = 0; k < N; ++k) q[k] = reinterpret_cast<T*>(p[k] + i * s[k]);
        f(q, 0);
      }
    }
  });
}

}  // namespace

void CpuBackend::sgd_update(const TensorArg& param, const TensorArg& grad,
                            const TensorArg& momentum_buf, const SgdParams& p) {
  optim_math::check_operand(param, grad);
  if (p.momentum != 0.0) optim_math::check_operand(param, momentum_buf);
  dispatch_dtypes<FloatingTypes>(param.dtype, "sgd_update", [&](auto tag) {
    using T = decltype(tag);
    using C = opmath_t<T>;
    const auto f = optim_math::sgd_factors<C>(p);
    if (f.use_momentum) {
      for_each_element<T, 3>({param, grad, momentum_buf}, [&f](std::array<T*, 3>& q, int64_t i) {
        C w = static_cast<C>(q[0][i]);
        C buf = static_cast<C>(q[2][i]);
        optim_math::sgd_element(w, static_cast<C>(q[1][i]), buf, f);
        q[0][i] = static_cast<T>(w);
        q[2][i] = static_cast<T>(buf);
      });
    } else {
      for_each_element<T, 2>({param, grad}, [&f](std::array<T*, 2>& q, int64_t i) {
        C w = static_cast<C>(q[0][i]);
        C unused = C(0);
        optim_math::sgd_element(w, static_cast<C>(q[1][i]), unused, f);
        q[0][i] = static_cast<T>(w);
      });
    }
  });
}

void CpuBackend::adam_update(const TensorArg& param, const TensorArg& grad,
                             const TensorArg& exp_avg, const TensorArg& exp_avg_sq,
                             const TensorArg& max_exp_avg_sq, const AdamParams& p) {
  optim_math::check_adam_args(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, p);
  dispatch_dtypes<FloatingTypes>(param.dtype, "adam_update", [&](auto tag) {
    using T = decltype(tag);
    using C = opmath_t<T>;
    const auto f = optim_math::adam_factors<C>(p);
    if (f.amsgrad) {
      for_each_element<T, 5>({param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq},
                             [&f](std::array<T*, 5>& q, int64_t i) {
                               C w = static_cast<C>(q[0][i]);
                               C m = static_cast<C>(q[2][i]);
                               C v = static_cast<C>(q[3][i]);
                               C v_max = static_cast<C>(q[4][i]);
                               optim_math::adam_element(w, static_cast<C>(q[1][i]), m, v, v_max, f);
                               q[0][i] = static_cast<T>(w);
                               q[2][i] = static_cast<T>(m);
                               q[3][i] = static_cast<T>(v);
                               q[4][i] = static_cast<T>(v_max);
                             });
    } else {
      for_each_element<T, 4>(
          {param, grad, exp_avg, exp_avg_sq}, [&f](std::array<T*, 4>& q, int64_t i) {
            C w = static_cast<C>(q[0][i]);
            C m = static_cast<C>(q[2][i]);
            C v = static_cast<C>(q[3][i]);
            C unused = C(0);
            optim_math::adam_element(w, static_cast<C>(q[1][i]), m, v, unused, f);
            q[0][i] = static_cast<T>(w);
            q[2][i] = static_cast<T>(m);
            q[3][i] = static_cast<T>(v);
          });
    }
  });
}

}  // namespace octo::kernels
