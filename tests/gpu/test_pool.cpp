// CUDA max and average pooling against the CPU backend: forward values and argmax indices,
// backward, over kernel/stride/padding/dilation/ceil_mode/count_include_pad, NaN inputs,
// non-contiguous inputs and outputs, an empty batch, float32 and float64.
//
// Tolerance. Both backends run the window math of kernels/pool_math.h: the same sums in the
// element type, in the same order, with one IEEE division per window (or per contribution in the
// backward) and nothing for nvcc to contract into an FMA (and -fmad=false besides). So the results
// are expected to match bit for bit. Max pooling's values and indices, which involve no
// arithmetic at all, are compared exactly; sums (average pooling, every backward) are held to
// 1e-12 relative for float64 and 1e-6 for float32, the accuracy the kernels promise, so that a
// different but still correctly rounded summation would not count as a failure.
#include "gpu/gpu_helpers.h"
#include "gpu/gpu_main.h"

#include <octo/octo.h>

#include <array>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kernels/backend.h"

using octo::Device;
using octo::DeviceType;
using octo::DType;
using octo::Shape;
using octo::Tensor;
using octo::kernels::Pool2dParams;

using namespace gpu_test;

namespace {

double rtol_for(DType dtype) { return dtype == octo::kFloat64 ? 1e-12 : 1e-6; }

/// Integer tensors (argmax indices) equal exactly.
void check_equal_int(const Tensor& gpu, const Tensor& cpu) {
  REQUIRE(gpu.device() == kGpu);
  REQUIRE(gpu.sizes() == cpu.sizes());
  const std::vector<int64_t> g = gpu.to(octo::kCPU).contiguous().to_vector<int64_t>();
  const std::vector<int64_t> c = cpu.contiguous().to_vector<int64_t>();
  size_t bad = 0;
  for (size_t i = 0; i < g.size(); ++i) bad += g[i] != c[i];
  INFO(bad << " of " << g.size() << " indices differ");
  CHECK(bad == 0);
}

struct Case {
  std::string name;
  Shape shape;  // N, C, H, W
  std::array<int64_t, 2> kernel, stride, padding, dilation;
  bool ceil_mode, count_include_pad;

  bool dilated() const { return dilation[0] != 1 || dilation[1] != 1; }
  Pool2dParams params() const {
    Pool2dParams p;
    for (int i = 0; i < 2; ++i) {
      p.kernel[i] = kernel[i], p.stride[i] = stride[i];
      p.padding[i] = padding[i], p.dilation[i] = dilation[i];
    }
    p.ceil_mode = ceil_mode, p.count_include_pad = count_include_pad;
    return p;
  }
  Tensor max(const Tensor& x) const {
    return octo::max_pool2d(x, kernel, stride, padding, dilation, ceil_mode);
  }
  Tensor avg(const Tensor& x) const {
    return octo::avg_pool2d(x, kernel, stride, padding, ceil_mode, count_include_pad);
  }
};

const std::vector<Case> kCases = {
    {"k2 s2", {2, 3, 8, 8}, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false, true},
    {"k3 s1 pad1", {2, 3, 7, 9}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, false, true},
    {"k3 s2 pad1 ceil", {2, 2, 8, 7}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, true, true},
    {"k3 s2 pad1 ceil no-pad-count", {2, 2, 8, 7}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, true, false},
    {"k2 s1 ceil", {1, 3, 5, 6}, {2, 2}, {1, 1}, {0, 0}, {1, 1}, true, true},
    {"k2 s2 pad1 ceil (drops a window)", {1, 3, 5, 5}, {2, 2}, {2, 2}, {1, 1}, {1, 1}, true, true},
    {"k2x3 s1x2 pad1 no-pad-count", {2, 2, 6, 9}, {2, 3}, {1, 2}, {1, 1}, {1, 1}, false, false},
    {"k3 s2 pad1 dilation2", {2, 2, 10, 9}, {3, 3}, {2, 2}, {1, 1}, {2, 2}, false, true},
    {"k3 s2 pad1 dilation2 ceil", {1, 2, 11, 10}, {3, 3}, {2, 2}, {1, 1}, {2, 2}, true, true},
    {"k2 s1 dilation2", {2, 3, 7, 7}, {2, 2}, {1, 1}, {0, 0}, {2, 2}, false, true},
    {"k3 s2 pad1 wide", {4, 16, 33, 31}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false, true},
};

/// Random values for an [N, C, H, W] input on the CPU, NaN at every 7th element when asked. With
/// channels_last the tensor returned is the [N, H, W, C] storage, to be viewed through
/// permute({0, 3, 1, 2}).
Tensor make_input(const Shape& s, DType dtype, bool with_nan, bool channels_last) {
  const Shape stored = channels_last ? Shape{s[0], s[2], s[3], s[1]} : s;
  std::vector<double> v = octo::randn(stored, {.dtype = octo::kFloat64}).to_vector<double>();
  if (with_nan)
    for (size_t i = 3; i < v.size(); i += 7) v[i] = std::numeric_limits<double>::quiet_NaN();
  return octo::tensor(v, stored, {.dtype = dtype});
}

/// The public op `pool` (max or avg) on the CPU and on cuda:0, forward and backward, from the
/// same stored input (a leaf; with channels_last the op sees its permuted view).
template <typename Pool>
void compare_op(const char* what, const Case& c, DType dtype, bool with_nan, bool channels_last,
                Pool pool) {
  INFO(what << " " << c.name << " " << dtype << (with_nan ? " nan" : "")
            << (channels_last ? " channels_last" : ""));
  const Tensor stored = make_input(c.shape, dtype, with_nan, channels_last);
  Tensor leaf_cpu = stored.clone().requires_grad_();
  Tensor leaf_gpu = stored.to(kGpu).requires_grad_();
  auto view = [&](const Tensor& t) { return channels_last ? t.permute({0, 3, 1, 2}) : t; };
  Tensor y_cpu = pool(view(leaf_cpu)), y_gpu = pool(view(leaf_gpu));
  // max pooling's values are copied, not computed: exact; averages are sums.
  check_match(y_gpu, y_cpu, std::string(what) == "max" ? 0.0 : rtol_for(dtype),
              std::string(what) == "max" ? 0.0 : rtol_for(dtype));

  const Tensor gy = octo::randn(y_cpu.sizes(), {.dtype = dtype});
  y_cpu.backward(gy);
  y_gpu.backward(gy.to(kGpu));
  REQUIRE(leaf_gpu.grad().defined());
  check_match(leaf_gpu.grad(), leaf_cpu.grad(), rtol_for(dtype), rtol_for(dtype));
}

/// t filled with NaN: outputs the kernels must overwrite in full.
Tensor nan_filled(const Shape& s, DType dtype, const Device& device) {
  return octo::full(s, std::numeric_limits<double>::quiet_NaN(),
                    {.dtype = dtype, .device = device});
}

/// NHWC storage viewed as NCHW, filled with NaN (non-contiguous, garbage-filled output).
Tensor nan_channels_last(const Shape& s, DType dtype, const Device& device) {
  return nan_filled({s[0], s[2], s[3], s[1]}, dtype, device).permute({0, 3, 1, 2});
}

}  // namespace

TEST_CASE("cuda max_pool2d and avg_pool2d match the cpu, forward and backward", "[cuda][pool]") {
  octo::manual_seed(1);
  for (const Case& c : kCases) {
    for (DType dtype : {octo::kFloat32, octo::kFloat64}) {
      for (bool with_nan : {false, true}) {
        for (bool channels_last : {false, true}) {
          compare_op("max", c, dtype, with_nan, channels_last,
                     [&](const Tensor& x) { return c.max(x); });
          if (!c.dilated())
            compare_op("avg", c, dtype, with_nan, channels_last,
                       [&](const Tensor& x) { return c.avg(x); });
        }
      }
    }
  }
}

TEST_CASE("cuda pooling primitives write every output, indices equal the cpu's", "[cuda][pool]") {
  octo::manual_seed(2);
  auto& cpu = octo::kernels::cpu_backend();
  auto& gpu = octo::kernels::backend(kGpu);
  for (const Case& c : kCases) {
    for (DType dtype : {octo::kFloat32, octo::kFloat64}) {
      for (bool with_nan : {false, true}) {
        INFO(c.name << " " << dtype << (with_nan ? " nan" : ""));
        const Pool2dParams p = c.params();
        const Tensor stored = make_input(c.shape, dtype, with_nan, /*channels_last=*/true);
        const Tensor x = stored.permute({0, 3, 1, 2});
        const Tensor xg = stored.to(kGpu).permute({0, 3, 1, 2});  // non-contiguous on both
        const Shape ys = c.max(x).sizes();
        const Shape xs = c.shape;

        // max: NaN-filled, channels-last outputs and grad_input on the GPU
        Tensor y = octo::empty(ys, {.dtype = dtype});
        Tensor idx = octo::empty(ys, {.dtype = octo::kInt64});
        cpu.max_pool2d_forward(y.arg(), idx.arg(), x.arg(), p);
        Tensor yg = nan_channels_last(ys, dtype, kGpu);
        Tensor idxg =
            octo::full({ys[0], ys[2], ys[3], ys[1]}, -7, {.dtype = octo::kInt64, .device = kGpu})
                .permute({0, 3, 1, 2});
        gpu.max_pool2d_forward(yg.arg(), idxg.arg(), xg.arg(), p);
        check_match(yg, y, 0.0, 0.0);
        check_equal_int(idxg, idx);

        const Tensor gy = octo::randn(ys, {.dtype = dtype});
        Tensor gx = octo::empty(xs, {.dtype = dtype});
        cpu.max_pool2d_backward(gx.arg(), gy.arg(), idx.arg(), p);
        Tensor gxg = nan_channels_last(xs, dtype, kGpu);
        const Tensor gyg = gy.to(kGpu);
        gpu.max_pool2d_backward(gxg.arg(), gyg.arg(), idxg.arg(), p);
        check_match(gxg, gx, rtol_for(dtype), rtol_for(dtype));

        if (c.dilated()) continue;
        const Shape as = c.avg(x).sizes();
        Tensor a = octo::empty(as, {.dtype = dtype});
        cpu.avg_pool2d_forward(a.arg(), x.arg(), p);
        Tensor ag = nan_channels_last(as, dtype, kGpu);
        gpu.avg_pool2d_forward(ag.arg(), xg.arg(), p);
        check_match(ag, a, rtol_for(dtype), rtol_for(dtype));

        // a strided grad_out: [N, C, OW, OH] storage, transposed
        const Tensor ga =
            octo::randn({as[0], as[1], as[3], as[2]}, {.dtype = dtype}).permute({0, 1, 3, 2});
        const Tensor gag = ga.to(kGpu);
        Tensor gxa = octo::empty(xs, {.dtype = dtype});
        cpu.avg_pool2d_backward(gxa.arg(), ga.arg(), p);
        Tensor gxag = nan_filled(xs, dtype, kGpu);
        gpu.avg_pool2d_backward(gxag.arg(), gag.arg(), p);
        check_match(gxag, gxa, rtol_for(dtype), rtol_for(dtype));
      }
    }
  }
}

TEST_CASE("cuda pooling handles an empty batch", "[cuda][pool]") {
  for (DType dtype : {octo::kFloat32, octo::kFloat64}) {
    INFO(dtype);
    Tensor x_cpu = octo::randn({0, 3, 6, 6}, {.dtype = dtype}).requires_grad_();
    Tensor x_gpu = octo::randn({0, 3, 6, 6}, {.dtype = dtype, .device = kGpu}).requires_grad_();
    Tensor m_cpu = octo::max_pool2d(x_cpu, {3, 3}, {2, 2}, {1, 1});
    Tensor m_gpu = octo::max_pool2d(x_gpu, {3, 3}, {2, 2}, {1, 1});
    Tensor a_cpu = octo::avg_pool2d(x_cpu, {2, 2});
    Tensor a_gpu = octo::avg_pool2d(x_gpu, {2, 2});
    REQUIRE(m_gpu.sizes() == Shape{0, 3, 3, 3});
    REQUIRE(a_gpu.sizes() == Shape{0, 3, 3, 3});
    check_match(m_gpu, m_cpu, 0.0, 0.0);
    check_match(a_gpu, a_cpu, 0.0, 0.0);
    octo::add(octo::sum(m_gpu), octo::sum(a_gpu)).backward();
    octo::add(octo::sum(m_cpu), octo::sum(a_cpu)).backward();
    REQUIRE(x_gpu.grad().defined());
    check_match(x_gpu.grad(), x_cpu.grad(), 0.0, 0.0);
  }
}

TEST_CASE("cuda pooling covers more elements than one grid (grid-stride loops)", "[cuda][pool]") {
  // 17.3M input elements: the backward launches one thread per input element, more than the
  // 65536 blocks x 256 threads of one grid, so its loop wraps around.
  octo::manual_seed(3);
  const Case c{"k2 s2 large", {4, 16, 520, 520}, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false, true};
  compare_op("max", c, octo::kFloat32, false, false, [&](const Tensor& x) { return c.max(x); });
  compare_op("avg", c, octo::kFloat32, false, false, [&](const Tensor& x) { return c.avg(x); });
}

TEST_CASE("cuda pooling rejects dtypes it is not built for", "[cuda][pool]") {
  auto& gpu = octo::kernels::backend(kGpu);
  Pool2dParams p;
  p.kernel[0] = p.kernel[1] = p.stride[0] = p.stride[1] = 2;
  // The kernels throw before reading anything, so the tensors may stay uninitialised. (bfloat16
  // and float16 run on staged float32 copies: tests/gpu/test_half.cpp.)
  Tensor x = octo::empty({1, 1, 4, 4}, {.dtype = octo::kInt32, .device = kGpu});
  Tensor y = octo::empty({1, 1, 2, 2}, {.dtype = octo::kInt32, .device = kGpu});
  Tensor idx = octo::empty({1, 1, 2, 2}, {.dtype = octo::kInt64, .device = kGpu});
  REQUIRE_THROWS_AS(gpu.max_pool2d_forward(y.arg(), idx.arg(), x.arg(), p),
                    octo::NotImplementedError);
  REQUIRE_THROWS_WITH(gpu.avg_pool2d_forward(y.arg(), x.arg(), p),
                      Catch::Contains("avg_pool2d_forward") && Catch::Contains("int32"));
  REQUIRE_THROWS_WITH(gpu.max_pool2d_backward(x.arg(), y.arg(), idx.arg(), p),
                      Catch::Contains("int32"));
  REQUIRE_THROWS_WITH(gpu.avg_pool2d_backward(x.arg(), y.arg(), p), Catch::Contains("int32"));
}
