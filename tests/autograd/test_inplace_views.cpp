// In-place ops on views (Note [In-place ops on views]): each case of docs/internals/autograd.md's
// table, checked against central differences (gradcheck) and, where PyTorch gives a closed form,
// against that value; then the errors PyTorch raises, and double backward through CopySlices.
#include <catch2/catch.hpp>
#include <functional>
#include <string>

#include <octo/octo.h>

using octo::Tensor;
using octo::autograd::gradcheck;
using octo::autograd::gradgradcheck;
using octo::autograd::TensorList;

namespace {

Tensor r(const octo::Shape& shape, bool grad = true) {
  return octo::randn(shape, {.dtype = octo::kFloat64, .requires_grad = grad});
}

struct Case {
  const char* name;
  std::function<Tensor(const TensorList&)> fn;
  TensorList inputs;
};

}  // namespace

TEST_CASE("in-place ops on views: gradients match central differences") {
  std::vector<Case> cases = {
      {"x[:, 0].mul_(2)",
       [](const TensorList& in) {
         Tensor x = in[0] * 1.0;
         x.select(1, 0).mul_(2.0);
         return x * x;
       },
       {r({3, 4})}},
      {"x[1:3].add_(b) with b requiring grad",
       [](const TensorList& in) {
         Tensor x = in[0].clone();
         x.slice(0, 1, 3).add_(in[1]);
         return x.exp();
       },
       {r({4, 3}), r({2, 3})}},
      {"zeros(4)[0:2].copy_(w): a base that did not require grad",
       [](const TensorList& in) {
         Tensor x = octo::zeros({4}, {.dtype = octo::kFloat64});
         x.slice(0, 0, 2).copy_(in[0]);
         return x * x + 1.0;
       },
       {r({2})}},
      {"a view of a view: x.t()[1].mul_(w)",
       [](const TensorList& in) {
         Tensor x = in[0] * 1.0;
         x.t().select(0, 1).mul_(in[1]);
         return x.tanh() * 2.0;
       },
       {r({3, 4}), r({3})}},
      {"a sibling view made before the op sees it: p = x[1]; x[1].mul_(3); p",
       [](const TensorList& in) {
         Tensor x = in[0] * 1.0;
         Tensor p = x.select(0, 1);
         x.select(0, 1).mul_(3.0);
         return p * p;
       },
       {r({3, 2})}},
      {"a view made before an in-place op on its base: v = x[0]; x.mul_(w); v",
       [](const TensorList& in) {
         Tensor x = in[0] * 1.0;
         Tensor v = x.select(0, 0);
         x.mul_(in[1]);
         return v.exp();
       },
       {r({2, 3}), r({2, 3})}},
      {"x[:, 2].fill_(0): the overwritten part gets no gradient",
       [](const TensorList& in) {
         Tensor x = in[0] * 1.0;
         x.select(1, 2).fill_(0.0);
         return x * x;
       },
       {r({2, 3})}},
      {"two in-place ops on two views of one base",
       [](const TensorList& in) {
         Tensor x = in[0] * 1.0;
         x.select(0, 0).mul_(in[1]);
         x.slice(1, 1, 3).add_(in[0].slice(1, 0, 2), 2.0);
         return x * x;
       },
       {r({3, 3}), r({3})}},
      {"a strided slice x[::2].mul_(w) of a reshaped view",
       [](const TensorList& in) {
         Tensor x = in[0] * 1.0;
         x.view({6}).slice(0, 0, 6, 2).mul_(in[1]);
         return x.tanh();
       },
       {r({2, 3}), r({3})}},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    CHECK(gradcheck(c.fn, c.inputs));
    CHECK(gradgradcheck(c.fn, c.inputs));
  }
}

TEST_CASE("x[:, 0].mul_(2) gives PyTorch's gradient and CopySlices as the base's grad_fn") {
  Tensor a = r({3, 2});
  Tensor x = a * 1.0;
  Tensor col = x.select(1, 0);
  col.mul_(2.0);
  REQUIRE(x.grad_fn());
  CHECK(x.grad_fn()->name() == "CopySlices");
  CHECK(col.grad_fn()->name() == "AsStridedBackward");
  x.sum().backward();
  // d/da of sum(x) with x[:, 0] doubled: 2 in column 0, 1 in column 1 (torch gives the same).
  auto g = a.grad().to_vector<double>();
  CHECK(g == std::vector<double>{2, 1, 2, 1, 2, 1});
}

TEST_CASE("a base that did not require grad requires it after an in-place op with one that does") {
  Tensor w = r({2});
  Tensor x = octo::zeros({3}, {.dtype = octo::kFloat64});
  Tensor head = x.slice(0, 0, 2);
  CHECK_FALSE(x.requires_grad());
  head.copy_(w);
  CHECK(x.requires_grad());
  CHECK_FALSE(x.is_leaf());
  (x * x).sum().backward();
  auto wv = w.to_vector<double>(), gv = w.grad().to_vector<double>();
  for (size_t i = 0; i < wv.size(); ++i) CHECK(gv[i] == Approx(2 * wv[i]));
}

TEST_CASE("in-place on a view of a leaf that requires grad is refused, as in PyTorch") {
  Tensor a = r({3, 2});
  try {
    a.select(1, 0).mul_(2.0);
    FAIL("no error");
  } catch (const octo::Error& e) {
    CHECK_THAT(
        e.what(),
        Catch::Contains(
            "a view of a leaf Variable that requires grad is being used in an in-place operation"));
  }
  // Under NoGradGuard (how optimizers update parameters) it is allowed and changes the leaf.
  {
    octo::NoGradGuard no_grad;
    a.select(1, 0).fill_(0.0);
  }
  CHECK(a.select(1, 0).abs().sum().item<double>() == 0.0);
  CHECK(a.is_leaf());
}

TEST_CASE("in-place on an expanded view is refused: its elements share memory") {
  Tensor b = r({1, 3}) * 1.0;
  Tensor e = b.expand({4, 3});
  CHECK_THROWS_WITH(
      e.mul_(2.0),
      Catch::Contains(
          "more than one element of the written-to tensor refers to a single memory location"));
}

TEST_CASE("in-place on a view is recorded only under grad mode; versions still move") {
  Tensor a = r({2, 2});
  Tensor x = a * 1.0;
  Tensor v = x.select(0, 0);
  uint32_t before = x.version();
  {
    octo::NoGradGuard no_grad;
    v.mul_(2.0);
  }
  CHECK(x.version() == before + 1);
  CHECK(x.grad_fn()->name() == "MulBackward");  // unchanged: the op was not recorded
}
