// CUDA reductions (sum, mean, prod, max, min, argmax, argmin, var) over any set of dims.
//
// One thread block per output element (grid-stride over outputs): each thread folds a strided
// share of the reduced elements, then a shared-memory tree merges the 256 partials. Accumulation
// is in double for floating inputs and int64 for integers (as the CPU backend); var uses Welford
// per thread and Chan's merge. Results are deterministic (fixed order for a given launch) but, for
// floating sums, not bit-identical to the CPU's block order. Inputs: float32, float64, bfloat16,
// float16 (widened to double as they are read, Note [16-bit kernels]), int64, bool (others throw
// NotImplementedError); the output may have any dtype the CPU backend writes.
#include <cuda_runtime_api.h>

#include <cmath>
#include <limits>
#include <type_traits>

#include "core/error.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/stream.h"
#include "kernels/functors.h"

namespace octo::kernels {

namespace {

constexpr int kReduceThreads = 256;
constexpr int64_t kMaxReduceBlocks = 65536;

const char* reduce_name(ReduceOp op) {
  constexpr const char* kNames[] = {"sum", "mean", "prod", "max", "min", "argmax", "argmin", "var"};
  return kNames[static_cast<int>(op)];
}

template <typename A>
__device__ inline bool nan_of(A v) {
  if constexpr (std::is_floating_point_v<A>) {
    return v != v;
  } else {
    return false;
  }
}

template <typename A>
struct State {
  A v;
  int64_t idx;
  bool nan;
  double n, mean, m2;
};

template <typename A, ReduceOp kOp>
__device__ inline State<A> start() {
  State<A> s;
  s.idx = -1;
  s.nan = false;
  s.n = s.mean = s.m2 = 0.0;
  if constexpr (kOp == ReduceOp::Prod) {
    s.v = A(1);
  } else if constexpr (kOp == ReduceOp::Max) {
    s.v = std::is_floating_point_v<A> ? -std::numeric_limits<A>::infinity()
                                      : std::numeric_limits<A>::lowest();
  } else if constexpr (kOp == ReduceOp::Min) {
    s.v = std::is_floating_point_v<A> ? std::numeric_limits<A>::infinity()
                                      : std::numeric_limits<A>::max();
  } else {
    s.v = A(0);
  }
  return s;
}

/// Is candidate (bv, bi) a better arg-extreme than (av, ai)? NaN beats numbers; ties: lower index.
template <typename A, bool kMax>
__device__ inline bool better(A av, int64_t ai, A bv, int64_t bi) {
  if (bi < 0) return false;
  if (ai < 0) return true;
  const bool an = nan_of(av), bn = nan_of(bv);
  if (an || bn) return an && bn ? bi < ai : bn;
  if (bv == av) return bi < ai;
  return kMax ? bv > av : bv < av;
}

template <typename A, ReduceOp kOp>
__device__ inline void push(State<A>& s, A x, int64_t j) {
  if constexpr (kOp == ReduceOp::Sum || kOp == ReduceOp::Mean) {  // integers wrap, as on the CPU
    s.v = fn::wrap_add(s.v, x);
  } else if constexpr (kOp == ReduceOp::Prod) {
    s.v = fn::wrap_mul(s.v, x);
  } else if constexpr (kOp == ReduceOp::Max || kOp == ReduceOp::Min) {
    if (nan_of(x))
      s.nan = true;
    else if (kOp == ReduceOp::Max ? x > s.v : x < s.v)
      s.v = x;
  } else if constexpr (kOp == ReduceOp::ArgMax || kOp == ReduceOp::ArgMin) {
    if (better<A, kOp == ReduceOp::ArgMax>(s.v, s.idx, x, j)) {
      s.v = x;
      s.idx = j;
    }
  } else {  // Var: Welford
    const double d = static_cast<double>(x);
    s.n += 1.0;
    const double delta = d - s.mean;
    s.mean += delta / s.n;
    s.m2 += delta * (d - s.mean);
  }
}

template <typename A, ReduceOp kOp>
__device__ inline void merge(State<A>& s, const State<A>& o) {
  if constexpr (kOp == ReduceOp::Sum || kOp == ReduceOp::Mean) {
    s.v = fn::wrap_add(s.v, o.v);
  } else if constexpr (kOp == ReduceOp::Prod) {
    s.v = fn::wrap_mul(s.v, o.v);
  } else if constexpr (kOp == ReduceOp::Max || kOp == ReduceOp::Min) {
    s.nan = s.nan || o.nan;
    if (kOp == ReduceOp::Max ? o.v > s.v : o.v < s.v) s.v = o.v;
  } else if constexpr (kOp == ReduceOp::ArgMax || kOp == ReduceOp::ArgMin) {
    if (better<A, kOp == ReduceOp::ArgMax>(s.v, s.idx, o.v, o.idx)) {
      s.v = o.v;
      s.idx = o.idx;
    }
  } else {  // Var: Chan et al.
    if (o.n == 0.0) return;
    if (s.n == 0.0) {
      s.n = o.n;
      s.mean = o.mean;
      s.m2 = o.m2;
      return;
    }
    const double n = s.n + o.n, delta = o.mean - s.mean;
    s.m2 += o.m2 + delta * delta * s.n * o.n / n;
    s.mean += delta * o.n / n;
    s.n = n;
  }
}

/// Writes v into out's element at off, converting to out's dtype.
template <typename V>
__device__ inline void store(const TensorArg& out, int64_t off, V v) {
  switch (out.dtype) {
    case kFloat32:
      out.data_as<float>()[off] = static_cast<float>(v);
      break;
    case kFloat64:
      out.data_as<double>()[off] = static_cast<double>(v);
      break;
    case kInt64:
      out.data_as<int64_t>()[off] = static_cast<int64_t>(v);
      break;
    case kInt32:
      out.data_as<int32_t>()[off] = static_cast<int32_t>(v);
      break;
    case kUInt8:
      out.data_as<uint8_t>()[off] = static_cast<uint8_t>(v);
      break;
    case kBool:
      out.data_as<bool>()[off] = v != V(0);
      break;
    case kBFloat16:
      out.data_as<BFloat16>()[off] = BFloat16(static_cast<float>(v));
      break;
    case kFloat16:
      out.data_as<Float16>()[off] = Float16(static_cast<float>(v));
      break;
    default:
      break;
  }
}

/// kept: in's strides over out's sizes (reduced dims size 1); red: in's strides over the reduced
/// dims (kept dims size 1). Output o reads in[kept.offset_of(o) + red.offset_of(j)].
template <typename T, ReduceOp kOp>
__global__ void reduce_kernel(TensorArg out, TensorArg kept, TensorArg red, int64_t out_n,
                              int64_t red_n, double correction) {
  using A = std::conditional_t<std::is_integral_v<T>, int64_t, double>;
  __shared__ State<A> sh[kReduceThreads];
  const T* in = kept.data_as<const T>();
  for (int64_t o = blockIdx.x; o < out_n; o += gridDim.x) {
    const int64_t base = kept.offset_of(o);
    State<A> s = start<A, kOp>();
    for (int64_t j = threadIdx.x; j < red_n; j += blockDim.x)
      push<A, kOp>(s, static_cast<A>(compute_t<T>(in[base + red.offset_of(j)])), j);
    sh[threadIdx.x] = s;
    __syncthreads();
    for (int w = kReduceThreads / 2; w > 0; w >>= 1) {
      if (threadIdx.x < w) merge<A, kOp>(sh[threadIdx.x], sh[threadIdx.x + w]);
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      const State<A> r = sh[0];
      const int64_t off = out.offset_of(o);
      if constexpr (kOp == ReduceOp::Sum || kOp == ReduceOp::Prod) {
        store(out, off, r.v);
      } else if constexpr (kOp == ReduceOp::Mean) {
        store(out, off, static_cast<double>(r.v) / static_cast<double>(red_n));
      } else if constexpr (kOp == ReduceOp::Max || kOp == ReduceOp::Min) {
        if (r.nan) {
          store(out, off, std::numeric_limits<double>::quiet_NaN());
        } else {
          store(out, off, r.v);  // int64 stays exact
        }
      } else if constexpr (kOp == ReduceOp::ArgMax || kOp == ReduceOp::ArgMin) {
        out.data_as<int64_t>()[off] = r.idx;
      } else {
        const double divisor = fmax(0.0, r.n - correction);
        store(out, off, r.n == 0.0 ? std::numeric_limits<double>::quiet_NaN() : r.m2 / divisor);
      }
    }
    __syncthreads();  // sh is reused by the next output
  }
}

template <typename T, ReduceOp kOp>
void launch(const TensorArg& out, const TensorArg& kept, const TensorArg& red, int64_t out_n,
            int64_t red_n, double correction, cudaStream_t stream) {
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(out_n, kMaxReduceBlocks));
  reduce_kernel<T, kOp>
      <<<blocks, kReduceThreads, 0, stream>>>(out, kept, red, out_n, red_n, correction);
}

template <typename T>
void launch_op(ReduceOp op, const TensorArg& out, const TensorArg& kept, const TensorArg& red,
               int64_t out_n, int64_t red_n, double c, cudaStream_t s) {
  switch (op) {
    case ReduceOp::Sum:
      return launch<T, ReduceOp::Sum>(out, kept, red, out_n, red_n, c, s);
    case ReduceOp::Mean:
      return launch<T, ReduceOp::Mean>(out, kept, red, out_n, red_n, c, s);
    case ReduceOp::Prod:
      return launch<T, ReduceOp::Prod>(out, kept, red, out_n, red_n, c, s);
    case ReduceOp::Max:
      return launch<T, ReduceOp::Max>(out, kept, red, out_n, red_n, c, s);
    case ReduceOp::Min:
      return launch<T, ReduceOp::Min>(out, kept, red, out_n, red_n, c, s);
    case ReduceOp::ArgMax:
      return launch<T, ReduceOp::ArgMax>(out, kept, red, out_n, red_n, c, s);
    case ReduceOp::ArgMin:
      return launch<T, ReduceOp::ArgMin>(out, kept, red, out_n, red_n, c, s);
    case ReduceOp::Var:
      return launch<T, ReduceOp::Var>(out, kept, red, out_n, red_n, c, s);
  }
}

}  // namespace

void CudaBackend::reduce(ReduceOp op, const TensorArg& out, const TensorArg& in, Scalar alpha) {
  OCTO_INTERNAL_ASSERT(out.ndim == in.ndim, "reduce: out and in must have the same ndim");
  const bool is_arg = op == ReduceOp::ArgMax || op == ReduceOp::ArgMin;
  TensorArg kept = in, red = in;
  int64_t out_n = 1, red_n = 1;
  for (int d = 0; d < in.ndim; ++d) {
    if (out.sizes[d] == in.sizes[d]) {
      kept.sizes[d] = in.sizes[d];
      red.sizes[d] = 1;
      out_n *= in.sizes[d];
    } else {
      OCTO_INTERNAL_ASSERT(out.sizes[d] == 1, "reduce: out dim ", d, " must be 1 or in's size");
      kept.sizes[d] = 1;
      red.sizes[d] = in.sizes[d];
      red_n *= in.sizes[d];
    }
  }
  if (out_n == 0) return;
  if (red_n == 0) {
    OCTO_CHECK_INDEX(op != ReduceOp::Max && op != ReduceOp::Min && !is_arg, reduce_name(op),
                     "(): cannot reduce over an empty dimension: the operation has no identity");
  }
  if (is_arg) OCTO_INTERNAL_ASSERT(out.dtype == kInt64, "argmax/argmin write int64");
  const double correction = op == ReduceOp::Var ? alpha.to_double() : 0.0;
  cuda::detail::CudaDeviceScope scope(out.device.index());
  cudaStream_t s = cuda::current_stream(out.device.index()).handle();
  switch (in.dtype) {
    case kFloat32:
      launch_op<float>(op, out, kept, red, out_n, red_n, correction, s);
      break;
    case kFloat64:
      launch_op<double>(op, out, kept, red, out_n, red_n, correction, s);
      break;
    case kInt64:
      launch_op<int64_t>(op, out, kept, red, out_n, red_n, correction, s);
      break;
    case kBool:
      launch_op<bool>(op, out, kept, red, out_n, red_n, correction, s);
      break;
    case kBFloat16:
      launch_op<BFloat16>(op, out, kept, red, out_n, red_n, correction, s);
      break;
    case kFloat16:
      launch_op<Float16>(op, out, kept, red, out_n, red_n, correction, s);
      break;
    default:
      OCTO_THROW(NotImplementedError, "cuda backend: ", reduce_name(op),
                 " is not implemented for dtype ", in.dtype,
                 " yet (float32, float64, bfloat16, float16, int64, bool are)");
  }
  OCTO_CUDA_CHECK_LAUNCH("reduce");
}

}  // namespace octo::kernels
