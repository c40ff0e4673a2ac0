// CPU batched matrix multiply: float32 through oneDNN when built with it (Note [oneDNN SGEMM]),
// everything else through Eigen; strided operands mapped in place, threads per product.
//
// Each batch's [M, K] and [K, N] operands are mapped as Eigen::Map with an outer stride: row-major
// when the last dim has stride 1, column-major when the second-to-last has, so transposed views
// cost nothing. Anything else (a slice with a step in both dims, ...) is copied to a contiguous
// temporary first. The output is handled the same way, copied back when it had to be staged.
//
// Note [GEMM threads]: Eigen is only ever run single-threaded (the calling thread's OpenMP count
// is pinned to 1 around each call, which is what Eigen's GEMM reads; Eigen::setNbThreads is
// process-wide and never called). We parallelise around it with parallel_for, which takes
// octo::get_num_threads() and so honours ThreadLimitGuard (two virtual CPU devices on two cores
// use one core each):
//  - one large product: C is cut into get_num_threads() panels along its larger dim and each
//    panel is an independent Eigen product. Measured on the 2-core Xeon of docs/benchmarks.md
//    this beats Eigen's own OpenMP GEMM (shared packing, spin-wait handshakes between threads):
//    2-thread SGEMM 256^3 ~290 vs ~145 GFLOP/s, 1024^3 ~290 vs ~275, 2048^3 on par (~270).
//  - a batch of small products: parallel_for over the batch, one product per matrix.
// Eigen 3.4's AVX-512 paths trip GCC 12's -Wmaybe-uninitialized/-Wunused-variable in system
// headers; they are noise here, so they are silenced for this file only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wunused-variable"
#include <Eigen/Core>
#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "core/threads.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/matmul_dnnl.h"
#include "kernels/cpu/omp_threads.h"
#include "kernels/float32_staging.h"
#include "octo_config.h"

#if defined(_OPENMP)
#include <omp.h>
#endif
#if OCTO_WITH_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

namespace octo::kernels {

namespace {

using Eigen::Index;

// Below this many multiply-adds per matrix, a batch is split across threads over the batch dim
// (one product per thread at a time) instead of splitting each product into panels.
constexpr int64_t kSmallGemm = int64_t{128} * 128 * 128;
// Multiply-adds per parallel_for chunk at least (~5 us), so tiny work stays on one thread.
constexpr int64_t kMinChunkWork = int64_t{1} << 18;

using cpu::OmpThreadsGuard;

/// How one [rows, cols] matrix with strides (rs, cs) can be handed to Eigen without a copy.
struct Layout {
  bool mappable = false;
  bool row_major = false;
  int64_t ld = 0;  // outer stride in elements
};

/// Row-major when the column stride is 1, column-major when the row stride is 1 (strides of
/// size-1 dims do not matter). A writable matrix also needs rows that do not overlap.
Layout layout_of(int64_t rows, int64_t cols, int64_t rs, int64_t cs, bool writable) {
  if (cols <= 1 || cs == 1) {
    int64_t ld = rows <= 1 ? std::max<int64_t>(cols, 1) : rs;
    if (ld >= 0 && (!writable || rows <= 1 || ld >= cols)) return {true, true, ld};
  }
  if (rows <= 1 || rs == 1) {
    int64_t ld = cols <= 1 ? std::max<int64_t>(rows, 1) : cs;
    if (ld >= 0 && (!writable || cols <= 1 || ld >= rows)) return {true, false, ld};
  }
  return {};
}

/// A matrix operand as Eigen will see it: pointer, storage order and outer stride.
template <typename T>
struct Operand {
  const T* data;
  bool row_major;
  Index ld;
  /// The transpose is the same memory in the other storage order.
  Operand transposed() const { return {data, !row_major, ld}; }
};

template <typename T, int Order>
using ConstMap = Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Order>,
                            Eigen::Unaligned, Eigen::OuterStride<>>;
template <typename T>
using ColMap = Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>,
                          Eigen::Unaligned, Eigen::OuterStride<>>;

/// C = alpha * A @ B + beta * C for column-major C [m, n]; beta == 0 overwrites C.
template <typename T, int AOrder, int BOrder>
void gemm_colmajor(Index m, Index n, Index k, T alpha, const Operand<T>& a, const Operand<T>& b,
                   T beta, T* c, Index ldc) {
  ConstMap<T, AOrder> A(a.data, m, k, Eigen::OuterStride<>(a.ld));
  ConstMap<T, BOrder> B(b.data, k, n, Eigen::OuterStride<>(b.ld));
  ColMap<T> C(c, m, n, Eigen::OuterStride<>(ldc));
  if (k == 0) {  // an empty sum: only the beta term remains
    if (beta == T(0))
      C.setZero();
    else
      C *= beta;
    return;
  }
  if (beta == T(0)) {
    C.noalias() = alpha * A * B;  // Eigen zeroes C first, so NaNs in it are ignored
  } else {
    if (beta != T(1)) C *= beta;
    C.noalias() += alpha * A * B;
  }
}

/// One product, any storage orders. A row-major C is computed as C^T = B^T A^T (column-major),
/// which keeps the number of Eigen instantiations at four per dtype.
template <typename T>
void gemm(Index m, Index n, Index k, T alpha, const Operand<T>& a, const Operand<T>& b, T beta,
          T* c, bool c_row_major, Index ldc) {
  if (c_row_major) {
    gemm<T>(n, m, k, alpha, b.transposed(), a.transposed(), beta, c, false, ldc);
    return;
  }
  constexpr int R = Eigen::RowMajor, C = Eigen::ColMajor;
  if (a.row_major && b.row_major)
    gemm_colmajor<T, R, R>(m, n, k, alpha, a, b, beta, c, ldc);
  else if (a.row_major)
    gemm_colmajor<T, R, C>(m, n, k, alpha, a, b, beta, c, ldc);
  else if (b.row_major)
    gemm_colmajor<T, C, R>(m, n, k, alpha, a, b, beta, c, ldc);
  else
    gemm_colmajor<T, C, C>(m, n, k, alpha, a, b, beta, c, ldc);
}

#if OCTO_WITH_DNNL
/// Note [oneDNN SGEMM]: float32 products go to oneDNN's dnnl_sgemm when octo is built with it
/// (-Donednn, docs/benchmarks.md "Choosing the GEMM"). dnnl_sgemm is row-major BLAS: an operand
/// stored column-major is the transpose of a row-major one with the same ld, and a column-major C
/// is computed as C^T = B^T A^T. It threads with OpenMP and reads the calling thread's count,
/// which OmpThreadsGuard sets to the caller's share (get_num_threads(), so ThreadLimitGuard and
/// virtual devices hold). An empty sum (k == 0) stays on the Eigen path.
/// Returns false, having done nothing, for strides BLAS cannot express (a broadcast operand with
/// an outer stride below its row length); Eigen maps those instead.
bool dnnl_gemm(Index m, Index n, Index k, float alpha, const Operand<float>& a,
               const Operand<float>& b, float beta, float* c, bool c_row_major, Index ldc,
               int threads) {
  if (!c_row_major)
    return dnnl_gemm(n, m, k, alpha, b.transposed(), a.transposed(), beta, c, true, ldc, threads);
  // Row-major C [m, n] = op(A) [m, k] @ op(B) [k, n]; each stored matrix's ld covers its row.
  const bool fits = a.ld >= std::max<Index>(1, a.row_major ? k : m) &&
                    b.ld >= std::max<Index>(1, b.row_major ? n : k) && ldc >= std::max<Index>(1, n);
  if (!fits) return false;
  OmpThreadsGuard use(threads);
  dnnl_status_t status = dnnl_sgemm(a.row_major ? 'N' : 'T', b.row_major ? 'N' : 'T', m, n, k,
                                    alpha, a.data, a.ld, b.data, b.ld, beta, c, ldc);
  OCTO_CHECK(status == dnnl_success, "matmul: oneDNN sgemm failed with status ",
             static_cast<int>(status), " for [", m, ", ", k, "] @ [", k, ", ", n, "]");
  return true;
}
#endif

/// One product on up to `threads` threads (Note [GEMM threads]): C, column-major after the same
/// transposition as gemm(), is cut into panels along its larger dim, each one single-threaded
/// Eigen product. A's (or B's) packing is repeated per panel: O(n^2) extra work per thread.
template <typename T>
void gemm_panels(Index m, Index n, Index k, T alpha, const Operand<T>& a, const Operand<T>& b,
                 T beta, T* c, bool c_row_major, Index ldc, int threads) {
#if OCTO_WITH_DNNL
  if constexpr (std::is_same_v<T, float>) {
    if (k > 0 && dnnl_gemm(m, n, k, alpha, a, b, beta, c, c_row_major, ldc, threads)) return;
  }
#endif
  if (c_row_major) {
    gemm_panels<T>(n, m, k, alpha, b.transposed(), a.transposed(), beta, c, false, ldc, threads);
    return;
  }
  const bool by_cols = n >= m;
  const Index len = by_cols ? n : m;
  // Panels are whole multiples of 16 (an AVX-512 vector of floats), at least 64 wide, and carry
  // at least kMinChunkWork multiply-adds each.
  constexpr Index kUnit = 16;
  const Index work = m * n * std::max<Index>(k, 1);
  const Index chunks = std::max<Index>(
      1, std::min<Index>({static_cast<Index>(threads), len / 64, work / kMinChunkWork}));
  const Index per = ((len + kUnit - 1) / kUnit + chunks - 1) / chunks * kUnit;
  OmpThreadsGuard single(1);
  if (chunks == 1) {
    gemm<T>(m, n, k, alpha, a, b, beta, c, false, ldc);
    return;
  }
  parallel_for(0, chunks, 1, [&](int64_t p0, int64_t p1) {
    OmpThreadsGuard single_in_worker(1);
    for (int64_t p = p0; p < p1; ++p) {
      const Index begin = p * per, end = std::min<Index>(len, begin + per);
      if (begin >= end) continue;
      if (by_cols) {  // B[:, begin:end] -> C[:, begin:end]
        Operand<T> bp{b.row_major ? b.data + begin : b.data + begin * b.ld, b.row_major, b.ld};
        gemm<T>(m, end - begin, k, alpha, a, bp, beta, c + begin * ldc, false, ldc);
      } else {  // A[begin:end, :] -> C[begin:end, :]
        Operand<T> ap{a.row_major ? a.data + begin * a.ld : a.data + begin, a.row_major, a.ld};
        gemm<T>(end - begin, n, k, alpha, ap, b, beta, c + begin, false, ldc);
      }
    }
  });
}

/// Copies a strided [rows, cols] matrix into dst (row-major, contiguous).
template <typename T>
void gather_matrix(T* dst, const T* src, int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) dst[i * cols + j] = src[i * rs + j * cs];
}

template <typename T>
void scatter_matrix(T* dst, const T* src, int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) dst[i * rs + j * cs] = src[i * cols + j];
}

template <typename T>
void bmm_impl(const TensorArg& out, const TensorArg& a, const TensorArg& b, double alpha_d,
              double beta_d) {
  const int64_t B = out.sizes[0], M = out.sizes[1], N = out.sizes[2], K = a.sizes[2];
  if (B == 0 || M == 0 || N == 0) return;
  const T alpha = static_cast<T>(alpha_d), beta = static_cast<T>(beta_d);
  const Layout la = layout_of(M, K, a.strides[1], a.strides[2], false);
  const Layout lb = layout_of(K, N, b.strides[1], b.strides[2], false);
  const Layout lc = layout_of(M, N, out.strides[1], out.strides[2], true);
  const T* a_data = a.data_as<const T>();
  const T* b_data = b.data_as<const T>();
  T* c_data = out.data_as<T>();

  // One batch entry on `threads` threads; scratch holds the contiguous copies of operands Eigen
  // cannot map.
  auto one = [&](int64_t i, std::vector<T>& scratch, int threads) {
    // K == 0 leaves a and b empty, their data possibly null: nothing to offset or read.
    const T* pa = K == 0 ? a_data : a_data + i * a.strides[0];
    const T* pb = K == 0 ? b_data : b_data + i * b.strides[0];
    T* pc = c_data + i * out.strides[0];
    size_t need = (la.mappable ? 0 : M * K) + (lb.mappable ? 0 : K * N) + (lc.mappable ? 0 : M * N);
    if (scratch.size() < need) scratch.resize(need);
    T* tmp = scratch.data();
    Operand<T> oa{pa, la.row_major, la.ld}, ob{pb, lb.row_major, lb.ld};
    if (!la.mappable) {
      gather_matrix(tmp, pa, M, K, a.strides[1], a.strides[2]);
      oa = {tmp, true, std::max<int64_t>(K, 1)};
      tmp += M * K;
    }
    if (!lb.mappable) {
      gather_matrix(tmp, pb, K, N, b.strides[1], b.strides[2]);
      ob = {tmp, true, std::max<int64_t>(N, 1)};
      tmp += K * N;
    }
    if (lc.mappable) {
      gemm_panels<T>(M, N, K, alpha, oa, ob, beta, pc, lc.row_major, lc.ld, threads);
    } else {
      if (beta != T(0)) gather_matrix(tmp, pc, M, N, out.strides[1], out.strides[2]);
      gemm_panels<T>(M, N, K, alpha, oa, ob, beta, tmp, true, N, threads);
      scatter_matrix(pc, tmp, M, N, out.strides[1], out.strides[2]);
    }
  };

  const int64_t work = M * N * std::max<int64_t>(K, 1);
  if (B > 1 && work < kSmallGemm) {
    // Note [GEMM threads]: many small products -- parallelise over the batch.
    int64_t grain = std::max<int64_t>(1, kMinChunkWork / work);
    parallel_for(0, B, grain, [&](int64_t begin, int64_t end) {
      std::vector<T> scratch;
      for (int64_t i = begin; i < end; ++i) one(i, scratch, 1);
    });
  } else {
    // Note [GEMM threads]: large products -- each one split into panels across the threads.
    const int threads = get_num_threads();
    std::vector<T> scratch;
    for (int64_t i = 0; i < B; ++i) one(i, scratch, threads);
  }
}

}  // namespace

void CpuBackend::bmm(const TensorArg& out, const TensorArg& a, const TensorArg& b, double alpha,
                     double beta) {
  if (cpu::dnnl_bmm_bf16(out, a, b, alpha, beta)) return;  // Note [oneDNN bf16 matmul]
  if (staged_in_float32({&out, &a, &b}, [&](Float32Staging& s) {
        bmm(s.output(out, beta != 0.0), s.input(a), s.input(b), alpha, beta);
      }))
    return;  // Note [16-bit kernels]
  OCTO_INTERNAL_ASSERT(out.ndim == 3 && a.ndim == 3 && b.ndim == 3);
  OCTO_INTERNAL_ASSERT(a.dtype == out.dtype && b.dtype == out.dtype);
  OCTO_INTERNAL_ASSERT(a.sizes[0] == out.sizes[0] && b.sizes[0] == out.sizes[0] &&
                       a.sizes[1] == out.sizes[1] && b.sizes[2] == out.sizes[2] &&
                       a.sizes[2] == b.sizes[1]);
  OCTO_INTERNAL_ASSERT(out.sizes[0] <= 1 || out.strides[0] != 0 || out.numel() == 0,
                       "bmm: the output cannot broadcast over the batch");
  OCTO_DISPATCH_FLOATING(out.dtype, "bmm", [&] { bmm_impl<scalar_t>(out, a, b, alpha, beta); });
}

}  // namespace octo::kernels

#pragma GCC diagnostic pop
