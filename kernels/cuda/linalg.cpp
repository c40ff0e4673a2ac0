// CUDA bmm over cuBLAS: float32 (exact, or TF32 when allowed), float64, bfloat16 and float16.
//
// cuBLAS is column-major; a row-major [M, N] matrix with leading dimension ld is the column-major
// [N, M] matrix with the same ld, so out = a @ b is computed as out^T = b^T @ a^T. An operand whose
// innermost two dims are row-major (stride 1 along columns) goes in as CUBLAS_OP_N, one that is
// column-major (a transpose view) as CUBLAS_OP_T; anything else is first copied to a contiguous
// buffer, as is an output that is not row-major (the result is then copied into it). Batch
// strides are passed through, so a broadcast batch (stride 0) costs nothing.
//
// Note [GEMM precision]: which cuBLAS call each dtype takes.
//  - float64: cublasDgemmStridedBatched.
//  - float32: cublasSgemmStridedBatched on a CUBLAS_DEFAULT_MATH handle, i.e. true float32, unless
//    octo::cuda::allow_tf32() is on; then cublasGemmStridedBatchedEx with
//    CUBLAS_COMPUTE_32F_FAST_TF32, which lets cuBLAS round the inputs to TF32 (10-bit mantissa)
//    and use tensor cores on Ampere and later (about 1e-3 relative error, several times faster).
//    The switch is read on every call, so flipping it takes effect at the next product.
//  - bfloat16 / float16: cublasGemmStridedBatchedEx with CUDA_R_16BF / CUDA_R_16F operands and
//    output, CUBLAS_COMPUTE_32F and float alpha/beta: products and sums in float32, one rounding
//    to the 16-bit type at the end. The handle sets
//    CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION so that split-K partial sums are also kept in
//    float32 rather than the output type. With beta != 0 cuBLAS need not keep to one rounding:
//    for linear's bias (beta 1, transposed weight) it rounded twice on an H200 with CUDA 13.0,
//    up to 0.89 of the output's ulp (tests/gpu/test_gemm.cpp, docs/internals/cuda.md).
//
// Handles: one cublasHandle_t per (thread, device), created lazily, never destroyed, set to the
// current stream before each call.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <climits>
#include <unordered_map>

#include "core/allocator.h"
#include "core/device_hooks.h"
#include "core/error.h"
#include "kernels/cuda/caching_allocator.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/stream.h"

namespace octo::kernels {

namespace {

/// This thread's handle for `device` (the runtime's current device is `device`).
cublasHandle_t cublas_handle(int device) {
  thread_local std::unordered_map<int, cublasHandle_t> handles;
  auto it = handles.find(device);
  if (it == handles.end()) {
    cublasHandle_t h = nullptr;
    OCTO_CUBLAS_CHECK(cublasCreate(&h));
    // Note [GEMM precision]: no TF32 unless asked per call; 16-bit GEMMs reduce in float32.
    OCTO_CUBLAS_CHECK(cublasSetMathMode(
        h, static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH |
                                     CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));
    it = handles.emplace(device, h).first;
  }
  return it->second;
}

/// How the [R, C] matrix at dims 1, 2 of a 3-d arg is handed to cuBLAS (see the file comment).
struct MatrixLayout {
  bool ok = false;
  bool row_major = true;  // CUBLAS_OP_N for inputs
  int64_t ld = 1;
};

MatrixLayout layout_of(const TensorArg& t) {
  const int64_t r = t.sizes[1], c = t.sizes[2], s0 = t.strides[1], s1 = t.strides[2];
  MatrixLayout l;
  if ((c == 1 || s1 == 1) && (r == 1 || s0 >= std::max<int64_t>(c, 1))) {
    l.ok = true;
    l.row_major = true;
    l.ld = r == 1 ? std::max<int64_t>(c, 1) : s0;
  } else if ((r == 1 || s0 == 1) && (c == 1 || s1 >= std::max<int64_t>(r, 1))) {
    l.ok = true;
    l.row_major = false;
    l.ld = c == 1 ? std::max<int64_t>(r, 1) : s1;
  }
  l.ok = l.ok && l.ld <= INT_MAX;
  return l;
}

/// A contiguous device copy of t when its layout does not suit cuBLAS (buffer keeps it alive).
TensorArg usable(const TensorArg& t, DataPtr& buffer) {
  if (layout_of(t).ok) return t;
  const int dev = t.device.index();
  buffer = cuda::caching_allocator(dev)->allocate(size_t(t.numel()) * itemsize(t.dtype));
  TensorArg c = contiguous_like(t, buffer.get());
  cuda_backend().copy(c, t);
  return c;
}

/// out *= beta for an empty sum (k == 0); beta == 0 writes zeros (NaNs in out are ignored).
void scale_output(const TensorArg& out, double beta) {
  if (beta == 0.0) {
    cuda_backend().fill(out, Scalar(0.0));
  } else {
    cuda_backend().unary(UnaryOp::MulScalar, out, out, Scalar(beta), Scalar());
  }
}

}  // namespace

void CudaBackend::bmm(const TensorArg& out, const TensorArg& a, const TensorArg& b, double alpha,
                      double beta) {
  OCTO_INTERNAL_ASSERT(out.ndim == 3 && a.ndim == 3 && b.ndim == 3);
  OCTO_INTERNAL_ASSERT(a.dtype == out.dtype && b.dtype == out.dtype);
  const int64_t batch = out.sizes[0], m = out.sizes[1], n = out.sizes[2], k = a.sizes[2];
  OCTO_INTERNAL_ASSERT(a.sizes[1] == m && b.sizes[1] == k && b.sizes[2] == n);
  const DType dt = out.dtype;
  if (dt != kFloat32 && dt != kFloat64 && !is_half(dt)) {
    OCTO_THROW(NotImplementedError, "cuda backend: bmm is not implemented for dtype ", dt,
               " (float32, float64, bfloat16 and float16 are)");
  }
  if (batch == 0 || m == 0 || n == 0) return;
  const int dev = out.device.index();
  if (k == 0) {  // an empty sum: out = beta * out
    cuda::detail::CudaDeviceScope scope(dev);
    scale_output(out, beta);
    return;
  }
  OCTO_CHECK_VALUE(m <= INT_MAX && n <= INT_MAX && k <= INT_MAX && batch <= INT_MAX,
                   "bmm: matrix dims too large for cuBLAS, got [", batch, ", ", m, ", ", k, "] x [",
                   batch, ", ", k, ", ", n, "]");
  cuda::detail::CudaDeviceScope scope(dev);

  DataPtr a_buf, b_buf, out_buf;
  const TensorArg A = usable(a, a_buf), B = usable(b, b_buf);
  // The output must be row-major with a nonzero batch stride (unless batch == 1).
  const MatrixLayout ol = layout_of(out);
  const bool out_direct = ol.ok && ol.row_major && (batch == 1 || out.strides[0] != 0);
  TensorArg C = out;
  if (!out_direct) {
    out_buf = cuda::caching_allocator(dev)->allocate(size_t(out.numel()) * itemsize(dt));
    C = contiguous_like(out, out_buf.get());
    if (beta != 0.0) cuda_backend().copy(C, out);
  }
  const MatrixLayout la = layout_of(A), lb = layout_of(B), lc = layout_of(C);

  cublasHandle_t handle = cublas_handle(dev);
  OCTO_CUBLAS_CHECK(cublasSetStream(handle, cuda::current_stream(dev).handle()));
  // Column-major: C^T[n, m] = op(B)^T[n, k] @ op(A)^T[k, m].
  const cublasOperation_t op_b = lb.row_major ? CUBLAS_OP_N : CUBLAS_OP_T;
  const cublasOperation_t op_a = la.row_major ? CUBLAS_OP_N : CUBLAS_OP_T;
  const long long sa = batch == 1 ? 0 : A.strides[0], sb = batch == 1 ? 0 : B.strides[0];
  const long long sc = batch == 1 ? 0 : C.strides[0];
  if (dt == kFloat64) {
    OCTO_CUBLAS_CHECK(cublasDgemmStridedBatched(handle, op_b, op_a, int(n), int(m), int(k), &alpha,
                                                B.data_as<const double>(), int(lb.ld), sb,
                                                A.data_as<const double>(), int(la.ld), sa, &beta,
                                                C.data_as<double>(), int(lc.ld), sc, int(batch)));
  } else if (dt == kFloat32 && !cuda::allow_tf32()) {
    const float al = static_cast<float>(alpha), be = static_cast<float>(beta);
    OCTO_CUBLAS_CHECK(cublasSgemmStridedBatched(handle, op_b, op_a, int(n), int(m), int(k), &al,
                                                B.data_as<const float>(), int(lb.ld), sb,
                                                A.data_as<const float>(), int(la.ld), sa, &be,
                                                C.data_as<float>(), int(lc.ld), sc, int(batch)));
  } else {
    // Note [GEMM precision]: float32 with TF32 allowed, bfloat16, float16; float scalars.
    const cudaDataType type = dt == kFloat32    ? CUDA_R_32F
                              : dt == kBFloat16 ? CUDA_R_16BF
                                                : CUDA_R_16F;
    const cublasComputeType_t compute =
        dt == kFloat32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    const float al = static_cast<float>(alpha), be = static_cast<float>(beta);
    OCTO_CUBLAS_CHECK(cublasGemmStridedBatchedEx(handle, op_b, op_a, int(n), int(m), int(k), &al,
                                                 B.data, type, int(lb.ld), sb, A.data, type,
                                                 int(la.ld), sa, &be, C.data, type, int(lc.ld), sc,
                                                 int(batch), compute, CUBLAS_GEMM_DEFAULT));
  }
  if (!out_direct) cuda_backend().copy(out, C);
}

}  // namespace octo::kernels
