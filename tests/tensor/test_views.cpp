// Views share storage and map elements correctly: view, reshape, transpose, permute, slicing.
#include <catch2/catch.hpp>

#include <limits>

#include <octo/octo.h>

using octo::Shape;
using octo::Tensor;
using octo::autograd::gradcheck;
using octo::autograd::TensorList;

namespace {
Tensor iota(const Shape& shape) {
  return octo::arange(0.0, static_cast<double>(octo::detail::shape_numel(shape)), 1.0,
                      {.dtype = octo::kFloat64})
      .view(shape);
}
Tensor leaf(const Shape& shape) {
  return octo::randn(shape, {.dtype = octo::kFloat64, .requires_grad = true});
}
}  // namespace

TEST_CASE("view and reshape share storage when the layout allows") {
  Tensor a = iota({2, 3, 4});
  Tensor v = a.view({6, 4});
  CHECK(v.is_alias_of(a));
  CHECK(v.sizes() == Shape{6, 4});
  CHECK(a.view({-1}).sizes() == Shape{24});
  CHECK(a.view({4, -1}).sizes() == Shape{4, 6});
  Tensor t = a.transpose(0, 2);  // [4, 3, 2], not contiguous
  CHECK_FALSE(t.is_contiguous());
  CHECK_THROWS_AS(t.view({24}), octo::ValueError);
  CHECK_THROWS_WITH(t.view({24}), Catch::Contains("Use reshape() instead"));
  Tensor r = t.reshape({24});
  CHECK_FALSE(r.is_alias_of(a));  // had to copy
  CHECK(r.to_vector<double>()[1] == 12.0);
  CHECK_THROWS_WITH(a.view({5, 5}),
                    Catch::Contains("shape [5, 5] is invalid for input of size 24"));
  CHECK_THROWS_AS(a.view({-1, -1}), octo::ValueError);
}

TEST_CASE("transpose, permute and t map elements") {
  Tensor a = iota({2, 3});
  CHECK(a.t().to_vector<double>() == std::vector<double>{0, 3, 1, 4, 2, 5});
  CHECK(a.t().is_alias_of(a));
  Tensor b = iota({2, 3, 4});
  Tensor p = b.permute({2, 0, 1});
  CHECK(p.sizes() == Shape{4, 2, 3});
  CHECK(p.contiguous().to_vector<double>()[1] == 4.0);  // p[0][0][1] = b[0][1][0]
  CHECK_THROWS_AS(b.permute({0, 1}), octo::ValueError);
  CHECK_THROWS_AS(b.permute({0, 1, 1}), octo::ValueError);
  CHECK_THROWS_AS(b.transpose(0, 3), octo::IndexError);
  CHECK_THROWS_WITH(b.transpose(0, 3), Catch::Contains("Dimension out of range") ||
                                           Catch::Contains("dimension out of range"));
}

TEST_CASE("narrow, slice and select pick parts without copying") {
  Tensor a = iota({4, 5});
  Tensor n = a.narrow(1, 1, 3);
  CHECK(n.sizes() == Shape{4, 3});
  CHECK(n.is_alias_of(a));
  CHECK(n.contiguous().to_vector<double>()[0] == 1.0);
  Tensor s = a.slice(0, 1, std::nullopt, 2);  // rows 1 and 3
  CHECK(s.sizes() == Shape{2, 5});
  CHECK(s.contiguous().to_vector<double>()[5] == 15.0);
  CHECK(a.slice(1, -2).sizes() == Shape{4, 2});
  // A step past the end keeps one element; the size is computed without overflow.
  CHECK(a.slice(1, 1, std::nullopt, int64_t{1} << 62).sizes() == Shape{4, 1});
  CHECK(a.slice(1, 2, 5, std::numeric_limits<int64_t>::max()).contiguous().to_vector<double>() ==
        std::vector<double>{2, 7, 12, 17});
  CHECK(a.select(0, -1).to_vector<double>() == std::vector<double>{15, 16, 17, 18, 19});
  CHECK(a[2][3].item<double>() == 13.0);
  CHECK_THROWS_AS(a.select(0, 4), octo::IndexError);
  CHECK_THROWS_AS(a.narrow(1, 3, 3), octo::IndexError);
  // Writing through a view writes the base.
  a.select(1, 0).fill_(-1);
  CHECK(a[3][0].item<double>() == -1.0);
}

TEST_CASE("expand, squeeze, unsqueeze and flatten") {
  Tensor a = iota({3, 1});
  Tensor e = a.expand({2, 3, 4});
  CHECK(e.sizes() == Shape{2, 3, 4});
  CHECK(e.strides() == Shape{0, 1, 0});
  CHECK(e.contiguous().to_vector<double>()[4] == 1.0);
  CHECK(a.expand({-1, 5}).sizes() == Shape{3, 5});
  CHECK_THROWS_WITH(a.expand({4, 4}), Catch::Contains("must match the existing size (3)"));
  CHECK(iota({1, 3, 1}).squeeze().sizes() == Shape{3});
  CHECK(iota({1, 3, 1}).squeeze(2).sizes() == Shape{1, 3});
  CHECK(iota({1, 3, 1}).squeeze(1).sizes() == Shape{1, 3, 1});
  CHECK(iota({3}).unsqueeze(0).sizes() == Shape{1, 3});
  CHECK(iota({3}).unsqueeze(-1).sizes() == Shape{3, 1});
  CHECK(iota({2, 3, 4}).flatten().sizes() == Shape{24});
  CHECK(iota({2, 3, 4}).flatten(1).sizes() == Shape{2, 12});
  CHECK(iota({2, 3, 4, 5}).flatten(1, 2).sizes() == Shape{2, 12, 5});
}

TEST_CASE("views are differentiable") {
  Tensor x = leaf({2, 3, 4});
  CHECK(gradcheck([](const TensorList& in) { return in[0].view({6, 4}); }, {x}));
  CHECK(gradcheck([](const TensorList& in) { return in[0].transpose(0, 2).reshape({24}); }, {x}));
  CHECK(gradcheck([](const TensorList& in) { return in[0].permute({1, 2, 0}); }, {x}));
  CHECK(gradcheck([](const TensorList& in) { return in[0].narrow(2, 1, 2); }, {x}));
  CHECK(gradcheck([](const TensorList& in) { return in[0].slice(1, 0, 3, 2); }, {x}));
  CHECK(gradcheck([](const TensorList& in) { return in[0].select(1, 2); }, {x}));
  CHECK(gradcheck([](const TensorList& in) { return in[0].unsqueeze(1).squeeze(1); }, {x}));
  CHECK(gradcheck([](const TensorList& in) { return in[0].flatten(0, 1); }, {x}));
  Tensor y = leaf({3, 1});
  CHECK(gradcheck([](const TensorList& in) { return in[0].expand({2, 3, 4}); }, {y}));
  // A non-contiguous input.
  Tensor base = leaf({4, 3});
  CHECK(gradcheck([](const TensorList& in) { return in[0].t().reshape({2, 6}); }, {base}));
}
