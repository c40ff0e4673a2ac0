// CUDA backend primitives against the CPU backend: elementwise (broadcast, non-contiguous, int64,
// bool), random (same seed -> same numbers), matmul/bmm (transposed and broadcast operands),
// reductions, softmax forward/backward, indexing, MLP gradients, and the dtypes not built.
#include "gpu/gpu_helpers.h"
#include "gpu/gpu_main.h"

#include <octo/octo.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

using octo::Device;
using octo::DeviceType;
using octo::DType;
using octo::Shape;
using octo::Tensor;

using namespace gpu_test;

namespace {

Tensor randn_cpu(const Shape& shape, DType dtype = octo::kFloat64) {
  return octo::randn(shape, {.dtype = dtype});
}

/// The shapes/layouts every elementwise test visits: the tensor, or a view making it strided.
struct Layout {
  std::string name;
  std::function<Tensor(const Tensor&)> view;  // applied to a base of shape base_shape
  Shape base_shape;
};
const std::vector<Layout> kLayouts = {
    {"scalar", [](const Tensor& t) { return t; }, {}},
    {"empty", [](const Tensor& t) { return t; }, {0, 3}},
    {"one", [](const Tensor& t) { return t; }, {1}},
    {"odd 1-d", [](const Tensor& t) { return t; }, {1001}},
    {"3-d", [](const Tensor& t) { return t; }, {4, 1, 7}},
    {"transposed", [](const Tensor& t) { return t.transpose(0, 1); }, {5, 6}},
    {"sliced", [](const Tensor& t) { return t.slice(1, 1, std::nullopt, 2); }, {3, 9, 2}},
};

}  // namespace

TEST_CASE("cuda unary ops match the cpu", "[cuda][ops]") {
  octo::manual_seed(1);
  using Fn = Tensor (*)(const Tensor&);
  const std::vector<std::pair<const char*, Fn>> exact = {
      {"neg", octo::neg}, {"relu", octo::relu}, {"abs", octo::abs}};
  const std::vector<std::pair<const char*, Fn>> approx = {
      {"exp", octo::exp}, {"tanh", octo::tanh}, {"sigmoid", octo::sigmoid}, {"log", octo::log}};
  for (DType dtype : {octo::kFloat32, octo::kFloat64}) {
    for (const Layout& l : kLayouts) {
      Tensor base = randn_cpu(l.base_shape, dtype);
      Tensor x = l.view(base), xg = l.view(base.to(kGpu));
      for (auto& [name, f] : exact) {
        INFO(name << " " << l.name << " " << dtype);
        check_match(f(xg), f(x));
      }
      for (auto& [name, f] : approx) {
        INFO(name << " " << l.name << " " << dtype);
        check_match(f(xg), f(x), dtype == octo::kFloat32 ? 1e-6 : 1e-14, 1e-30);
      }
    }
  }
  // int64 and scalar-parameter ops
  Tensor xi = octo::randint(-50, 50, {6, 5});
  check_match(octo::neg(xi.to(kGpu)), octo::neg(xi));
  check_match(octo::abs(xi.to(kGpu).t()), octo::abs(xi.t()));
  Tensor xf = randn_cpu({8, 3});
  check_match(octo::clamp(xf.to(kGpu), -0.5, 0.25), octo::clamp(xf, -0.5, 0.25));
  check_match(octo::pow(xf.to(kGpu), 2.0), octo::pow(xf, 2.0));
  check_match(octo::leaky_relu(xf.to(kGpu), 0.1), octo::leaky_relu(xf, 0.1));
  // affine may contract to one FMA on the GPU: within float rounding of the CPU's.
  check_match(octo::affine(xf.to(kGpu), -2.5, 0.75), octo::affine(xf, -2.5, 0.75), 1e-6, 1e-7);
  // data::normalize on a uint8 batch on the GPU: conversion, then one affine per channel.
  Tensor u8 = octo::randint(0, 256, {2, 3, 4, 5}).to(octo::kUInt8);
  const std::vector<double> mean{0.4, 0.5, 0.6}, stdev{0.2, 0.25, 0.3};
  check_match(octo::data::normalize(u8.to(kGpu), mean, stdev),
              octo::data::normalize(u8, mean, stdev), 1e-6, 1e-6);
}

TEST_CASE("cuda binary ops and where match the cpu with broadcasting", "[cuda][ops]") {
  octo::manual_seed(2);
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{}, {}}, {{0}, {1}}, {{7}, {}}, {{3, 1, 5}, {4, 5}}, {{2, 3}, {2, 3}}, {{1, 9}, {9, 1}}};
  for (DType dtype : {octo::kFloat32, octo::kFloat64}) {
    for (auto& [sa, sb] : shapes) {
      Tensor a = randn_cpu(sa, dtype), b = randn_cpu(sb, dtype);
      Tensor ag = a.to(kGpu), bg = b.to(kGpu);
      INFO(dtype);
      check_match(octo::add(ag, bg), octo::add(a, b));
      check_match(octo::sub(ag, bg, 2), octo::sub(a, b, 2));
      check_match(octo::mul(ag, bg), octo::mul(a, b));
      check_match(octo::div(ag, bg), octo::div(a, b));
      check_match(octo::maximum(ag, bg), octo::maximum(a, b));
      check_match(octo::gt(ag, bg), octo::gt(a, b));
      check_match(octo::eq(ag, ag), octo::eq(a, a));
      Tensor c = octo::gt(a, octo::zeros({}, {.dtype = dtype}));
      check_match(octo::where(c.to(kGpu), ag, bg), octo::where(c, a, b));
    }
  }
  // non-contiguous operands and int64
  Tensor a = randn_cpu({6, 4}), b = randn_cpu({4, 6});
  check_match(octo::mul(a.to(kGpu), b.to(kGpu).t()), octo::mul(a, b.t()));
  Tensor ia = octo::randint(-9, 9, {5, 1, 3}), ib = octo::randint(-9, 9, {4, 3});
  check_match(octo::add(ia.to(kGpu), ib.to(kGpu)), octo::add(ia, ib));
  check_match(octo::mul(ia.to(kGpu), ib.to(kGpu)), octo::mul(ia, ib));
}

TEST_CASE("cuda random fills equal the cpu's for the same seed", "[cuda][ops][random]") {
  for (const Shape& shape : {Shape{}, Shape{0}, Shape{1}, Shape{1001}, Shape{3, 4, 5}}) {
    for (DType dtype : {octo::kFloat32, octo::kFloat64}) {
      octo::manual_seed(42);
      Tensor u_gpu = octo::rand(shape, {.dtype = dtype, .device = kGpu});
      Tensor n_gpu = octo::randn(shape, {.dtype = dtype, .device = kGpu});
      octo::manual_seed(42);
      Tensor u_cpu = octo::rand(shape, {.dtype = dtype});
      Tensor n_cpu = octo::randn(shape, {.dtype = dtype});
      check_match(u_gpu, u_cpu);  // bit for bit: integer Philox + exact float arithmetic
      // Box-Muller uses log/cos, whose device versions may differ from glibc's by an ulp or two.
      check_match(n_gpu, n_cpu, dtype == octo::kFloat32 ? 1e-5 : 1e-13, 1e-6);
    }
    octo::manual_seed(7);
    Tensor i_gpu = octo::randint(-3, 1000, shape, {.dtype = octo::kInt64, .device = kGpu});
    octo::manual_seed(7);
    Tensor i_cpu = octo::randint(-3, 1000, shape, {.dtype = octo::kInt64});
    check_match(i_gpu, i_cpu);
  }
  // bernoulli (through dropout's mask) draws the same mask on both devices
  octo::manual_seed(3);
  Tensor d_gpu = octo::dropout(octo::ones({64, 33}, {.device = kGpu}), 0.3, true);
  octo::manual_seed(3);
  Tensor d_cpu = octo::dropout(octo::ones({64, 33}), 0.3, true);
  check_match(d_gpu, d_cpu);
}

TEST_CASE("cuda matmul (cuBLAS) matches the cpu", "[cuda][ops][linalg]") {
  octo::manual_seed(4);
  struct Case {
    Shape a, b;
    bool ta, tb;  // build the operand transposed, then transpose back (a column-major view)
  };
  const std::vector<Case> cases = {
      {{3, 4}, {4, 5}, false, false},    {{3, 4}, {4, 5}, true, false},
      {{3, 4}, {4, 5}, false, true},     {{1, 7}, {7, 1}, true, true},
      {{2, 3, 4}, {4, 6}, false, false}, {{2, 3, 4}, {2, 4, 6}, false, true},
      {{5, 0}, {0, 3}, false, false},    {{33, 65}, {65, 17}, false, false}};
  for (DType dtype : {octo::kFloat32, octo::kFloat64}) {
    for (const Case& c : cases) {
      auto make = [&](const Shape& s, bool t) {
        if (!t) return randn_cpu(s, dtype);
        Shape r = s;
        std::swap(r[r.size() - 1], r[r.size() - 2]);
        const int64_t nd = static_cast<int64_t>(r.size());
        return randn_cpu(r, dtype).transpose(nd - 1, nd - 2);
      };
      Tensor a = make(c.a, c.ta), b = make(c.b, c.tb);
      const double tol = dtype == octo::kFloat32 ? 1e-5 : 1e-12;
      check_match(octo::matmul(a.to(kGpu), b.to(kGpu)), octo::matmul(a, b), tol, tol);
    }
    // a strided slice (neither row- nor column-major) is copied to contiguous first
    Tensor a = randn_cpu({4, 10}, dtype).slice(1, 0, std::nullopt, 2);
    Tensor b = randn_cpu({5, 3}, dtype);
    const double tol = dtype == octo::kFloat32 ? 1e-5 : 1e-12;
    check_match(octo::matmul(a.to(kGpu), b.to(kGpu)), octo::matmul(a, b), tol, tol);
  }
}

TEST_CASE("cuda reductions match the cpu", "[cuda][ops][reduce]") {
  octo::manual_seed(5);
  for (DType dtype : {octo::kFloat32, octo::kFloat64}) {
    const double tol = dtype == octo::kFloat32 ? 1e-5 : 1e-12;
    for (const Layout& l : kLayouts) {
      Tensor base = randn_cpu(l.base_shape, dtype);
      Tensor x = l.view(base), xg = l.view(base.to(kGpu));
      INFO(l.name << " " << dtype);
      check_match(octo::sum(xg), octo::sum(x), tol, tol);
      check_match(octo::mean(xg), octo::mean(x), tol, tol);
      if (x.numel() > 0) {
        check_match(octo::max(xg), octo::max(x));
        check_match(octo::min(xg), octo::min(x));
      }
      if (x.dim() >= 2) {
        check_match(octo::sum(xg, {0}), octo::sum(x, {0}), tol, tol);
        check_match(octo::sum(xg, {1}, true), octo::sum(x, {1}, true), tol, tol);
        check_match(octo::var(xg, {0}), octo::var(x, {0}), tol, tol);
        check_match(octo::prod(xg, 1), octo::prod(x, 1), tol, tol);
        if (x.numel() > 0) {
          check_match(octo::argmax(xg, 1), octo::argmax(x, 1));
          check_match(octo::argmin(xg, 0), octo::argmin(x, 0));
        }
      }
    }
  }
  Tensor xi = octo::randint(-1000, 1000, {17, 9});
  check_match(octo::sum(xi.to(kGpu), {1}), octo::sum(xi, {1}));
  // ties resolve to the first index, as on the cpu
  Tensor ties = octo::tensor({1, 3, 3, 0, 3}, {.dtype = octo::kFloat32});
  check_match(octo::argmax(ties.to(kGpu), 0), octo::argmax(ties, 0));
}

TEST_CASE("cuda softmax and log_softmax match the cpu, forward and backward",
          "[cuda][ops][softmax]") {
  octo::manual_seed(6);
  for (DType dtype : {octo::kFloat32, octo::kFloat64}) {
    const double tol = dtype == octo::kFloat32 ? 1e-5 : 1e-12;
    for (const Shape& shape : {Shape{7}, Shape{3, 5}, Shape{2, 300, 3}}) {
      for (int64_t dim = 0; dim < int64_t(shape.size()); ++dim) {
        for (bool log : {false, true}) {
          Tensor x = randn_cpu(shape, dtype).requires_grad_();
          Tensor xg = x.detach().to(kGpu).requires_grad_();
          Tensor w = randn_cpu(shape, dtype);
          Tensor y = log ? octo::log_softmax(x, dim) : octo::softmax(x, dim);
          Tensor yg = log ? octo::log_softmax(xg, dim) : octo::softmax(xg, dim);
          INFO(dtype << " dim " << dim << " log " << log);
          check_match(yg.detach(), y.detach(), tol, tol);
          octo::sum(octo::mul(y, w)).backward();
          octo::sum(octo::mul(yg, w.to(kGpu))).backward();
          check_match(xg.grad(), x.grad(), tol, tol);
        }
      }
    }
  }
}

TEST_CASE("cuda indexing matches the cpu", "[cuda][ops][index]") {
  octo::manual_seed(8);
  Tensor x = randn_cpu({6, 5, 4});
  Tensor idx = octo::randint(0, 5, {9});
  for (int64_t dim : {0, 1, 2}) {
    Tensor i = octo::randint(0, x.size(dim), {7});
    check_match(octo::index_select(x.to(kGpu), dim, i.to(kGpu)), octo::index_select(x, dim, i));
  }
  check_match(octo::index_select(x.to(kGpu).transpose(0, 2), 1, idx.to(kGpu)),
              octo::index_select(x.transpose(0, 2), 1, idx));
  Tensor gi = octo::randint(0, 5, {6, 3, 4});
  check_match(octo::gather(x.to(kGpu), 1, gi.to(kGpu)), octo::gather(x, 1, gi));
  // scatter_add with repeated indices (atomic adds): equal up to summation order
  Tensor src = randn_cpu({6, 3, 4});
  check_match(octo::scatter_add(x.to(kGpu), 1, gi.to(kGpu), src.to(kGpu)),
              octo::scatter_add(x, 1, gi, src), 1e-12, 1e-12);
  // index_select's backward is index_add
  Tensor xr = x.detach().requires_grad_(), xgr = x.to(kGpu).requires_grad_();
  octo::sum(octo::index_select(xr, 1, idx)).backward();
  octo::sum(octo::index_select(xgr, 1, idx.to(kGpu))).backward();
  check_match(xgr.grad(), xr.grad());
  // out-of-range indices raise IndexError, as on the cpu
  Tensor bad = octo::tensor({0, 5}, {.dtype = octo::kInt64}).to(kGpu);
  CHECK_THROWS_AS(octo::index_select(x.to(kGpu), 1, bad), octo::IndexError);
  CHECK_THROWS_WITH(octo::index_select(x.to(kGpu), 1, bad),
                    Catch::Contains("out of bounds for dimension 1 with size 5"));
}

TEST_CASE("cuda MLP gradients match the cpu", "[cuda][ops][autograd]") {
  octo::manual_seed(9);
  for (DType dtype : {octo::kFloat32, octo::kFloat64}) {
    const double tol = dtype == octo::kFloat32 ? 1e-4 : 1e-11;
    std::vector<Tensor> cpu = {randn_cpu({16, 8}, dtype), randn_cpu({16}, dtype),
                               randn_cpu({4, 16}, dtype), randn_cpu({4}, dtype)};
    std::vector<Tensor> gpu;
    for (Tensor& p : cpu) {
      gpu.push_back(p.to(kGpu).requires_grad_());
      p.requires_grad_();
    }
    Tensor x = randn_cpu({10, 8}, dtype), target = randn_cpu({10, 4}, dtype);
    auto loss = [](const std::vector<Tensor>& p, const Tensor& x, const Tensor& t) {
      Tensor h = octo::tanh(octo::linear(x, p[0], p[1]));
      Tensor y = octo::linear(octo::relu(h), p[2], p[3]);
      Tensor d = octo::sub(octo::softmax(y, 1), t);
      return octo::mean(octo::mul(d, d));
    };
    Tensor lc = loss(cpu, x, target), lg = loss(gpu, x.to(kGpu), target.to(kGpu));
    check_match(lg.detach(), lc.detach(), tol, tol);
    lc.backward();
    lg.backward();
    for (size_t i = 0; i < cpu.size(); ++i) check_match(gpu[i].grad(), cpu[i].grad(), tol, tol);
  }
}

TEST_CASE("cuda elementwise dtypes that are not built throw NotImplementedError", "[cuda][ops]") {
  // int32 tensors exist on the GPU (storage, copies) but the elementwise kernels are built for
  // float32, float64, bfloat16, float16, int64 and bool only.
  Tensor h = octo::ones({3}, {.dtype = octo::kInt32, .device = kGpu});
  CHECK_THROWS_AS(octo::add(h, h), octo::NotImplementedError);
  CHECK_THROWS_WITH(octo::add(h, h), Catch::Contains("int32"));
}
