// Matrix products against a naive triple loop in double: the bmm kernel (layouts, alpha/beta,
// broadcast batches, threading) and the mm / bmm / matmul / linear ops (shapes, dtypes, errors).
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include <octo/octo.h>

#include "kernels/backend.h"

using octo::Shape;
using octo::Tensor;

namespace {

/// out[b] = a[b] @ b_[b] for 3-d tensors of any strides, in double (to_vector gives row-major).
std::vector<double> ref_bmm(const Tensor& a, const Tensor& b) {
  auto av = a.to_vector<double>(), bv = b.to_vector<double>();
  int64_t B = a.size(0), M = a.size(1), K = a.size(2), N = b.size(2);
  std::vector<double> out(static_cast<size_t>(B * M * N), 0.0);
  for (int64_t p = 0; p < B; ++p)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k) s += av[(p * M + i) * K + k] * bv[(p * K + k) * N + j];
        out[(p * M + i) * N + j] = s;
      }
  return out;
}

/// Relative comparison scaled by the product's magnitude (sqrt(K) for random normal data).
void check_close(const std::vector<double>& got, const std::vector<double>& want, octo::DType dt,
                 int64_t K) {
  REQUIRE(got.size() == want.size());
  double eps = dt == octo::kFloat32 ? 1e-5 : 1e-12;
  double tol = eps * (1.0 + std::sqrt(static_cast<double>(K))) * 4;
  size_t worst = 0;
  double worst_excess = -1;
  for (size_t i = 0; i < got.size(); ++i) {
    double excess = std::abs(got[i] - want[i]) / (1.0 + std::abs(want[i]));
    if (std::isnan(excess)) excess = std::numeric_limits<double>::infinity();
    if (excess > worst_excess) {
      worst_excess = excess;
      worst = i;
    }
  }
  if (got.empty()) return;
  INFO("worst element " << worst << ": got " << got[worst] << ", want " << want[worst]);
  REQUIRE(worst_excess <= tol);
}

Tensor randn(const Shape& shape, octo::DType dt) { return octo::randn(shape, {.dtype = dt}); }

/// A [B, R, C] tensor laid out in one of several ways: 0 contiguous, 1 transposed storage
/// (column-major matrices), 2 a strided slice (step 2 in both matrix dims: no unit stride),
/// 3 batch-major-last permutation, 4 rows broadcast (row stride 0), 5 columns broadcast (column
/// stride 0). Layouts 4 and 5 are read-only: BLAS cannot express them, so they take the Eigen path.
Tensor make_operand(int64_t B, int64_t R, int64_t C, int layout, octo::DType dt) {
  switch (layout) {
    case 0:
      return randn({B, R, C}, dt);
    case 1:
      return randn({B, C, R}, dt).transpose(1, 2);
    case 2:
      return randn({B, 2 * R + 1, 2 * C}, dt)
          .slice(1, 1, std::nullopt, 2)
          .slice(2, 0, std::nullopt, 2);
    case 3:
      return randn({R, C, B}, dt).permute({2, 0, 1});
    case 4:
      return randn({B, 1, C}, dt).expand({B, R, C});
    default:
      return randn({B, R, 1}, dt).expand({B, R, C});
  }
}

const octo::DType kFloatTypes[] = {octo::kFloat32, octo::kFloat64};

}  // namespace

TEST_CASE("bmm kernel matches a naive loop for every operand layout") {
  octo::manual_seed(1);
  auto& backend = octo::kernels::cpu_backend();
  const std::vector<std::array<int64_t, 4>> shapes = {
      {1, 1, 1, 1}, {2, 3, 5, 7}, {3, 1, 4, 1}, {1, 17, 9, 13}, {4, 8, 1, 8}, {2, 33, 65, 31}};
  for (auto dt : kFloatTypes)
    for (auto [B, M, K, N] : shapes)
      for (int la = 0; la < 6; ++la)
        for (int lb = 0; lb < 6; ++lb)
          for (int lo = 0; lo < 3; ++lo) {
            INFO("dtype " << dt << " B=" << B << " M=" << M << " K=" << K << " N=" << N
                          << " layouts " << la << lb << lo);
            Tensor a = make_operand(B, M, K, la, dt), b = make_operand(B, K, N, lb, dt);
            Tensor out = make_operand(B, M, N, lo, dt);
            backend.bmm(out.arg(), a.arg(), b.arg(), 1.0, 0.0);
            check_close(out.to_vector<double>(), ref_bmm(a, b), dt, K);
          }
}

TEST_CASE("bmm kernel honours alpha and beta; beta == 0 ignores NaNs in out") {
  octo::manual_seed(2);
  auto& backend = octo::kernels::cpu_backend();
  // Small (coefficient-wise), matrix-vector, GEMM and panel-split (Note [GEMM threads]) paths.
  const std::vector<std::array<int64_t, 4>> shapes = {
      {3, 6, 5, 4}, {2, 9, 7, 1}, {2, 1, 7, 9}, {2, 40, 30, 50}, {1, 150, 100, 140}};
  for (auto dt : kFloatTypes)
    for (auto [B, M, K, N] : shapes)
      for (int lo = 0; lo < 3; ++lo) {
        INFO("dtype " << dt << " B=" << B << " M=" << M << " K=" << K << " N=" << N
                      << " out layout " << lo);
        Tensor a = randn({B, M, K}, dt), b = randn({B, K, N}, dt);
        Tensor out = make_operand(B, M, N, lo, dt);
        auto before = out.to_vector<double>();
        backend.bmm(out.arg(), a.arg(), b.arg(), 2.5, 0.5);
        auto prod = ref_bmm(a, b);
        std::vector<double> want(prod.size());
        for (size_t i = 0; i < want.size(); ++i) want[i] = 2.5 * prod[i] + 0.5 * before[i];
        check_close(out.to_vector<double>(), want, dt, K);

        // beta == 1 accumulates.
        before = out.to_vector<double>();
        backend.bmm(out.arg(), a.arg(), b.arg(), -1.0, 1.0);
        for (size_t i = 0; i < want.size(); ++i) want[i] = before[i] - prod[i];
        check_close(out.to_vector<double>(), want, dt, K);

        // beta == 0 overwrites, even NaN.
        out.fill_(std::numeric_limits<double>::quiet_NaN());
        backend.bmm(out.arg(), a.arg(), b.arg(), 1.0, 0.0);
        check_close(out.to_vector<double>(), prod, dt, K);
      }
}

TEST_CASE("bmm kernel: empty inner dim gives beta * out; empty outer dims write nothing") {
  auto& backend = octo::kernels::cpu_backend();
  for (auto dt : kFloatTypes) {
    Tensor a = octo::empty({2, 3, 0}, {.dtype = dt}), b = octo::empty({2, 0, 4}, {.dtype = dt});
    Tensor out = octo::full({2, 3, 4}, std::numeric_limits<double>::quiet_NaN(), {.dtype = dt});
    backend.bmm(out.arg(), a.arg(), b.arg(), 1.0, 0.0);
    for (double v : out.to_vector<double>()) CHECK(v == 0.0);
    out.fill_(3.0);
    backend.bmm(out.arg(), a.arg(), b.arg(), 1.0, 2.0);
    for (double v : out.to_vector<double>()) CHECK(v == 6.0);
    Tensor e = octo::empty({0, 3, 4}, {.dtype = dt});
    backend.bmm(e.arg(), octo::empty({0, 3, 2}, {.dtype = dt}).arg(),
                octo::empty({0, 2, 4}, {.dtype = dt}).arg(), 1.0, 0.0);
    CHECK(e.numel() == 0);
  }
}

TEST_CASE("bmm kernel reads a stride-0 (broadcast) batch") {
  octo::manual_seed(3);
  auto& backend = octo::kernels::cpu_backend();
  for (auto dt : kFloatTypes) {
    Tensor a = randn({1, 7, 6}, dt).expand({5, 7, 6});
    Tensor b = randn({5, 6, 3}, dt);
    REQUIRE(a.stride(0) == 0);
    Tensor out = octo::empty({5, 7, 3}, {.dtype = dt});
    backend.bmm(out.arg(), a.arg(), b.arg(), 1.0, 0.0);
    check_close(out.to_vector<double>(), ref_bmm(a, b), dt, 6);
    // Broadcast rows too: a row of a repeated (stride 0 in the matrix dim).
    Tensor r = randn({1, 1, 6}, dt).expand({5, 7, 6});
    backend.bmm(out.arg(), r.arg(), b.arg(), 1.0, 0.0);
    check_close(out.to_vector<double>(), ref_bmm(r, b), dt, 6);
  }
}

TEST_CASE("bmm kernel: large and batched products agree across thread counts") {
  octo::manual_seed(4);
  auto& backend = octo::kernels::cpu_backend();
  // Single large products (split into panels along rows or columns, Note [GEMM threads]) and
  // many small ones (parallel over the batch).
  const std::vector<std::array<int64_t, 4>> shapes = {{1, 150, 140, 130}, {2, 130, 129, 131},
                                                      {1, 70, 100, 300},  {1, 300, 64, 70},
                                                      {37, 9, 11, 7},     {64, 16, 16, 16}};
  for (auto [B, M, K, N] : shapes)
    for (auto dt : kFloatTypes)
      for (int layout = 0; layout < 3; ++layout) {
        Tensor a = make_operand(B, M, K, layout, dt), b = make_operand(B, K, N, 2 - layout, dt);
        auto want = ref_bmm(a, b);
        for (int threads : {1, 2, 3}) {
          INFO("threads " << threads << " B=" << B << " M=" << M << " K=" << K << " N=" << N
                          << " layout " << layout);
          octo::ThreadLimitGuard limit(threads);
          Tensor out = make_operand(B, M, N, layout, dt);
          backend.bmm(out.arg(), a.arg(), b.arg(), 1.0, 0.0);
          check_close(out.to_vector<double>(), want, dt, K);
        }
      }
}

TEST_CASE("bmm kernel rejects integer dtypes") {
  auto& backend = octo::kernels::cpu_backend();
  Tensor a = octo::zeros({1, 2, 2}, {.dtype = octo::kInt64});
  Tensor out = octo::zeros({1, 2, 2}, {.dtype = octo::kInt64});
  CHECK_THROWS_AS(backend.bmm(out.arg(), a.arg(), a.arg(), 1.0, 0.0), octo::ValueError);
  CHECK_THROWS_WITH(backend.bmm(out.arg(), a.arg(), a.arg(), 1.0, 0.0),
                    Catch::Contains("bmm") && Catch::Contains("int64"));
}

// --- ops -----------------------------------------------------------------------------------------

namespace {

/// torch.matmul's result for any ranks, via ref_bmm on explicitly broadcast 3-d operands.
std::pair<Shape, std::vector<double>> ref_matmul(const Tensor& a_in, const Tensor& b_in) {
  Tensor a = a_in.dim() == 1 ? a_in.unsqueeze(0) : a_in;
  Tensor b = b_in.dim() == 1 ? b_in.unsqueeze(1) : b_in;
  Shape ba(a.sizes().begin(), a.sizes().end() - 2), bb(b.sizes().begin(), b.sizes().end() - 2);
  size_t n = std::max(ba.size(), bb.size());
  Shape batch(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t x = i < n - ba.size() ? 1 : ba[i - (n - ba.size())];
    int64_t y = i < n - bb.size() ? 1 : bb[i - (n - bb.size())];
    batch[i] = std::max(x, y);
  }
  int64_t B = octo::detail::shape_numel(batch), M = a.size(-2), K = a.size(-1), N = b.size(-1);
  Shape sa = batch, sb = batch, so = batch;
  sa.insert(sa.end(), {M, K});
  sb.insert(sb.end(), {K, N});
  auto out = ref_bmm(a.expand(sa).reshape({B, M, K}), b.expand(sb).reshape({B, K, N}));
  if (a_in.dim() > 1) so.push_back(M);
  if (b_in.dim() > 1) so.push_back(N);
  return {so, out};
}

}  // namespace

TEST_CASE("matmul follows torch.matmul for every combination of ranks") {
  octo::manual_seed(5);
  const std::vector<std::pair<Shape, Shape>> cases = {{{4}, {4}},
                                                      {{3}, {3, 5}},
                                                      {{3, 4}, {4}},
                                                      {{2, 3}, {3, 5}},
                                                      {{2, 3, 4}, {4, 5}},
                                                      {{3, 4}, {2, 4, 5}},
                                                      {{4}, {2, 4, 5}},
                                                      {{2, 3, 4}, {4}},
                                                      {{2, 3, 4}, {2, 4, 5}},
                                                      {{1, 3, 4}, {6, 4, 2}},
                                                      {{2, 1, 3, 4}, {5, 4, 2}},
                                                      {{2, 1, 3, 4}, {1, 3, 4, 2}},
                                                      {{1}, {1}},
                                                      {{0}, {0}},
                                                      {{0, 3}, {3, 2}},
                                                      {{3, 0}, {0, 2}},
                                                      {{2, 0, 3}, {3, 4}},
                                                      {{0, 2, 3}, {0, 3, 4}},
                                                      {{5, 1, 1}, {1, 1}}};
  for (auto dt : kFloatTypes)
    for (auto& [sa, sb] : cases) {
      INFO("dtype " << dt << " shapes " << octo::shape_str(sa) << " @ " << octo::shape_str(sb));
      Tensor a = randn(sa, dt), b = randn(sb, dt);
      Tensor out = octo::matmul(a, b);
      auto [shape, want] = ref_matmul(a, b);
      CHECK(out.sizes() == shape);
      CHECK(out.dtype() == dt);
      check_close(out.to_vector<double>(), want, dt, a.size(-1));
      check_close(a.matmul(b).to_vector<double>(), want, dt, a.size(-1));
    }
}

TEST_CASE("matmul of transposed and sliced operands reads them in place") {
  octo::manual_seed(6);
  for (auto dt : kFloatTypes) {
    Tensor a = randn({7, 5}, dt).t();  // [5, 7], column-major
    Tensor b = randn({9, 12}, dt).slice(0, 1, 8).slice(1, 0, std::nullopt, 3);  // [7, 4]
    auto [shape, want] = ref_matmul(a, b);
    check_close(octo::matmul(a, b).to_vector<double>(), want, dt, 7);
    check_close(octo::mm(a, b).to_vector<double>(), want, dt, 7);
    Tensor a3 = randn({4, 2, 6}, dt).permute({1, 2, 0});  // [2, 6, 4]
    Tensor b3 = randn({2, 3, 4}, dt).transpose(1, 2);     // [2, 4, 3]
    auto [s3, w3] = ref_matmul(a3, b3);
    check_close(octo::bmm(a3, b3).to_vector<double>(), w3, dt, 4);
    check_close(octo::matmul(a3, b3).to_vector<double>(), w3, dt, 4);
    Tensor v = randn({12}, dt).slice(0, 0, std::nullopt, 2);  // [6], stride 2
    auto [sv, wv] = ref_matmul(v, a3);                        // [6] @ [2, 6, 4] -> [2, 4]
    CHECK(octo::matmul(v, a3).sizes() == Shape{2, 4});
    check_close(octo::matmul(v, a3).to_vector<double>(), wv, dt, 6);
    Tensor v4 = randn({8}, dt).slice(0, 0, std::nullopt, 2);  // [4], stride 2
    auto [s4, w4] = ref_matmul(a3, v4);
    CHECK(octo::matmul(a3, v4).sizes() == Shape{2, 6});
    check_close(octo::matmul(a3, v4).to_vector<double>(), w4, dt, 4);
  }
}

TEST_CASE("mm and bmm check their operands") {
  octo::manual_seed(7);
  for (auto dt : kFloatTypes) {
    Tensor a = randn({2, 3}, dt), b = randn({3, 4}, dt);
    auto [s, want] = ref_matmul(a, b);
    check_close(octo::mm(a, b).to_vector<double>(), want, dt, 3);
    Tensor a3 = randn({3, 2, 5}, dt), b3 = randn({3, 5, 1}, dt);
    auto [s3, w3] = ref_matmul(a3, b3);
    CHECK(octo::bmm(a3, b3).sizes() == Shape{3, 2, 1});
    check_close(octo::bmm(a3, b3).to_vector<double>(), w3, dt, 5);
  }
  Tensor a = randn({2, 3}, octo::kFloat32);
  CHECK_THROWS_AS(octo::mm(a, randn({4, 5}, octo::kFloat32)), octo::ValueError);
  CHECK_THROWS_WITH(octo::mm(a, randn({4, 5}, octo::kFloat32)),
                    Catch::Contains("mm: expected a.size(1) == b.size(0), got [2, 3] and [4, 5]"));
  CHECK_THROWS_WITH(octo::mm(a, randn({3}, octo::kFloat32)),
                    Catch::Contains("mm: expected 2-d tensors, got [2, 3] and [3]"));
  CHECK_THROWS_AS(octo::bmm(a, a), octo::ValueError);
  CHECK_THROWS_WITH(octo::bmm(randn({2, 2, 3}, octo::kFloat32), randn({3, 3, 4}, octo::kFloat32)),
                    Catch::Contains("batch sizes") && Catch::Contains("[2, 2, 3] and [3, 3, 4]"));
  CHECK_THROWS_WITH(
      octo::bmm(randn({2, 2, 3}, octo::kFloat32), randn({2, 4, 4}, octo::kFloat32)),
      Catch::Contains("bmm: expected a.size(2) == b.size(1), got [2, 2, 3] and [2, 4, 4]"));
}

TEST_CASE("matmul errors name the op and the shapes") {
  Tensor a = randn({2, 3}, octo::kFloat32);
  CHECK_THROWS_AS(octo::matmul(a, randn({4, 5}, octo::kFloat32)), octo::ValueError);
  CHECK_THROWS_WITH(
      octo::matmul(a, randn({4, 5}, octo::kFloat32)),
      Catch::Contains("matmul: expected a.size(-1) == b.size(-2), got [2, 3] and [4, 5]"));
  CHECK_THROWS_WITH(octo::matmul(randn({3}, octo::kFloat32), randn({4}, octo::kFloat32)),
                    Catch::Contains("matmul: expected a.size(-1) == b.size(0), got [3] and [4]"));
  CHECK_THROWS_WITH(octo::matmul(octo::scalar_tensor(1.0), a),
                    Catch::Contains("at least 1-d") && Catch::Contains("[] and [2, 3]"));
  CHECK_THROWS_AS(octo::matmul(randn({2, 2, 3}, octo::kFloat32), randn({3, 3, 4}, octo::kFloat32)),
                  octo::ValueError);
  CHECK_THROWS_WITH(
      octo::matmul(randn({2, 2, 3}, octo::kFloat32), randn({3, 3, 4}, octo::kFloat32)),
      Catch::Contains("cannot be broadcast") && Catch::Contains("[2] and [3]"));
  // Integer operands: ValueError from the op.
  Tensor i = octo::ones({2, 2}, {.dtype = octo::kInt64});
  CHECK_THROWS_AS(octo::matmul(i, i), octo::ValueError);
  CHECK_THROWS_WITH(octo::matmul(i, i), Catch::Contains("matmul") && Catch::Contains("int64"));
  CHECK_THROWS_AS(octo::mm(i, i), octo::ValueError);
  CHECK_THROWS_AS(octo::bmm(i.unsqueeze(0), i.unsqueeze(0)), octo::ValueError);
  // Mixed devices.
  Tensor c1 = octo::randn({3, 4}, {.device = octo::Device("cpu:1")});
  for (auto* op : {&octo::matmul, &octo::mm}) {
    CHECK_THROWS_AS(op(a, c1), octo::DeviceError);
    CHECK_THROWS_WITH(op(a, c1), Catch::Contains("same device") && Catch::Contains("cpu:0") &&
                                     Catch::Contains("cpu:1"));
  }
  CHECK_THROWS_AS(octo::bmm(a.unsqueeze(0), c1.unsqueeze(0)), octo::DeviceError);
  CHECK_THROWS_AS(octo::matmul(Tensor(), a), octo::ValueError);
}

TEST_CASE("matmul promotes mixed dtypes and runs on any virtual CPU device") {
  octo::manual_seed(8);
  Tensor a = randn({3, 4}, octo::kFloat32), b = randn({4, 2}, octo::kFloat64);
  Tensor out = octo::matmul(a, b);
  CHECK(out.dtype() == octo::kFloat64);
  auto [s, want] = ref_matmul(a, b);
  check_close(out.to_vector<double>(), want, octo::kFloat64, 4);
  CHECK(octo::mm(b.t(), a.t()).dtype() == octo::kFloat64);
  Tensor i = octo::ones({4, 2}, {.dtype = octo::kInt64});
  CHECK(octo::matmul(a, i).dtype() == octo::kFloat32);

  Tensor a1 = a.to(octo::Device("cpu:1")), b1 = b.to(octo::Device("cpu:1"));
  Tensor out1 = octo::matmul(a1, b1);
  CHECK(out1.device() == octo::Device("cpu:1"));
  check_close(out1.to_vector<double>(), want, octo::kFloat64, 4);
}

TEST_CASE("linear computes x @ w^T + b for inputs of any rank") {
  octo::manual_seed(9);
  for (auto dt : kFloatTypes)
    for (const Shape& xs : {Shape{5}, Shape{3, 5}, Shape{2, 3, 5}, Shape{0, 5}, Shape{4, 1, 5}}) {
      INFO("x " << octo::shape_str(xs));
      Tensor x = randn(xs, dt), w = randn({4, 5}, dt), bias = randn({4}, dt);
      auto [shape, prod] = ref_matmul(x, w.t());
      Tensor y0 = octo::linear(x, w);
      CHECK(y0.sizes() == shape);
      check_close(y0.to_vector<double>(), prod, dt, 5);
      Tensor y = octo::linear(x, w, bias);
      CHECK(y.sizes() == shape);
      auto bv = bias.to_vector<double>();
      for (size_t i = 0; i < prod.size(); ++i) prod[i] += bv[i % 4];
      check_close(y.to_vector<double>(), prod, dt, 5);
    }
  // Non-contiguous input and weight.
  Tensor x = randn({5, 3}, octo::kFloat64).t(), w = randn({5, 4}, octo::kFloat64).t();
  auto [s, want] = ref_matmul(x, w.t());
  check_close(octo::linear(x, w).to_vector<double>(), want, octo::kFloat64, 5);
}

TEST_CASE("linear checks its arguments") {
  Tensor x = randn({2, 5}, octo::kFloat32), w = randn({4, 5}, octo::kFloat32);
  CHECK_THROWS_AS(octo::linear(x, randn({4, 6}, octo::kFloat32)), octo::ValueError);
  CHECK_THROWS_WITH(
      octo::linear(x, randn({4, 6}, octo::kFloat32)),
      Catch::Contains("linear: expected x.size(-1) == weight.size(1), got [2, 5] and [4, 6]"));
  CHECK_THROWS_WITH(octo::linear(x, randn({5}, octo::kFloat32)),
                    Catch::Contains("linear") && Catch::Contains("2-d weight"));
  CHECK_THROWS_WITH(octo::linear(x, w, randn({5}, octo::kFloat32)),
                    Catch::Contains("linear: expected bias of shape [4], got [5]"));
  CHECK_THROWS_AS(octo::linear(x, w, randn({1, 4}, octo::kFloat32)), octo::ValueError);
  CHECK_THROWS_AS(octo::linear(x, w, octo::randn({4}, {.device = octo::Device("cpu:1")})),
                  octo::DeviceError);
  CHECK_THROWS_AS(octo::linear(x.to(octo::Device("cpu:1")), w), octo::DeviceError);
  Tensor i = octo::ones({2, 5}, {.dtype = octo::kInt32});
  CHECK_THROWS_AS(octo::linear(i, w.to(octo::kInt32)), octo::ValueError);
  CHECK(octo::linear(x, w, randn({4}, octo::kFloat64)).dtype() == octo::kFloat64);
}
