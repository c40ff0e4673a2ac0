// Indexing kernels (index_select, index_add, gather, scatter_add) against reference loops.
#include <catch2/catch.hpp>

#include <octo/octo.h>

#include <random>

#include "kernels/backend.h"

using octo::DType;
using octo::Shape;
using octo::Tensor;

namespace {

std::mt19937& rng() {
  static std::mt19937 gen(20240611);
  return gen;
}
/// Uniform integer in [lo, hi].
int64_t rand_int(int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng());
}

int64_t numel(const Shape& s) { return octo::detail::shape_numel(s); }

std::vector<int64_t> unravel(int64_t k, const Shape& s) {
  std::vector<int64_t> p(s.size());
  for (int64_t d = static_cast<int64_t>(s.size()) - 1; d >= 0; --d) {
    p[d] = k % s[d];
    k /= s[d];
  }
  return p;
}
int64_t ravel(const std::vector<int64_t>& p, const Shape& s) {
  int64_t k = 0;
  for (size_t d = 0; d < s.size(); ++d) k = k * s[d] + p[d];
  return k;
}

/// Values that every tested dtype holds exactly (small integers, or halves for floats).
std::vector<double> random_values(int64_t n, DType dtype) {
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v)
    x = static_cast<double>(rand_int(-20, 20)) * (octo::is_floating(dtype) ? 0.5 : 1);
  return v;
}

/// A tensor with these row-major values, laid out as: 0 contiguous, 1 permuted storage
/// (all dims reversed), 2 every other element of a wider last dim.
Tensor make(const std::vector<double>& values, const Shape& shape, DType dtype, int layout) {
  Tensor src = octo::from_vector(values, shape).to(dtype);
  if (layout == 0) return src;
  Tensor dst;
  if (layout == 1) {
    Shape rev(shape.rbegin(), shape.rend()), perm;
    for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) perm.push_back(d);
    dst = octo::empty(rev, {.dtype = dtype}).permute(perm);
  } else {
    Shape wide = shape;
    wide.back() *= 2;
    dst = octo::empty(wide, {.dtype = dtype}).slice(-1, 1, std::nullopt, 2);
  }
  dst.copy_(src);
  return dst;
}
Tensor make_index(const std::vector<int64_t>& values, const Shape& shape, int layout) {
  std::vector<double> v(values.begin(), values.end());
  return make(v, shape, octo::kInt64, layout);
}

Shape random_shape(int ndim, int64_t max_size) {
  Shape s(static_cast<size_t>(ndim));
  for (int64_t& x : s) x = rand_int(0, 4) == 0 ? rand_int(0, 1) : rand_int(1, max_size);
  return s;
}

const DType kDTypes[] = {octo::kFloat32, octo::kFloat64, octo::kInt64, octo::kInt32};

std::vector<double> values_of(const Tensor& t) { return t.to_vector<double>(); }

}  // namespace

TEST_CASE("index_select kernel matches a reference loop") {
  auto& cpu = octo::kernels::cpu_backend();
  for (int trial = 0; trial < 120; ++trial) {
    const DType dtype = kDTypes[trial % 4];
    const int ndim = static_cast<int>(rand_int(1, 4));
    const Shape in_shape = random_shape(ndim, 5);
    const int dim = static_cast<int>(rand_int(0, ndim - 1));
    const int64_t n_index = in_shape[dim] == 0 ? 0 : rand_int(0, 7);
    std::vector<int64_t> idx(static_cast<size_t>(n_index));
    for (int64_t& i : idx) i = rand_int(0, in_shape[dim] - 1);
    const std::vector<double> in_v = random_values(numel(in_shape), dtype);
    Shape out_shape = in_shape;
    out_shape[dim] = n_index;
    // Reference: out[p] = in[p with p[dim] = idx[p[dim]]].
    std::vector<double> expect(static_cast<size_t>(numel(out_shape)));
    for (int64_t k = 0; k < numel(out_shape); ++k) {
      auto p = unravel(k, out_shape);
      p[dim] = idx[p[dim]];
      expect[k] = in_v[ravel(p, in_shape)];
    }
    Tensor in = make(in_v, in_shape, dtype, trial % 3);
    Tensor index = make_index(idx, {n_index}, (trial / 3) % 2 * 2);
    Tensor out = make(std::vector<double>(expect.size(), 0), out_shape, dtype, (trial / 6) % 2);
    cpu.index_select(out.arg(), in.arg(), dim, index.arg());
    INFO("shape " << octo::shape_str(in_shape) << " dim " << dim << " dtype " << dtype);
    CHECK(values_of(out) == expect);
    // The op, with a negative dim.
    CHECK(values_of(octo::index_select(in, dim - ndim, index)) == expect);
  }
}

TEST_CASE("index_add kernel matches a reference loop") {
  auto& cpu = octo::kernels::cpu_backend();
  for (int trial = 0; trial < 120; ++trial) {
    const DType dtype = kDTypes[trial % 4];
    const int ndim = static_cast<int>(rand_int(1, 4));
    const Shape out_shape = random_shape(ndim, 5);
    const int dim = static_cast<int>(rand_int(0, ndim - 1));
    const int64_t n_index = out_shape[dim] == 0 ? 0 : rand_int(0, 9);  // duplicates likely
    std::vector<int64_t> idx(static_cast<size_t>(n_index));
    for (int64_t& i : idx) i = rand_int(0, out_shape[dim] - 1);
    Shape src_shape = out_shape;
    src_shape[dim] = n_index;
    const std::vector<double> out_v = random_values(numel(out_shape), dtype);
    const std::vector<double> src_v = random_values(numel(src_shape), dtype);
    std::vector<double> expect = out_v;
    for (int64_t k = 0; k < numel(src_shape); ++k) {
      auto p = unravel(k, src_shape);
      p[dim] = idx[p[dim]];
      expect[ravel(p, out_shape)] += src_v[k];
    }
    Tensor out = make(out_v, out_shape, dtype, trial % 3);
    Tensor src = make(src_v, src_shape, dtype, (trial / 3) % 3);
    Tensor index = make_index(idx, {n_index}, (trial / 9) % 2 * 2);
    cpu.index_add(out.arg(), dim, index.arg(), src.arg());
    INFO("shape " << octo::shape_str(out_shape) << " dim " << dim << " dtype " << dtype);
    CHECK(values_of(out) == expect);
  }
}

TEST_CASE("gather kernel matches a reference loop") {
  auto& cpu = octo::kernels::cpu_backend();
  for (int trial = 0; trial < 120; ++trial) {
    const DType dtype = kDTypes[trial % 4];
    const int ndim = static_cast<int>(rand_int(1, 4));
    const Shape in_shape = random_shape(ndim, 5);
    const int dim = static_cast<int>(rand_int(0, ndim - 1));
    // index.size(k) <= in.size(k) off dim; any size along dim (0 when in has nothing there).
    Shape idx_shape(in_shape.size());
    for (int k = 0; k < ndim; ++k)
      idx_shape[k] =
          k == dim ? (in_shape[dim] == 0 ? 0 : rand_int(0, 6)) : rand_int(0, in_shape[k]);
    std::vector<int64_t> idx(static_cast<size_t>(numel(idx_shape)));
    for (int64_t& i : idx) i = rand_int(0, in_shape[dim] - 1);
    const std::vector<double> in_v = random_values(numel(in_shape), dtype);
    std::vector<double> expect(idx.size());
    for (int64_t k = 0; k < numel(idx_shape); ++k) {
      auto p = unravel(k, idx_shape);
      p[dim] = idx[k];
      expect[k] = in_v[ravel(p, in_shape)];
    }
    Tensor in = make(in_v, in_shape, dtype, trial % 3);
    Tensor index = make_index(idx, idx_shape, (trial / 3) % 3);
    Tensor out = make(std::vector<double>(expect.size(), 0), idx_shape, dtype, (trial / 9) % 2);
    cpu.gather(out.arg(), in.arg(), dim, index.arg());
    INFO("in " << octo::shape_str(in_shape) << " index " << octo::shape_str(idx_shape) << " dim "
               << dim << " dtype " << dtype);
    CHECK(values_of(out) == expect);
    CHECK(values_of(octo::gather(in, dim - ndim, index)) == expect);
  }
}

TEST_CASE("scatter_add kernel matches a reference loop") {
  auto& cpu = octo::kernels::cpu_backend();
  for (int trial = 0; trial < 120; ++trial) {
    const DType dtype = kDTypes[trial % 4];
    const int ndim = static_cast<int>(rand_int(1, 4));
    const Shape idx_shape = random_shape(ndim, 4);
    const int dim = static_cast<int>(rand_int(0, ndim - 1));
    // out.size(k) >= index.size(k) off dim; src.size(k) >= index.size(k) everywhere.
    Shape out_shape = idx_shape, src_shape = idx_shape;
    for (int k = 0; k < ndim; ++k) {
      src_shape[k] += rand_int(0, 1);
      out_shape[k] =
          k == dim ? rand_int(numel(idx_shape) > 0 ? 1 : 0, 4) : idx_shape[k] + rand_int(0, 1);
    }
    std::vector<int64_t> idx(static_cast<size_t>(numel(idx_shape)));
    for (int64_t& i : idx) i = rand_int(0, out_shape[dim] - 1);
    const std::vector<double> out_v = random_values(numel(out_shape), dtype);
    const std::vector<double> src_v = random_values(numel(src_shape), dtype);
    std::vector<double> expect = out_v;
    for (int64_t k = 0; k < numel(idx_shape); ++k) {
      auto p = unravel(k, idx_shape);
      const double v = src_v[ravel(p, src_shape)];
      p[dim] = idx[k];
      expect[ravel(p, out_shape)] += v;
    }
    Tensor out = make(out_v, out_shape, dtype, trial % 3);
    Tensor src = make(src_v, src_shape, dtype, (trial / 3) % 3);
    Tensor index = make_index(idx, idx_shape, (trial / 9) % 3);
    INFO("out " << octo::shape_str(out_shape) << " index " << octo::shape_str(idx_shape) << " src "
                << octo::shape_str(src_shape) << " dim " << dim);
    CHECK(values_of(octo::scatter_add(out, dim - ndim, index, src)) == expect);
    CHECK(values_of(out) == out_v);  // the op leaves its input alone
    cpu.scatter_add(out.arg(), dim, index.arg(), src.arg());
    CHECK(values_of(out) == expect);
  }
}

TEST_CASE("index kernels copy 16-bit float types exactly") {
  auto& cpu = octo::kernels::cpu_backend();
  const std::vector<double> v = random_values(12, octo::kFloat32);
  Tensor in = octo::from_vector(v, {3, 4}).to(octo::kBFloat16);
  Tensor index = octo::from_vector<int64_t>({3, 0, 3}, {3});
  Tensor out = octo::empty({3, 3}, {.dtype = octo::kBFloat16});
  cpu.index_select(out.arg(), in.arg(), 1, index.arg());
  std::vector<double> got = out.to(octo::kFloat64).to_vector<double>();
  for (int r = 0; r < 3; ++r) {
    CHECK(got[r * 3 + 0] == v[r * 4 + 3]);
    CHECK(got[r * 3 + 1] == v[r * 4 + 0]);
    CHECK(got[r * 3 + 2] == v[r * 4 + 3]);
  }
  Tensor acc = octo::zeros({4}, {.dtype = octo::kFloat16});
  Tensor src = octo::from_vector<double>({0.5, 1.5, 2.0}, {3}).to(octo::kFloat16);
  cpu.scatter_add(acc.arg(), 0, octo::from_vector<int64_t>({1, 1, 3}, {3}).arg(), src.arg());
  CHECK(acc.to(octo::kFloat64).to_vector<double>() == std::vector<double>{0, 2.0, 0, 2.0});
}

TEST_CASE("index_add and scatter_add are race-free when parallel") {
  auto& cpu = octo::kernels::cpu_backend();
  const int threads = octo::get_num_threads();
  octo::set_num_threads(4);  // force several threads even on a small machine
  // Many duplicates along the indexed dim and enough work for several threads.
  const int64_t rows = 300, cols = 1000, targets = 3;
  std::vector<int64_t> idx(rows);
  for (int64_t& i : idx) i = rand_int(0, targets - 1);
  std::vector<double> src_v(static_cast<size_t>(rows * cols));
  for (double& x : src_v) x = static_cast<double>(rand_int(-3, 3));
  std::vector<double> expect(static_cast<size_t>(targets * cols), 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) expect[idx[r] * cols + c] += src_v[r * cols + c];
  Tensor src = octo::from_vector(src_v, {rows, cols});
  for (int rep = 0; rep < 3; ++rep) {
    Tensor out = octo::zeros({targets, cols}, {.dtype = octo::kFloat64});
    cpu.index_add(out.arg(), 0, octo::from_vector(idx, {rows}).arg(), src.arg());
    CHECK(out.to_vector<double>() == expect);
    // The same through scatter_add with a full index (index[r][c] = idx[r]).
    std::vector<int64_t> full(static_cast<size_t>(rows * cols));
    for (int64_t k = 0; k < rows * cols; ++k) full[k] = idx[k / cols];
    Tensor out2 = octo::zeros({targets, cols}, {.dtype = octo::kFloat64});
    cpu.scatter_add(out2.arg(), 0, octo::from_vector(full, {rows, cols}).arg(), src.arg());
    CHECK(out2.to_vector<double>() == expect);
  }
  // A 1-d scatter (no non-indexed dim) stays serial and still correct; a 1-d gather splits.
  std::vector<int64_t> flat(100000);
  for (int64_t& i : flat) i = rand_int(0, 9);
  Tensor counts = octo::zeros({10}, {.dtype = octo::kInt64});
  Tensor ones = octo::ones({100000}, {.dtype = octo::kInt64});
  cpu.scatter_add(counts.arg(), 0, octo::from_vector(flat, {100000}).arg(), ones.arg());
  std::vector<int64_t> expect_counts(10, 0);
  for (int64_t i : flat) ++expect_counts[i];
  CHECK(counts.to_vector<int64_t>() == expect_counts);
  Tensor table = octo::arange(10);
  Tensor picked = octo::empty({100000}, {.dtype = octo::kInt64});
  cpu.index_select(picked.arg(), table.arg(), 0, octo::from_vector(flat, {100000}).arg());
  CHECK(picked.to_vector<int64_t>() == flat);
  // A gather whose thread chunks start in the middle of a row.
  const int64_t g_rows = 11, g_cols = 3119;
  std::vector<int64_t> gi(static_cast<size_t>(g_rows * g_cols));
  for (int64_t& i : gi) i = rand_int(0, 6);
  Tensor table2 = octo::arange(7 * g_cols).view({7, g_cols});
  Tensor gathered = octo::empty({g_rows, g_cols}, {.dtype = octo::kInt64});
  cpu.gather(gathered.arg(), table2.arg(), 0, octo::from_vector(gi, {g_rows, g_cols}).arg());
  std::vector<int64_t> expect_g(gi.size());
  for (int64_t k = 0; k < g_rows * g_cols; ++k) expect_g[k] = gi[k] * g_cols + k % g_cols;
  CHECK(gathered.to_vector<int64_t>() == expect_g);
  octo::set_num_threads(threads);
}

TEST_CASE("index kernels reject out-of-range indices with IndexError before writing") {
  auto& cpu = octo::kernels::cpu_backend();
  Tensor in = octo::zeros({3, 5}, {.dtype = octo::kFloat64});
  Tensor out = octo::zeros({3, 2}, {.dtype = octo::kFloat64});
  Tensor bad = octo::from_vector<int64_t>({1, 5}, {2});
  CHECK_THROWS_AS(cpu.index_select(out.arg(), in.arg(), 1, bad.arg()), octo::IndexError);
  CHECK_THROWS_WITH(cpu.index_select(out.arg(), in.arg(), 1, bad.arg()),
                    Catch::Contains("index 5 is out of bounds for dimension 1 with size 5"));
  Tensor neg = octo::from_vector<int64_t>({-1, 0}, {2});
  CHECK_THROWS_WITH(cpu.index_select(out.arg(), in.arg(), 1, neg.arg()),
                    Catch::Contains("index -1 is out of bounds for dimension 1 with size 5"));

  Tensor acc = octo::ones({3, 5}, {.dtype = octo::kFloat64});
  Tensor src = octo::ones({3, 2}, {.dtype = octo::kFloat64});
  CHECK_THROWS_AS(cpu.index_add(acc.arg(), 1, bad.arg(), src.arg()), octo::IndexError);
  CHECK_THROWS_WITH(cpu.index_add(acc.arg(), 1, bad.arg(), src.arg()),
                    Catch::Contains("index_add: index 5"));
  Tensor full_bad = octo::from_vector<int64_t>({0, 1, 2, 3, 4, 3}, {3, 2});
  CHECK_THROWS_AS(cpu.gather(out.arg(), in.arg(), 0, full_bad.arg()), octo::IndexError);
  CHECK_THROWS_WITH(cpu.gather(out.arg(), in.arg(), 0, full_bad.arg()),
                    Catch::Contains("index 3 is out of bounds for dimension 0 with size 3"));
  CHECK_THROWS_WITH(cpu.scatter_add(acc.arg(), 0, full_bad.arg(), src.arg()),
                    Catch::Contains("scatter_add: index 3 is out of bounds for dimension 0"));
  // Nothing was written by the failed calls.
  CHECK(acc.to_vector<double>() == std::vector<double>(15, 1.0));
}
