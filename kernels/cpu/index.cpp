// CPU index_select, index_add, gather, scatter_add: strided loops driven by int64 index tensors.
//
// All four reduce to two loops over a "full" index argument that has the shape of the
// iterated tensor (index_select/index_add broadcast their 1-d index with stride 0 elsewhere):
//   gather_loop:       out[p] = in[p with p[dim] = index[p]]           (p over out's shape)
//   scatter_add_loop:  out[p with p[dim] = index[p]] += src[p]         (p over index's shape)
// Indices are validated in a separate pass before anything is written, so a bad index leaves
// the output untouched. gather writes distinct elements, so any position may run in parallel.
// scatter_add may hit the same output element from several positions along dim (never from two
// positions that differ elsewhere), so it runs in parallel over the non-indexed positions and
// walks dim sequentially inside each: race-free without atomics.
#include <algorithm>
#include <array>
#include <cstring>
#include <type_traits>

#include "core/error.h"
#include "core/threads.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/loops.h"
#include "kernels/index_math.h"

namespace octo::kernels {

namespace {

using index::along;
using index::broadcast_index;

/// Throws IndexError for the first index outside [0, size) (named by op, dim and size).
void check_indices(const TensorArg& index, int64_t size, int dim, const char* op) {
  OCTO_INTERNAL_ASSERT(index.dtype == kInt64);
  cpu::strided_runs<1>({index}, [&](std::array<char*, 1> p, std::array<int64_t, 1> s, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t v = *reinterpret_cast<const int64_t*>(p[0] + i * s[0]);
      index::check_index(v >= 0 && v < size, v, size, dim, op);
    }
  });
}

template <typename T>
inline void add_into(T* p, T v) {
  if constexpr (std::is_same_v<T, BFloat16> || std::is_same_v<T, Float16>) {
    *p = T(static_cast<float>(*p) + static_cast<float>(v));
  } else if constexpr (std::is_same_v<T, bool>) {
    *p = *p || v;
  } else {
    *p = static_cast<T>(*p + v);
  }
}

/// out[p] = in[p with p[dim] = index[p]] for p over out's shape; index has out's shape.
void gather_loop(const TensorArg& out, const TensorArg& in, int dim, const TensorArg& index) {
  OCTO_INTERNAL_ASSERT(out.dtype == in.dtype && index.dtype == kInt64);
  const TensorArg src = along(in, out, dim);
  const int64_t step = in.strides[dim];
  OCTO_DISPATCH_ALL_AND_HALF(out.dtype, "gather", [&] {
    cpu::strided_runs<3>({out, index, src},
                         [step](std::array<char*, 3> p, std::array<int64_t, 3> s, int64_t n) {
                           for (int64_t i = 0; i < n; ++i) {
                             const int64_t k = *reinterpret_cast<const int64_t*>(p[1] + i * s[1]);
                             *reinterpret_cast<scalar_t*>(p[0] + i * s[0]) =
                                 reinterpret_cast<const scalar_t*>(p[2] + i * s[2])[k * step];
                           }
                         });
  });
}

/// out[p with p[dim] = index[p]] += src[p] for p over index's shape (src at least as large).
void scatter_add_loop(const TensorArg& out, int dim, const TensorArg& index, const TensorArg& src) {
  OCTO_INTERNAL_ASSERT(out.dtype == src.dtype && index.dtype == kInt64);
  // Iterate over index's shape with dim collapsed to 1; each visit walks dim sequentially.
  TensorArg idx = index;
  idx.sizes[dim] = 1;
  const TensorArg dst = along(out, idx, dim);
  const TensorArg from = along(src, idx, dim);
  const int64_t len = index.sizes[dim];
  const int64_t idx_step = index.strides[dim], src_step = src.strides[dim];
  const int64_t out_step = out.strides[dim];
  const int64_t grain = std::max<int64_t>(1, cpu::kGrain / std::max<int64_t>(len, 1));
  OCTO_DISPATCH_ALL_AND_HALF(out.dtype, "scatter_add", [&] {
    cpu::strided_runs<3>(
        {dst, idx, from},
        [=](std::array<char*, 3> p, std::array<int64_t, 3> s, int64_t n) {
          for (int64_t j = 0; j < len; ++j) {
            for (int64_t i = 0; i < n; ++i) {
              const int64_t k = reinterpret_cast<const int64_t*>(p[1] + i * s[1])[j * idx_step];
              const scalar_t v = reinterpret_cast<const scalar_t*>(p[2] + i * s[2])[j * src_step];
              add_into(reinterpret_cast<scalar_t*>(p[0] + i * s[0]) + k * out_step, v);
            }
          }
        },
        grain);
  });
}

/// index_select of whole blocks: with out and in contiguous, each (outer position, index entry)
/// pair copies one contiguous block of the dims after `dim` (a whole image, for a batch taken
/// from a dataset) with memcpy, instead of gathering element by element.
void index_select_blocks(const TensorArg& out, const TensorArg& in, int dim,
                         const TensorArg& index) {
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < dim; ++d) outer *= in.sizes[d];
  for (int d = dim + 1; d < in.ndim; ++d) inner *= in.sizes[d];
  const size_t bytes = size_t(inner) * itemsize(in.dtype);
  const int64_t n = index.numel(), size = in.sizes[dim];
  const int64_t istride = index.ndim == 0 ? 0 : index.strides[0];
  const int64_t* idx = index.data_as<const int64_t>();
  const char* src = static_cast<const char*>(in.data);
  char* dst = static_cast<char*>(out.data);
  const int64_t grain =
      std::max<int64_t>(1, cpu::kGrain * 4 / std::max<int64_t>(int64_t(bytes), 1));
  parallel_for(0, outer * n, grain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t o = r / n, j = r % n;
      std::memcpy(dst + size_t(r) * bytes, src + size_t(o * size + idx[j * istride]) * bytes,
                  bytes);
    }
  });
}

}  // namespace

void CpuBackend::index_select(const TensorArg& out, const TensorArg& in, int dim,
                              const TensorArg& index) {
  OCTO_INTERNAL_ASSERT(index.ndim <= 1 && out.ndim == in.ndim && dim >= 0 && dim < in.ndim);
  OCTO_INTERNAL_ASSERT(out.sizes[dim] == index.numel());
  check_indices(index, in.sizes[dim], dim, "index_select");
  if (out.numel() == 0) return;
  if (out.is_contiguous() && in.is_contiguous()) return index_select_blocks(out, in, dim, index);
  gather_loop(out, in, dim, broadcast_index(index, out, dim));
}

void CpuBackend::index_add(const TensorArg& out, int dim, const TensorArg& index,
                           const TensorArg& src) {
  OCTO_INTERNAL_ASSERT(index.ndim <= 1 && out.ndim == src.ndim && dim >= 0 && dim < out.ndim);
  OCTO_INTERNAL_ASSERT(src.sizes[dim] == index.numel());
  check_indices(index, out.sizes[dim], dim, "index_add");
  if (src.numel() == 0) return;
  scatter_add_loop(out, dim, broadcast_index(index, src, dim), src);
}

void CpuBackend::gather(const TensorArg& out, const TensorArg& in, int dim,
                        const TensorArg& index) {
  OCTO_INTERNAL_ASSERT(index.ndim == in.ndim && out.ndim == in.ndim && dim >= 0 && dim < in.ndim);
  check_indices(index, in.sizes[dim], dim, "gather");
  if (out.numel() == 0) return;
  gather_loop(out, in, dim, index);
}

void CpuBackend::scatter_add(const TensorArg& out, int dim, const TensorArg& index,
                             const TensorArg& src) {
  OCTO_INTERNAL_ASSERT(index.ndim == out.ndim && src.ndim == out.ndim && dim >= 0 &&
                       dim < out.ndim);
  check_indices(index, out.sizes[dim], dim, "scatter_add");
  if (index.numel() == 0) return;
  scatter_add_loop(out, dim, index, src);
}

}  // namespace octo::kernels
