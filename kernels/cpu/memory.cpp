// CPU fill and copy (strided, with dtype conversion).
#include "kernels/convert.h"
#include "kernels/cpu/convert_run.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/loops.h"

namespace octo::kernels {

void CpuBackend::fill(const TensorArg& out, Scalar value) {
  OCTO_DISPATCH_ALL_AND_HALF(out.dtype, "fill", [&] {
    const scalar_t v = static_cast<scalar_t>(
        value.to<std::conditional_t<std::is_integral_v<scalar_t>, int64_t, double>>());
    cpu::strided_runs<1>({out}, [v](std::array<char*, 1> p, std::array<int64_t, 1> s, int64_t n) {
      for (int64_t i = 0; i < n; ++i) *reinterpret_cast<scalar_t*>(p[0] + i * s[0]) = v;
    });
  });
}

void CpuBackend::copy(const TensorArg& dst, const TensorArg& src) {
  OCTO_INTERNAL_ASSERT(dst.ndim == src.ndim);
  OCTO_DISPATCH_ALL_AND_HALF(dst.dtype, "copy", [&] {
    using dst_t = scalar_t;
    OCTO_DISPATCH_ALL_AND_HALF(src.dtype, "copy", [&] {
      using src_t = scalar_t;
      cpu::strided_runs<2>({dst, src}, [](std::array<char*, 2> p, std::array<int64_t, 2> s,
                                          int64_t n) {
        if (s[0] == sizeof(dst_t) && s[1] == sizeof(src_t)) {
          cpu::convert_run(reinterpret_cast<dst_t*>(p[0]), reinterpret_cast<const src_t*>(p[1]), n);
          return;
        }
        for (int64_t i = 0; i < n; ++i) {
          const src_t v = *reinterpret_cast<const src_t*>(p[1] + i * s[1]);
          *reinterpret_cast<dst_t*>(p[0] + i * s[0]) = convert<dst_t>(v);
        }
      });
    });
  });
}

}  // namespace octo::kernels
