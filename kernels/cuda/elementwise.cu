// CUDA elementwise kernels (unary, binary, where) over the shared functors of kernels/functors.h.
//
// Same dispatch as kernels/cpu/elementwise.cpp (visit_unary / visit_binary map the op to its
// functor), one grid-stride kernel per (dtype, op) over coalesced TensorArgs. bfloat16 and float16
// load, compute in float and round once, like the CPU (compute_t, Note [16-bit kernels]). To keep
// nvcc time low only float32, float64, bfloat16, float16, int64 and bool are instantiated; int32
// and uint8 throw NotImplementedError (where: any dtype, moved as raw words of the element's
// size).
#include <cuda_runtime_api.h>

#include <array>
#include <type_traits>

#include "core/error.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/loops.h"
#include "kernels/cuda/stream.h"
#include "kernels/elementwise_args.h"
#include "kernels/functors.h"

namespace octo::kernels {

namespace {

using cuda_loops::blocks_for;
using cuda_loops::kThreads;
using cuda_loops::offset;

/// T: the storage type, O: the output's (T, or bool), F a functor over compute_t<T>.
template <typename T, typename O, typename F>
__global__ void unary_kernel(TensorArg out, TensorArg in, int64_t n, F f) {
  using C = compute_t<T>;
  O* o = out.data_as<O>();
  const T* x = in.data_as<const T>();
  OCTO_CUDA_KERNEL_LOOP(i, n) {
    o[offset(out, i)] = static_cast<O>(f(static_cast<C>(x[offset(in, i)])));
  }
}

template <typename T, typename O, typename F>
__global__ void binary_kernel(TensorArg out, TensorArg a, TensorArg b, int64_t n, F f) {
  using C = compute_t<T>;
  O* o = out.data_as<O>();
  const T* x = a.data_as<const T>();
  const T* y = b.data_as<const T>();
  OCTO_CUDA_KERNEL_LOOP(i, n) {
    o[offset(out, i)] =
        static_cast<O>(f(static_cast<C>(x[offset(a, i)]), static_cast<C>(y[offset(b, i)])));
  }
}

template <typename W>
__global__ void where_kernel(TensorArg out, TensorArg cond, TensorArg a, TensorArg b, int64_t n) {
  W* o = out.data_as<W>();
  const bool* c = cond.data_as<const bool>();
  const W* x = a.data_as<const W>();
  const W* y = b.data_as<const W>();
  OCTO_CUDA_KERNEL_LOOP(i, n) {
    o[offset(out, i)] = c[offset(cond, i)] ? x[offset(a, i)] : y[offset(b, i)];
  }
}

/// The dtypes the CUDA elementwise kernels are built for (others: NotImplementedError).
using CudaElementwiseTypes = DTypes<kFloat32, kFloat64, kBFloat16, kFloat16, kInt64, kBool>;

}  // namespace

void CudaBackend::unary(UnaryOp op, const TensorArg& out, const TensorArg& in, Scalar alpha,
                        Scalar beta) {
  elementwise::check_same_shape(out, in);
  const int64_t n = out.numel();
  dispatch_dtypes<CudaElementwiseTypes>(
      in.dtype, op_name(op),
      [&](auto tag) {
        using T = decltype(tag);
        using C = compute_t<T>;
        bool ok = visit_unary<C>(op, alpha, beta, [&](auto f) {
          using O = out_t<T, decltype(f(C{}))>;
          OCTO_INTERNAL_ASSERT(out.dtype == dtype_of<O>);
          if (n == 0) return;
          std::array<TensorArg, 2> args{out, in};
          cuda_loops::coalesce(args);
          cuda::detail::CudaDeviceScope scope(out.device.index());
          auto stream = cuda::current_stream(out.device.index()).handle();
          unary_kernel<T, O><<<blocks_for(n), kThreads, 0, stream>>>(args[0], args[1], n, f);
          OCTO_CUDA_CHECK_LAUNCH("unary");
        });
        OCTO_CHECK_VALUE(ok, op_name(op), ": unsupported dtype ", in.dtype);
      },
      DTypeError::NotImplemented);
}

void CudaBackend::binary(BinaryOp op, const TensorArg& out, const TensorArg& a, const TensorArg& b,
                         Scalar alpha) {
  elementwise::check_binary_args(out, a, b);
  const int64_t n = out.numel();
  dispatch_dtypes<CudaElementwiseTypes>(
      a.dtype, op_name(op),
      [&](auto tag) {
        using T = decltype(tag);
        using C = compute_t<T>;
        bool ok = visit_binary<C>(op, alpha, [&](auto f) {
          using O = out_t<T, decltype(f(C{}, C{}))>;
          OCTO_INTERNAL_ASSERT(out.dtype == dtype_of<O>);
          if (n == 0) return;
          std::array<TensorArg, 3> args{out, a, b};
          cuda_loops::coalesce(args);
          cuda::detail::CudaDeviceScope scope(out.device.index());
          auto stream = cuda::current_stream(out.device.index()).handle();
          binary_kernel<T, O>
              <<<blocks_for(n), kThreads, 0, stream>>>(args[0], args[1], args[2], n, f);
          OCTO_CUDA_CHECK_LAUNCH("binary");
        });
        OCTO_CHECK_VALUE(ok, op_name(op), ": unsupported dtype ", a.dtype);
      },
      DTypeError::NotImplemented);
}

void CudaBackend::where(const TensorArg& out, const TensorArg& cond, const TensorArg& a,
                        const TensorArg& b) {
  elementwise::check_where_args(out, cond, a, b);
  const int64_t n = out.numel();
  if (n == 0) return;
  std::array<TensorArg, 4> args{out, cond, a, b};
  cuda_loops::coalesce(args);
  cuda::detail::CudaDeviceScope scope(out.device.index());
  auto stream = cuda::current_stream(out.device.index()).handle();
  const unsigned blocks = blocks_for(n);
  switch (itemsize(out.dtype)) {
    case 1:
      where_kernel<uint8_t><<<blocks, kThreads, 0, stream>>>(args[0], args[1], args[2], args[3], n);
      break;
    case 2:
      where_kernel<uint16_t>
          <<<blocks, kThreads, 0, stream>>>(args[0], args[1], args[2], args[3], n);
      break;
    case 4:
      where_kernel<uint32_t>
          <<<blocks, kThreads, 0, stream>>>(args[0], args[1], args[2], args[3], n);
      break;
    default:
      where_kernel<uint64_t>
          <<<blocks, kThreads, 0, stream>>>(args[0], args[1], args[2], args[3], n);
      break;
  }
  OCTO_CUDA_CHECK_LAUNCH("where");
}

}  // namespace octo::kernels
