// cuBLAS GEMM precision on CUDA: bfloat16/float16 products against a float32 CPU reference, and
// the TF32 switch for float32 (off: true float32; on: TF32 tensor cores; switching back restores).
//
// Note [Half GEMM tolerance]: the inputs are drawn in float32 and rounded to the 16-bit type on
// the CPU; the reference multiplies those same rounded values in float32 on the CPU. A product of
// two bfloat16 (8 significant bits) or float16 (11) values is exact in float32 (24), so the GPU
// and the reference differ only by (1) the order of the float32 sums, each within gamma_K =
// K * 2^-24 of sum_k |a_ik b_kj| (written absref below), and (2) the final rounding of the GPU's
// float32 sum to the 16-bit output, at most u = 2^-8 (bfloat16) or 2^-11 (float16) relative. So
//   |gpu - ref| <= u |ref| + (1 + u) * 2 gamma_K * absref,
// and the test takes the K term four times larger (tensor cores' float32 accumulation need not
// round to nearest). A wrong layout or a sum kept in 16 bits misses this by orders of magnitude.
//
// linear's bias is the exception: it is copied into the output and the product accumulated onto
// it (beta 1, the weight a transposed operand, one matrix). On an H200 with CUDA 13.0 cuBLAS then
// rounded twice: 37 of 960 bfloat16 and 3 of 960 float16 outputs were off by up to 0.89 of the
// output's ulp, past the half ulp of one rounding (docs/internals/cuda.md, "16-bit GEMM with
// beta"); the bmm calls below with beta = -1.5 and row-major operands stayed within one rounding.
// So that check passes `twice`, |x @ w^T| + |bias|, and allows one more rounding of that size:
//   + u (1 + u) twice.
// That is still under one ulp of the terms, far below what a layout error or 16-bit sums give.
#include "gpu/gpu_main.h"

#include <dlfcn.h>

#include <octo/octo.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kernels/backend.h"

using octo::Device;
using octo::DeviceType;
using octo::DType;
using octo::Shape;
using octo::Tensor;

namespace {

const Device kGpu(DeviceType::CUDA, 0);

/// t's values as doubles in row-major order (moved to the CPU first).
std::vector<double> values(const Tensor& t) {
  Tensor c = t.to(octo::kCPU, octo::kFloat64).contiguous();
  const double* p = c.data_ptr<double>();
  return std::vector<double>(p, p + c.numel());
}

/// Unit roundoff of a 16-bit float type: 2^-(significant bits).
double unit_roundoff(DType dt) { return dt == octo::kBFloat16 ? 0x1p-8 : 0x1p-11; }

/// A CPU tensor of standard normal values rounded to dt.
Tensor randn_rounded(const Shape& shape, DType dt) { return octo::randn(shape).to(dt); }

/// Checks gpu (a 16-bit CUDA tensor) against ref (float32, CPU) elementwise with the bound of
/// Note [Half GEMM tolerance]; absref is the same product of absolute values, k the sum length,
/// twice (when defined) the size of a second rounding cuBLAS may make (linear's bias). Prints how
/// many elements needed that allowance.
void check_half(const Tensor& gpu, const Tensor& ref, const Tensor& absref, int64_t k,
                const Tensor& twice = Tensor()) {
  REQUIRE(gpu.device() == kGpu);
  REQUIRE(gpu.sizes() == ref.sizes());
  const double u = unit_roundoff(gpu.dtype());
  const double gamma = 4.0 * 2.0 * double(k + 2) * 0x1p-24;
  const std::vector<double> g = values(gpu), r = values(ref), ar = values(absref);
  const std::vector<double> tw = twice.defined() ? values(twice) : std::vector<double>(g.size());
  int bad = 0, second = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const double once = u * std::abs(r[i]) + (1 + u) * gamma * ar[i];
    const double tol = once + u * (1 + u) * tw[i];
    const double err = std::abs(g[i] - r[i]);
    if (err > once) ++second;
    if (!(err <= tol) && ++bad <= 5) {  // !(<=): NaN fails too
      INFO("element " << i << ": gpu " << g[i] << " ref " << r[i] << " tol " << tol);
      CHECK(err <= tol);
    }
  }
  CHECK(bad == 0);
  if (twice.defined()) {
    std::printf("check_half %s: %d of %zu elements past one rounding's bound\n",
                std::string(octo::dtype_name(gpu.dtype())).c_str(), second, g.size());
  }
}

/// ref = a @ b and absref = |a| @ |b| in float32 on the CPU, from 16-bit CPU operands.
std::pair<Tensor, Tensor> reference(const Tensor& a16, const Tensor& b16) {
  Tensor a = a16.to(octo::kFloat32), b = b16.to(octo::kFloat32);
  return {octo::matmul(a, b), octo::matmul(octo::abs(a), octo::abs(b))};
}

/// ||x - ref|| / ||ref|| (Frobenius), both moved to the CPU in float64.
double rel_error(const Tensor& x, const Tensor& ref) {
  const std::vector<double> a = values(x), r = values(ref);
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - r[i]) * (a[i] - r[i]);
    den += r[i] * r[i];
  }
  return std::sqrt(num / den);
}

/// The GPU's compute capability (major), read through the CUDA runtime that libocto has already
/// loaded (the GPU tests are built without the CUDA headers); 0 when it cannot be read.
int compute_capability_major() {
  using GetAttribute = int (*)(int* value, int attribute, int device);
  constexpr int kComputeCapabilityMajor = 75;  // cudaDevAttrComputeCapabilityMajor
  auto fn = reinterpret_cast<GetAttribute>(dlsym(RTLD_DEFAULT, "cudaDeviceGetAttribute"));
  int major = 0;
  if (fn == nullptr || fn(&major, kComputeCapabilityMajor, 0) != 0) return 0;
  return major;
}

/// Sets octo::cuda::allow_tf32 for its lifetime and restores the previous value, so a failing
/// check cannot leave TF32 on for the test cases that follow.
class Tf32Scope {
 public:
  explicit Tf32Scope(bool allow) : previous_(octo::cuda::allow_tf32()) {
    octo::cuda::set_allow_tf32(allow);
  }
  ~Tf32Scope() { octo::cuda::set_allow_tf32(previous_); }
  Tf32Scope(const Tf32Scope&) = delete;
  Tf32Scope& operator=(const Tf32Scope&) = delete;

 private:
  bool previous_;
};

const DType kHalfTypes[] = {octo::kBFloat16, octo::kFloat16};

}  // namespace

TEST_CASE("cuda bf16/f16 bmm matches a float32 reference", "[cuda][gemm]") {
  octo::manual_seed(11);
  struct Case {
    const char* name;
    int64_t batch, m, k, n;
    bool ta, tb;  // operand given as a transposed (column-major) view
  };
  // Odd sizes (no tensor-core alignment) and aligned ones; K = 2048 shows float32 accumulation.
  const std::vector<Case> cases = {
      {"plain", 3, 33, 70, 17, false, false},       {"a transposed", 3, 33, 70, 17, true, false},
      {"b transposed", 3, 33, 70, 17, false, true}, {"both transposed", 2, 9, 31, 5, true, true},
      {"aligned", 2, 128, 256, 64, false, false},   {"long k", 2, 64, 2048, 48, false, true},
      {"single", 1, 1, 7, 1, false, false}};
  for (DType dt : kHalfTypes) {
    for (const Case& c : cases) {
      INFO(c.name << " " << dt);
      // Transposed operands are made on the GPU from a transposed base, so their strides stay
      // column-major there (the CPU copy of the same view feeds the reference).
      Tensor a_base = randn_rounded(c.ta ? Shape{c.batch, c.k, c.m} : Shape{c.batch, c.m, c.k}, dt);
      Tensor b_base = randn_rounded(c.tb ? Shape{c.batch, c.n, c.k} : Shape{c.batch, c.k, c.n}, dt);
      Tensor a = c.ta ? a_base.transpose(1, 2) : a_base;
      Tensor b = c.tb ? b_base.transpose(1, 2) : b_base;
      Tensor ag = c.ta ? a_base.to(kGpu).transpose(1, 2) : a_base.to(kGpu);
      Tensor bg = c.tb ? b_base.to(kGpu).transpose(1, 2) : b_base.to(kGpu);
      Tensor out = octo::bmm(ag, bg);
      CHECK(out.dtype() == dt);
      auto [ref, absref] = reference(a, b);
      check_half(out, ref, absref, c.k);
    }
  }
}

TEST_CASE("cuda bf16/f16 matmul: broadcast batch, folded batch, strided operand", "[cuda][gemm]") {
  octo::manual_seed(12);
  for (DType dt : kHalfTypes) {
    INFO(dt);
    {  // [1, M, K] @ [4, K, N]: a is read with batch stride 0
      Tensor a = randn_rounded({1, 21, 40}, dt), b = randn_rounded({4, 40, 19}, dt);
      auto [ref, absref] = reference(a.expand({4, 21, 40}), b);
      check_half(octo::matmul(a.to(kGpu), b.to(kGpu)), ref, absref, 40);
    }
    {  // [4, M, K] @ [K, N]: the batch folds into the rows of one product
      Tensor a = randn_rounded({4, 21, 40}, dt), b = randn_rounded({40, 19}, dt);
      auto [ref, absref] = reference(a, b);
      check_half(octo::matmul(a.to(kGpu), b.to(kGpu)), ref, absref, 40);
    }
    {  // a slice with a step in its last dim is copied to a contiguous buffer first
      Tensor base = randn_rounded({6, 50}, dt), b = randn_rounded({25, 11}, dt);
      Tensor a = base.slice(1, 0, std::nullopt, 2);
      auto [ref, absref] = reference(a, b);
      check_half(octo::matmul(base.to(kGpu).slice(1, 0, std::nullopt, 2), b.to(kGpu)), ref, absref,
                 25);
    }
  }
}

TEST_CASE("cuda bf16/f16 bmm with alpha and beta (backend) and linear with bias", "[cuda][gemm]") {
  octo::manual_seed(13);
  const double alpha = 0.75, beta = -1.5;
  for (DType dt : kHalfTypes) {
    INFO(dt);
    const int64_t batch = 2, m = 24, k = 96, n = 40;
    Tensor a = randn_rounded({batch, m, k}, dt), b = randn_rounded({batch, k, n}, dt);
    Tensor c = randn_rounded({batch, m, n}, dt);
    auto [prod, absprod] = reference(a, b);
    Tensor c32 = c.to(octo::kFloat32);
    Tensor ref = prod * alpha + c32 * beta;
    Tensor absref = absprod * std::abs(alpha) + octo::abs(c32) * std::abs(beta);
    auto& gpu = octo::kernels::backend(kGpu);
    {  // row-major output: cuBLAS reads and writes it in place
      INFO("in place");
      Tensor out = c.to(kGpu);
      gpu.bmm(out.arg(), a.to(kGpu).arg(), b.to(kGpu).arg(), alpha, beta);
      check_half(out, ref, absref, k);
    }
    {  // a transposed output view is staged through a contiguous buffer, beta term included
      Tensor out_base = c.transpose(1, 2).contiguous().to(kGpu);  // [batch, n, m]
      INFO("transposed output");
      Tensor out = out_base.transpose(1, 2);  // [batch, m, n], column-major
      gpu.bmm(out.arg(), a.to(kGpu).arg(), b.to(kGpu).arg(), alpha, beta);
      check_half(out, ref, absref, k);
    }
    {  // beta == 0 ignores whatever the output held (NaN here): every element is written
      INFO("beta 0");
      Tensor out = octo::full({batch, m, n}, std::numeric_limits<double>::quiet_NaN(),
                              {.dtype = dt, .device = kGpu});
      gpu.bmm(out.arg(), a.to(kGpu).arg(), b.to(kGpu).arg(), alpha, 0.0);
      check_half(out, prod * alpha, absprod * std::abs(alpha), k);
    }
    {  // k == 0: an empty sum leaves beta * out (scaled through float32 for 16-bit types)
      INFO("k 0");
      Tensor out = c.to(kGpu);
      Tensor a0 = octo::zeros({batch, m, 0}, {.dtype = dt, .device = kGpu});
      Tensor b0 = octo::zeros({batch, 0, n}, {.dtype = dt, .device = kGpu});
      gpu.bmm(out.arg(), a0.arg(), b0.arg(), alpha, beta);
      check_half(out, c32 * beta, octo::abs(c32) * std::abs(beta), 0);
    }
    {  // linear: the bias is copied into the output and the product accumulates onto it (beta 1)
      Tensor x = randn_rounded({m, k}, dt), w = randn_rounded({n, k}, dt);
      Tensor bias = randn_rounded({n}, dt);
      Tensor out = octo::linear(x.to(kGpu), w.to(kGpu), bias.to(kGpu));
      auto [xw, absxw] = reference(x, w.t());
      Tensor bias32 = bias.to(octo::kFloat32);
      INFO("linear with bias");
      check_half(out, xw + bias32, absxw + octo::abs(bias32), k, octo::abs(xw) + octo::abs(bias32));
    }
  }
}

TEST_CASE("cuda float32 matmul: TF32 off is float32, on is TF32, and the switch restores",
          "[cuda][gemm][tf32]") {
  octo::manual_seed(14);
  REQUIRE_FALSE(octo::cuda::allow_tf32());  // the default: float32 means float32
  // K large, so TF32's input rounding (2^-11 relative per operand) shows: on random data the
  // normwise error of a TF32 product is ~5e-4, that of a float32 one ~1e-6 (well under 5e-5).
  const int64_t m = 512, k = 4096, n = 512;
  Tensor a = octo::randn({m, k}), b = octo::randn({k, n});
  Tensor ref = octo::matmul(a.to(octo::kFloat64), b.to(octo::kFloat64));
  Tensor absref = octo::matmul(octo::abs(a).to(octo::kFloat64), octo::abs(b).to(octo::kFloat64));
  Tensor ag = a.to(kGpu), bg = b.to(kGpu);

  Tensor off = octo::matmul(ag, bg);
  const double off_err = rel_error(off, ref);
  INFO("TF32 off: relative error " << off_err);
  CHECK(off_err < 5e-5);
  {  // elementwise: within the float32 summation bound 2 gamma_K |a| @ |b|
    const std::vector<double> g = values(off), r = values(ref), ar = values(absref);
    int bad = 0;
    for (size_t i = 0; i < g.size(); ++i)
      if (!(std::abs(g[i] - r[i]) <= 2.0 * double(k) * 0x1p-24 * ar[i])) ++bad;
    CHECK(bad == 0);
  }

  Tensor on;
  {
    Tf32Scope tf32(true);
    REQUIRE(octo::cuda::allow_tf32());
    on = octo::matmul(ag, bg);
  }
  const double on_err = rel_error(on, ref), diff = rel_error(on, off);
  INFO("TF32 on: relative error " << on_err << ", relative difference from off " << diff);
  CHECK(on_err < 1e-2);
  // TF32 tensor cores exist from Ampere (compute capability 8.0) on; before that cuBLAS computes
  // CUBLAS_COMPUTE_32F_FAST_TF32 in float32, and NVIDIA_TF32_OVERRIDE=0 turns TF32 off anywhere.
  const int major = compute_capability_major();
  const char* override_env = std::getenv("NVIDIA_TF32_OVERRIDE");
  if (major >= 8 && !(override_env && std::strcmp(override_env, "0") == 0)) {
    CHECK(diff > 5e-5);
  } else {
    WARN("TF32 difference not checked: compute capability " << major
                                                            << " or NVIDIA_TF32_OVERRIDE=0");
  }

  // Back off: the same float32 result as before, bit for bit.
  REQUIRE_FALSE(octo::cuda::allow_tf32());
  Tensor again = octo::matmul(ag, bg);
  const std::vector<double> first = values(off), second = values(again);
  CHECK(first == second);
}
