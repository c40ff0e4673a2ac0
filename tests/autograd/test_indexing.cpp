// Joining, splitting and indexing ops: values against reference loops, errors, and gradchecks.
#include <catch2/catch.hpp>

#include <octo/octo.h>

#include <limits>
#include <random>

using octo::DType;
using octo::Shape;
using octo::Tensor;
using octo::autograd::gradcheck;
using octo::autograd::TensorList;

namespace {

std::mt19937& rng() {
  static std::mt19937 gen(777);
  return gen;
}
int64_t rand_int(int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng());
}
int64_t numel(const Shape& s) { return octo::detail::shape_numel(s); }

/// Row-major 0, 1, 2, ... as float64 (or dtype), offset by `start`.
Tensor iota(const Shape& shape, double start = 0, DType dtype = octo::kFloat64) {
  std::vector<double> v(static_cast<size_t>(numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = start + static_cast<double>(i);
  return octo::from_vector(v, shape).to(dtype);
}
/// A float64 leaf with random values (no dependency on the RNG kernels).
Tensor leaf(const Shape& shape) {
  std::normal_distribution<double> normal;
  std::vector<double> v(static_cast<size_t>(numel(shape)));
  for (double& x : v) x = normal(rng());
  return octo::from_vector(v, shape).requires_grad_();
}
Tensor index(const std::vector<int64_t>& v, const Shape& shape) {
  return octo::from_vector(v, shape);
}
Tensor index(const std::vector<int64_t>& v) {
  return octo::from_vector(v, {static_cast<int64_t>(v.size())});
}
std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }
std::vector<int64_t> sizes_along(const std::vector<Tensor>& parts, int64_t dim) {
  std::vector<int64_t> s;
  for (const Tensor& p : parts) s.push_back(p.size(dim));
  return s;
}

}  // namespace

// --- cat / stack ------------------------------------------------------------------------------

TEST_CASE("cat matches a reference loop, incl. non-contiguous inputs and negative dims") {
  for (int trial = 0; trial < 40; ++trial) {
    const int ndim = static_cast<int>(rand_int(1, 4));
    const int dim = static_cast<int>(rand_int(0, ndim - 1));
    Shape base(static_cast<size_t>(ndim));
    for (int64_t& s : base) s = rand_int(1, 4);
    const int count = static_cast<int>(rand_int(1, 4));
    std::vector<Tensor> parts;
    std::vector<Shape> shapes;
    double start = 0;
    for (int i = 0; i < count; ++i) {
      Shape s = base;
      s[dim] = rand_int(0, 3);
      shapes.push_back(s);
      Tensor t = iota(s, start);
      start += 100;
      if (i % 2 == 1 && ndim >= 2) {  // the same values, transposed storage
        Tensor tt = iota(s, 0).transpose(0, ndim - 1).contiguous().transpose(0, ndim - 1);
        tt.copy_(t);
        t = tt;
      }
      parts.push_back(t);
    }
    Tensor out = octo::cat(parts, dim - ndim);
    Shape expect_shape = base;
    expect_shape[dim] = 0;
    for (const Shape& s : shapes) expect_shape[dim] += s[dim];
    REQUIRE(out.sizes() == expect_shape);
    // Reference: walk out's elements; find which part owns the index along dim.
    std::vector<double> got = values(out), expect;
    for (int64_t k = 0; k < numel(expect_shape); ++k) {
      std::vector<int64_t> p(static_cast<size_t>(ndim));
      int64_t r = k;
      for (int d = ndim - 1; d >= 0; --d) {
        p[d] = r % expect_shape[d];
        r /= expect_shape[d];
      }
      int part = 0;
      while (p[dim] >= shapes[part][dim]) p[dim] -= shapes[part++][dim];
      int64_t flat = 0;
      for (int d = 0; d < ndim; ++d) flat = flat * shapes[part][d] + p[d];
      expect.push_back(100.0 * part + static_cast<double>(flat));
    }
    CHECK(got == expect);
  }
}

TEST_CASE("cat promotes dtypes, skips 1-d empty tensors and rejects bad input") {
  Tensor a = iota({2, 2}, 0, octo::kFloat32), b = iota({1, 2}, 10, octo::kFloat64);
  Tensor c = octo::cat({a, b});
  CHECK(c.dtype() == octo::kFloat64);
  CHECK(values(c) == std::vector<double>{0, 1, 2, 3, 10, 11});
  CHECK(octo::cat({iota({2}, 0, octo::kInt64), iota({1}, 5, octo::kFloat32)}).dtype() ==
        octo::kFloat32);
  CHECK(octo::cat({a, octo::empty({0}), b}).sizes() == Shape{3, 2});

  CHECK_THROWS_AS(octo::cat({}), octo::ValueError);
  CHECK_THROWS_WITH(octo::cat({}), Catch::Contains("non-empty"));
  Tensor wrong = iota({2, 3});
  CHECK_THROWS_AS(octo::cat({a, wrong}, 0), octo::ValueError);
  CHECK_THROWS_WITH(octo::cat({a, wrong}, 0), Catch::Contains("[2, 2]") &&
                                                  Catch::Contains("[2, 3]") &&
                                                  Catch::Contains("dim 0"));
  CHECK_THROWS_AS(octo::cat({a, iota({2, 2, 1})}), octo::ValueError);
  CHECK_THROWS_AS(octo::cat({a, b}, 2), octo::IndexError);
  CHECK_THROWS_AS(octo::cat({octo::scalar_tensor(1.0)}), octo::ValueError);
  Tensor other = iota({2, 2}).to(octo::Device("cpu:1"));
  CHECK_THROWS_AS(octo::cat({iota({2, 2}), other}), octo::DeviceError);
  CHECK_THROWS_WITH(octo::cat({iota({2, 2}), other}), Catch::Contains("cpu:0 and cpu:1"));
  // The output lives on the inputs' device.
  CHECK(octo::cat({other, other}).device() == octo::Device("cpu:1"));
}

TEST_CASE("stack adds a dim, matching unsqueeze + cat") {
  Tensor a = iota({2, 3}), b = iota({2, 3}, 10);
  Tensor s0 = octo::stack({a, b});
  CHECK(s0.sizes() == Shape{2, 2, 3});
  CHECK(values(s0) == std::vector<double>{0, 1, 2, 3, 4, 5, 10, 11, 12, 13, 14, 15});
  Tensor s2 = octo::stack({a, b.t().contiguous().t()}, -1);  // [2, 3, 2]
  CHECK(s2.sizes() == Shape{2, 3, 2});
  CHECK(values(s2) == std::vector<double>{0, 10, 1, 11, 2, 12, 3, 13, 4, 14, 5, 15});
  CHECK(octo::stack({octo::scalar_tensor(1.0), octo::scalar_tensor(2.0)}).sizes() == Shape{2});
  CHECK_THROWS_AS(octo::stack({}), octo::ValueError);
  CHECK_THROWS_AS(octo::stack({a, iota({3, 2})}), octo::ValueError);
  CHECK_THROWS_WITH(octo::stack({a, iota({3, 2})}),
                    Catch::Contains("[2, 3]") && Catch::Contains("[3, 2]"));
  CHECK_THROWS_AS(octo::stack({a, b}, 3), octo::IndexError);
  CHECK_THROWS_AS(octo::stack({a, b.to(octo::Device("cpu:1"))}), octo::DeviceError);
}

// --- split / chunk ------------------------------------------------------------------------------

TEST_CASE("split, split_with_sizes and chunk give torch's piece sizes as views") {
  Tensor x = iota({10, 3});
  CHECK(sizes_along(octo::chunk(x, 3), 0) == std::vector<int64_t>{4, 4, 2});
  CHECK(sizes_along(octo::chunk(x, 4), 0) == std::vector<int64_t>{3, 3, 3, 1});
  CHECK(sizes_along(octo::chunk(x, 5), 0) == std::vector<int64_t>{2, 2, 2, 2, 2});
  CHECK(sizes_along(octo::chunk(x, 6), 0) == std::vector<int64_t>{2, 2, 2, 2, 2});  // fewer
  CHECK(sizes_along(octo::chunk(x, 20), 0) == std::vector<int64_t>(10, 1));
  CHECK(sizes_along(octo::chunk(iota({2}), 4), 0) == std::vector<int64_t>{1, 1});
  CHECK(sizes_along(octo::chunk(x, 2, -1), 1) == std::vector<int64_t>{2, 1});
  CHECK(sizes_along(octo::chunk(iota({0, 2}), 3), 0) == std::vector<int64_t>{0, 0, 0});
  CHECK(sizes_along(octo::split(x, 3), 0) == std::vector<int64_t>{3, 3, 3, 1});
  CHECK(sizes_along(octo::split(x, 10), 0) == std::vector<int64_t>{10});
  CHECK(sizes_along(octo::split(x, 20), 0) == std::vector<int64_t>{10});
  CHECK(sizes_along(octo::split(iota({0, 2}), 0), 0) == std::vector<int64_t>{0});
  CHECK(sizes_along(octo::split_with_sizes(x, {1, 0, 9}), 0) == std::vector<int64_t>{1, 0, 9});

  auto parts = octo::chunk(x, 3);
  CHECK(parts[1].is_alias_of(x));
  CHECK(values(parts[1]) == values(iota({4, 3}, 12)));
  CHECK(values(parts[2]) == values(iota({2, 3}, 24)));
  auto cols = octo::split(x.t(), 2, 0);  // a non-contiguous input
  CHECK(values(cols[1]) == std::vector<double>{2, 5, 8, 11, 14, 17, 20, 23, 26, 29});
  // Joining the pieces gives back the input.
  CHECK(values(octo::cat(octo::split_with_sizes(x, {3, 7}, 0))) == values(x));

  CHECK_THROWS_AS(octo::chunk(x, 0), octo::ValueError);
  CHECK_THROWS_AS(octo::split(x, 0), octo::ValueError);
  CHECK_THROWS_AS(octo::split(x, 2, 2), octo::IndexError);
  CHECK_THROWS_AS(octo::split_with_sizes(x, {3, 3}), octo::ValueError);
  CHECK_THROWS_WITH(octo::split_with_sizes(x, {3, 3}), Catch::Contains("sum to 10"));
  CHECK_THROWS_AS(octo::split_with_sizes(x, {11, -1}), octo::ValueError);
  CHECK_THROWS_AS(octo::chunk(octo::scalar_tensor(1.0), 2), octo::ValueError);
}

// --- index_select / gather / scatter_add
// ----------------------------------------------------------

TEST_CASE("index_select, gather and scatter_add validate their arguments") {
  Tensor x = iota({3, 4});
  CHECK_THROWS_AS(octo::index_select(x, 0, index({0}).to(octo::kInt32)), octo::ValueError);
  CHECK_THROWS_WITH(octo::index_select(x, 0, index({0}).to(octo::kInt32)),
                    Catch::Contains("int64") && Catch::Contains("int32"));
  CHECK_THROWS_AS(octo::index_select(x, 0, index({0, 1}, {1, 2})), octo::ValueError);
  CHECK_THROWS_AS(octo::index_select(x, 2, index({0})), octo::IndexError);
  CHECK_THROWS_AS(octo::index_select(x, 0, index({3})), octo::IndexError);
  CHECK_THROWS_WITH(octo::index_select(x, -2, index({3})),
                    Catch::Contains("index 3 is out of bounds for dimension 0 with size 3"));
  CHECK_THROWS_AS(octo::index_select(x, 0, index({0}).to(octo::Device("cpu:1"))),
                  octo::DeviceError);
  // A 0-d index selects one slice and keeps the dim.
  CHECK(values(octo::index_select(x, 1, octo::scalar_tensor(2, {.dtype = octo::kInt64}))) ==
        std::vector<double>{2, 6, 10});

  CHECK_THROWS_AS(octo::gather(x, 1, index({0, 1})), octo::ValueError);  // 1-d index, 2-d input
  CHECK_THROWS_AS(octo::gather(x, 1, index({0, 0, 0, 0}, {4, 1})), octo::ValueError);
  CHECK_THROWS_AS(octo::gather(x, 1, index({4}, {1, 1})), octo::IndexError);
  CHECK_THROWS_AS(octo::gather(x, 1, iota({1, 1})), octo::ValueError);
  CHECK_THROWS_AS(octo::gather(x.to(octo::Device("cpu:1")), 1, index({0}, {1, 1})),
                  octo::DeviceError);

  Tensor src = iota({2, 2});
  CHECK_THROWS_AS(octo::scatter_add(x, 0, index({0, 0, 0}, {3, 1}), src), octo::ValueError);
  CHECK_THROWS_AS(octo::scatter_add(x, 0, index({0, 3}, {1, 2}), src), octo::IndexError);
  CHECK_THROWS_AS(octo::scatter_add(x, 0, index({0, 1}, {1, 2}), src.to(octo::Device("cpu:1"))),
                  octo::DeviceError);
  // Promotes like other binary ops: float32 input + float64 src -> float64.
  Tensor sf = octo::scatter_add(x.to(octo::kFloat32), 0, index({2, 2}, {1, 2}), src);
  CHECK(sf.dtype() == octo::kFloat64);
  CHECK(values(sf) == std::vector<double>{0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 10, 11});
}

TEST_CASE("embedding picks rows, one_hot encodes classes, masked_fill replaces") {
  Tensor w = iota({5, 3});
  Tensor idx = index({4, 0, 4, 2, 1, 1}, {2, 3});
  Tensor e = octo::embedding(w, idx);
  REQUIRE(e.sizes() == Shape{2, 3, 3});
  std::vector<double> expect;
  for (int64_t i : {4, 0, 4, 2, 1, 1})
    for (int64_t j = 0; j < 3; ++j) expect.push_back(static_cast<double>(i * 3 + j));
  CHECK(values(e) == expect);
  CHECK(values(octo::embedding(w, idx.t())).size() == 18);
  CHECK_THROWS_AS(octo::embedding(w, index({5})), octo::IndexError);
  CHECK_THROWS_WITH(octo::embedding(w, index({5})),
                    Catch::Contains("embedding") && Catch::Contains("index 5"));
  CHECK_THROWS_AS(octo::embedding(w, iota({2})), octo::ValueError);
  CHECK_THROWS_AS(octo::embedding(iota({5}), index({1})), octo::ValueError);

  Tensor oh = octo::one_hot(index({2, 0, 3}), 4);
  CHECK(oh.dtype() == octo::kInt64);
  CHECK(oh.sizes() == Shape{3, 4});
  CHECK(values(oh) == std::vector<double>{0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 1});
  CHECK(octo::one_hot(index({1, 2}, {2, 1}), -1).sizes() == Shape{2, 1, 3});
  CHECK(octo::one_hot(octo::scalar_tensor(1, {.dtype = octo::kInt64}), 2).sizes() == Shape{2});
  CHECK_THROWS_AS(octo::one_hot(index({4}), 4), octo::IndexError);
  // Inferring num_classes = largest + 1 from the int64 maximum (found by fuzz_ops).
  CHECK_THROWS_WITH(octo::one_hot(index({std::numeric_limits<int64_t>::max()}), -1),
                    Catch::Contains("leaves no num_classes"));
  CHECK_THROWS_AS(octo::one_hot(index({-1}), 4), octo::IndexError);
  CHECK_THROWS_AS(octo::one_hot(iota({2}), 4), octo::ValueError);

  Tensor x = iota({2, 3});
  Tensor mask = octo::from_vector<bool>({true, false, true}, {3});
  CHECK(values(octo::masked_fill(x, mask, -1.5)) ==
        std::vector<double>{-1.5, 1, -1.5, -1.5, 4, -1.5});
  Tensor col = octo::from_vector<bool>({false, true}, {2, 1});
  CHECK(values(octo::masked_fill(x.t(), col.t(), 9)) == std::vector<double>{0, 9, 1, 9, 2, 9});
  CHECK(values(octo::masked_fill(iota({3}, 0, octo::kInt64), mask, 7)) ==
        std::vector<double>{7, 1, 7});
  CHECK_THROWS_AS(octo::masked_fill(x, iota({3}), 0), octo::ValueError);
  CHECK_THROWS_AS(octo::masked_fill(x, octo::from_vector<bool>({true, false}, {2}), 0),
                  octo::ValueError);
  CHECK_THROWS_AS(octo::masked_fill(x, mask.to(octo::Device("cpu:1")), 0), octo::DeviceError);
}

// --- gradients --------------------------------------------------------------------------------

TEST_CASE("gradcheck: cat and stack") {
  Tensor a = leaf({2, 3}), b = leaf({2, 1}), c = leaf({3, 2});
  CHECK(gradcheck([](const TensorList& in) { return octo::cat({in[0], in[1]}, 1); }, {a, b}));
  // Non-contiguous inputs and a negative dim.
  CHECK(gradcheck([](const TensorList& in) { return octo::cat({in[0], in[1].t()}, -2); }, {a, c}));
  // A constant (non-grad) input among differentiable ones; float32 promoted.
  Tensor k = iota({2, 2}, 0, octo::kFloat32);
  CHECK(gradcheck([k](const TensorList& in) { return octo::cat({k, in[0]}, 1); }, {a}));
  Tensor d = leaf({2, 3});
  CHECK(gradcheck([](const TensorList& in) { return octo::stack({in[0], in[1]}, 1); }, {a, d}));
  CHECK(gradcheck(
      [](const TensorList& in) {
        return octo::stack({in[0].t(), in[1].t()}, -1);
      },
      {a, d}));
}

TEST_CASE("gradcheck: split and chunk (one piece)") {
  Tensor x = leaf({5, 3});
  CHECK(gradcheck([](const TensorList& in) { return octo::split(in[0], 2, 0)[2]; }, {x}));
  CHECK(gradcheck([](const TensorList& in) { return octo::chunk(in[0].t(), 2, -1)[1]; }, {x}));
  CHECK(gradcheck(
      [](const TensorList& in) {
        return octo::split_with_sizes(in[0], {1, 2}, 1)[1];
      },
      {x}));
}

TEST_CASE("gradcheck: split and chunk (all pieces rejoined)") {
  // Gradients from several pieces meet at x (the engine sums them with add).
  Tensor x = leaf({5, 3});
  CHECK(gradcheck(
      [](const TensorList& in) {
        auto p = octo::chunk(in[0], 3, 0);
        return octo::cat({p[2], p[0], p[1]}, 0);
      },
      {x}));
  CHECK(gradcheck(
      [](const TensorList& in) {
        auto p = octo::split(in[0].t(), 2, 1);
        return octo::stack({p[1], p[0]}, 0);
      },
      {leaf({4, 3})}));
}

TEST_CASE("gradcheck: index_select and embedding with repeated indices") {
  Tensor x = leaf({4, 3});
  Tensor idx = index({3, 0, 3, 1, 3});
  CHECK(gradcheck([idx](const TensorList& in) { return octo::index_select(in[0], 0, idx); }, {x}));
  CHECK(gradcheck([idx](const TensorList& in) { return octo::index_select(in[0].t(), -1, idx); },
                  {x}));
  Tensor idx2 = index({2, 2, 0});
  CHECK(gradcheck([idx2](const TensorList& in) { return octo::index_select(in[0], 1, idx2); },
                  {leaf({2, 3, 2})}));
  Tensor w = leaf({5, 2});
  Tensor tokens = index({4, 1, 4, 0, 4, 2}, {3, 2});
  CHECK(gradcheck([tokens](const TensorList& in) { return octo::embedding(in[0], tokens); }, {w}));
  CHECK(gradcheck([tokens](const TensorList& in) { return octo::embedding(in[0], tokens.t()); },
                  {w}));
}

TEST_CASE("gradcheck: gather and scatter_add") {
  Tensor x = leaf({3, 4});
  Tensor idx = index({3, 3, 0, 1, 1, 1, 2, 0, 3}, {3, 3});
  CHECK(gradcheck([idx](const TensorList& in) { return octo::gather(in[0], 1, idx); }, {x}));
  Tensor idx0 = index({2, 0, 2, 2, 1, 0}, {2, 3});  // smaller than x along dim 1 too
  CHECK(gradcheck([idx0](const TensorList& in) { return octo::gather(in[0], 0, idx0); }, {x}));
  CHECK(gradcheck([idx0](const TensorList& in) { return octo::gather(in[0].t(), -1, idx0.t()); },
                  {x}));

  Tensor src = leaf({2, 3});
  CHECK(gradcheck([idx0](const TensorList& in) { return octo::scatter_add(in[0], 0, idx0, in[1]); },
                  {x, src}));
  // src larger than index (its extra elements get zero gradient), non-contiguous src.
  Tensor big = leaf({4, 3});
  Tensor small_idx = index({0, 0, 2, 1}, {2, 2});
  CHECK(gradcheck(
      [small_idx](const TensorList& in) {
        return octo::scatter_add(in[0], 1, small_idx, in[1].t());
      },
      {x, big}));
}

TEST_CASE("gradcheck: masked_fill with a broadcast mask") {
  Tensor x = leaf({3, 4});
  Tensor row = octo::from_vector<bool>({true, false, false, true}, {4});
  Tensor col = octo::from_vector<bool>({false, true, false}, {3, 1});
  CHECK(gradcheck([row](const TensorList& in) { return octo::masked_fill(in[0], row, 2.0); }, {x}));
  CHECK(gradcheck([col](const TensorList& in) { return octo::masked_fill(in[0].t(), col.t(), 0); },
                  {x}));
}

TEST_CASE("backward of indexing ops accumulates into leaves") {
  // d/dx of sum over index_select with repeats counts how often each row was picked.
  Tensor x = leaf({4, 2});
  Tensor picked = octo::index_select(x, 0, index({1, 3, 1, 1}));
  picked.backward(octo::ones({4, 2}, {.dtype = octo::kFloat64}));
  CHECK(values(x.grad()) == std::vector<double>{0, 0, 3, 3, 0, 0, 1, 1});
  Tensor y = leaf({2, 3});
  Tensor m = octo::masked_fill(y, octo::from_vector<bool>({true, false, true}, {3}), 5);
  m.backward(octo::ones({2, 3}, {.dtype = octo::kFloat64}));
  CHECK(values(y.grad()) == std::vector<double>{0, 1, 0, 0, 1, 0});
  CHECK(m.grad_fn() != nullptr);
  CHECK(m.grad_fn()->name() == "MaskedFillBackward");
  // Under NoGradGuard nothing is recorded.
  octo::NoGradGuard no_grad;
  CHECK(octo::cat({y, y}).grad_fn() == nullptr);
}
