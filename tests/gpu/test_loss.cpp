// The fused cross-entropy on CUDA against the CPU backend: forward and backward (logits and weight
// gradients), F::cross_entropy's reductions and 4-d inputs, -inf/NaN rows, and bad targets.
#include "gpu/gpu_main.h"

#include <octo/octo.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "autograd/ops/loss.h"

using octo::Device;
using octo::DeviceType;
using octo::DType;
using octo::Shape;
using octo::Tensor;
namespace F = octo::nn::functional;

namespace {

const Device kGpu(DeviceType::CUDA, 0);

std::vector<double> values(const Tensor& t) {
  return t.to(octo::kCPU, octo::kFloat64).contiguous().to_vector<double>();
}

/// gpu (a CUDA tensor) equals cpu within tol * (1 + |cpu|) elementwise; NaN matches NaN and an
/// infinity the same infinity.
void check_match(const Tensor& gpu, const Tensor& cpu, double tol, const char* what) {
  REQUIRE(gpu.device() == kGpu);
  REQUIRE(cpu.device() == octo::kCPU);
  REQUIRE(gpu.sizes() == cpu.sizes());
  REQUIRE(gpu.dtype() == cpu.dtype());
  const std::vector<double> g = values(gpu), c = values(cpu);
  size_t bad = g.size();
  for (size_t i = 0; i < g.size() && bad == g.size(); ++i) {
    const bool ok = std::isnan(c[i])   ? std::isnan(g[i])
                    : std::isinf(c[i]) ? g[i] == c[i]
                                       : std::fabs(g[i] - c[i]) <= tol * (1.0 + std::fabs(c[i]));
    if (!ok) bad = i;
  }
  INFO(what << ": first mismatch at element " << bad << " of " << g.size() << ": gpu "
            << (bad < g.size() ? g[bad] : 0.0) << ", cpu " << (bad < g.size() ? c[bad] : 0.0));
  CHECK(bad == g.size());
}

/// A leaf that requires grad, with `values` on `device`. Detached first: on the CPU, to() returns
/// `values` itself, and marking that would make the later GPU copy a non-leaf (whose grad() stays
/// undefined, as in PyTorch).
Tensor leaf_on(const Tensor& values, Device device) {
  Tensor t = values.detach().to(device);
  t.requires_grad_();
  return t;
}

}  // namespace

TEST_CASE("cuda cross_entropy_per_sample matches the cpu, forward and backward", "[cuda][loss]") {
  struct Size {
    int64_t N, C;
  };
  // C = 1; N = 0; C above one block (threads stride the row); N above the grid (blocks stride).
  const std::vector<Size> sizes = {{6, 5}, {4, 1}, {0, 4}, {33, 300}, {5, 1000}, {70000, 3}};
  for (DType dtype : {octo::kFloat32, octo::kFloat64}) {
    const double tol = dtype == octo::kFloat32 ? 1e-5 : 1e-12;
    for (const Size& s : sizes) {
      for (bool weighted : {false, true}) {
        for (bool ignore : {false, true}) {
          for (double e : {0.0, 0.2}) {
            for (bool transposed : {false, true}) {
              INFO("dtype " << dtype << " N " << s.N << " C " << s.C << " weighted " << weighted
                            << " ignore " << ignore << " e " << e << " transposed " << transposed);
              const int64_t ii = ignore ? 0 : -100;
              Tensor base = transposed ? octo::randn({s.C, s.N}, {.dtype = dtype}) * 3.0
                                       : octo::randn({s.N, s.C}, {.dtype = dtype}) * 3.0;
              Tensor y = octo::randint(0, s.C, {s.N});
              Tensor w = octo::rand({s.C}, {.dtype = dtype}) + 0.2;
              Tensor g = octo::randn({s.N}, {.dtype = dtype});
              Tensor xc = leaf_on(base, octo::kCPU), xg = leaf_on(base, kGpu);
              Tensor wc = weighted ? leaf_on(w, octo::kCPU) : Tensor();
              Tensor wg = weighted ? leaf_on(w, kGpu) : Tensor();
              auto x_of = [&](const Tensor& t) { return transposed ? t.t() : t; };
              Tensor lc = octo::cross_entropy_per_sample(x_of(xc), y, wc, ii, e);
              Tensor lg = octo::cross_entropy_per_sample(x_of(xg), y.to(kGpu), wg, ii, e);
              check_match(lg, lc, tol, "loss");
              octo::sum(lc * g).backward();
              octo::sum(lg * g.to(kGpu)).backward();
              check_match(xg.grad(), xc.grad(), tol, "logits grad");
              if (weighted) check_match(wg.grad(), wc.grad(), tol * 10, "weight grad");
            }
          }
        }
      }
    }
  }
}

TEST_CASE("cuda F::cross_entropy matches the cpu for every reduction and 4-d input",
          "[cuda][loss]") {
  for (DType dtype : {octo::kFloat32, octo::kFloat64}) {
    const double tol = dtype == octo::kFloat32 ? 1e-5 : 1e-12;
    for (const char* red : {"none", "sum", "mean"}) {
      INFO("dtype " << dtype << " reduction " << red);
      Tensor base = octo::randn({3, 5, 4, 2}, {.dtype = dtype});
      Tensor y = octo::randint(0, 5, {3, 4, 2});
      y.narrow(1, 0, 1).fill_(2);  // ignored below
      Tensor w = octo::rand({5}, {.dtype = dtype}) + 0.5;
      F::CrossEntropyOptions oc{
          .weight = w, .ignore_index = 2, .reduction = red, .label_smoothing = 0.1};
      F::CrossEntropyOptions og = oc;
      og.weight = w.to(kGpu);
      Tensor xc = leaf_on(base, octo::kCPU), xg = leaf_on(base, kGpu);
      Tensor lc = F::cross_entropy(xc, y, oc);
      Tensor lg = F::cross_entropy(xg, y.to(kGpu), og);
      check_match(lg, lc, tol, "loss");
      octo::sum(lc).backward();
      octo::sum(lg).backward();
      check_match(xg.grad(), xc.grad(), tol, "grad");
    }
  }
}

TEST_CASE("cuda cross_entropy: -inf and NaN rows like the cpu; bad targets raise IndexError",
          "[cuda][loss]") {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  for (DType dtype : {octo::kFloat32, octo::kFloat64}) {
    INFO("dtype " << dtype);
    Tensor x = octo::tensor({-inf, 1.0, 2.0, 0.5, -inf, 1.5, -inf, -inf, -inf, 1.0, nan, 0.0},
                            {.dtype = dtype})
                   .view({4, 3});
    Tensor y = octo::from_vector<int64_t>({0, 0, 1, 2}, {4});
    for (double e : {0.0, 0.1}) {
      Tensor xc = leaf_on(x, octo::kCPU), xg = leaf_on(x, kGpu);
      Tensor lc = octo::cross_entropy_per_sample(xc, y, {}, -100, e);
      Tensor lg = octo::cross_entropy_per_sample(xg, y.to(kGpu), {}, -100, e);
      check_match(lg, lc, 1e-6, "loss");
      octo::sum(lc).backward();
      octo::sum(lg).backward();
      check_match(xg.grad(), xc.grad(), 1e-6, "grad");
    }
  }
  // A bad target: IndexError naming it and C, after one synchronisation; the ignored value is
  // never range-checked.
  Tensor x = octo::randn({5, 4}, {.dtype = octo::kFloat64}).to(kGpu);
  Tensor bad = octo::from_vector<int64_t>({0, 1, 7, 2, 3}, {5}).to(kGpu);
  try {
    octo::cross_entropy_per_sample(x, bad);
    FAIL("expected an IndexError");
  } catch (const octo::IndexError& err) {
    CHECK_THAT(std::string(err.what()),
               Catch::Contains("cross_entropy: target 7 is out of bounds for 4 classes"));
  }
  Tensor neg = octo::from_vector<int64_t>({0, -1, 1, 2, 3}, {5}).to(kGpu);
  CHECK_THROWS_AS(F::cross_entropy(x, neg), octo::IndexError);
  Tensor ignored = octo::from_vector<int64_t>({0, 9, 1, 9, 3}, {5}).to(kGpu);
  CHECK_NOTHROW(F::cross_entropy(x, ignored, {.ignore_index = 9}));
  // The stream is still usable afterwards.
  CHECK(std::isfinite(F::cross_entropy(x, ignored, {.ignore_index = 9}).item<double>()));
}
