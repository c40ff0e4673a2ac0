// Gradient checks for mm, bmm, matmul (1-d, batched, broadcast batches) and linear.
#include <catch2/catch.hpp>

#include <octo/octo.h>

using octo::Shape;
using octo::Tensor;
using octo::autograd::gradcheck;
using octo::autograd::TensorList;

namespace {
Tensor leaf(const Shape& shape) {
  return octo::randn(shape, {.dtype = octo::kFloat64, .requires_grad = true});
}
}  // namespace

TEST_CASE("mm gradcheck, contiguous and transposed operands") {
  octo::manual_seed(11);
  for (auto [M, K, N] : std::vector<std::array<int64_t, 3>>{{2, 3, 4}, {1, 1, 1}, {5, 1, 3}}) {
    INFO("M=" << M << " K=" << K << " N=" << N);
    CHECK(gradcheck([](const TensorList& in) { return octo::mm(in[0], in[1]); },
                    {leaf({M, K}), leaf({K, N})}));
    // Transposed views of leaves: the kernel reads them column-major.
    CHECK(gradcheck([](const TensorList& in) { return octo::mm(in[0].t(), in[1].t()); },
                    {leaf({K, M}), leaf({N, K})}));
  }
  // Only one side requires grad.
  Tensor w = octo::randn({3, 2}, {.dtype = octo::kFloat64});
  CHECK(gradcheck([w](const TensorList& in) { return octo::mm(in[0], w); }, {leaf({4, 3})}));
  CHECK(gradcheck([w](const TensorList& in) { return octo::mm(w.t(), in[0]); }, {leaf({3, 2})}));
}

TEST_CASE("mm backward gives g @ b^T and a^T @ g") {
  octo::manual_seed(12);
  Tensor a = leaf({2, 3}), b = leaf({3, 4});
  Tensor g = octo::randn({2, 4}, {.dtype = octo::kFloat64});
  octo::mm(a, b).backward(g);
  // Compare with products computed without autograd.
  Tensor ga = octo::mm(g, b.detach().t()), gb = octo::mm(a.detach().t(), g);
  auto x = a.grad().to_vector<double>(), y = ga.to_vector<double>();
  for (size_t i = 0; i < x.size(); ++i) CHECK(x[i] == Approx(y[i]));
  x = b.grad().to_vector<double>(), y = gb.to_vector<double>();
  for (size_t i = 0; i < x.size(); ++i) CHECK(x[i] == Approx(y[i]));
  CHECK(a.grad().sizes() == a.sizes());
  CHECK(b.grad().sizes() == b.sizes());
}

TEST_CASE("bmm gradcheck, including permuted operands") {
  octo::manual_seed(13);
  CHECK(gradcheck([](const TensorList& in) { return octo::bmm(in[0], in[1]); },
                  {leaf({3, 2, 4}), leaf({3, 4, 5})}));
  CHECK(gradcheck([](const TensorList& in) { return octo::bmm(in[0], in[1]); },
                  {leaf({1, 1, 1}), leaf({1, 1, 3})}));
  CHECK(gradcheck(
      [](const TensorList& in) {
        return octo::bmm(in[0].permute({2, 0, 1}), in[1].transpose(1, 2));
      },
      {leaf({2, 4, 3}), leaf({3, 5, 4})}));
}

TEST_CASE("matmul gradcheck over ranks, 1-d operands and broadcast batches") {
  octo::manual_seed(14);
  const std::vector<std::pair<Shape, Shape>> cases = {{{4}, {4}},
                                                      {{3}, {3, 5}},
                                                      {{3, 4}, {4}},
                                                      {{2, 3}, {3, 2}},
                                                      {{2, 3, 4}, {4, 2}},
                                                      {{3, 4}, {2, 4, 2}},
                                                      {{4}, {2, 4, 3}},
                                                      {{2, 3, 4}, {4}},
                                                      {{2, 3, 4}, {2, 4, 2}},
                                                      {{1, 3, 4}, {3, 4, 2}},
                                                      {{2, 1, 2, 3}, {3, 3, 2}},
                                                      {{2, 1, 2, 3}, {1, 2, 3, 2}}};
  for (auto& [sa, sb] : cases) {
    INFO(octo::shape_str(sa) << " @ " << octo::shape_str(sb));
    CHECK(gradcheck([](const TensorList& in) { return octo::matmul(in[0], in[1]); },
                    {leaf(sa), leaf(sb)}));
    Tensor a = leaf(sa), b = leaf(sb);
    Tensor out = octo::matmul(a, b);
    out.backward(octo::ones_like(out));
    CHECK(a.grad().sizes() == sa);
    CHECK(b.grad().sizes() == sb);
  }
  // Non-contiguous: a transposed batch, a strided vector, an expanded batch.
  CHECK(gradcheck([](const TensorList& in) { return octo::matmul(in[0].transpose(-1, -2), in[1]); },
                  {leaf({2, 4, 3}), leaf({4, 2})}));
  CHECK(gradcheck(
      [](const TensorList& in) { return octo::matmul(in[0], in[1].slice(0, 0, std::nullopt, 2)); },
      {leaf({2, 3, 4}), leaf({8})}));
  CHECK(gradcheck(
      [](const TensorList& in) {
        return octo::matmul(in[0].expand({3, 2, 4}), in[1]);
      },
      {leaf({1, 2, 4}), leaf({3, 4, 2})}));
  CHECK(gradcheck([](const TensorList& in) { return in[0].matmul(in[1]); },
                  {leaf({2, 3}), leaf({3, 2})}));
}

TEST_CASE("gradients flow through a chain of products") {
  octo::manual_seed(15);
  Tensor c = octo::randn({3, 4}, {.dtype = octo::kFloat64});
  CHECK(gradcheck(
      [c](const TensorList& in) { return octo::matmul(octo::matmul(in[0], in[1]), c.t()); },
      {leaf({2, 3}), leaf({3, 4})}));
  CHECK(gradcheck([](const TensorList& in) { return octo::linear(octo::bmm(in[0], in[1]), in[2]); },
                  {leaf({2, 3, 4}), leaf({2, 4, 5}), leaf({2, 5})}));
}

TEST_CASE("linear gradcheck with and without bias") {
  octo::manual_seed(16);
  for (const Shape& xs : {Shape{4}, Shape{3, 4}, Shape{2, 3, 4}}) {
    INFO("x " << octo::shape_str(xs));
    CHECK(gradcheck([](const TensorList& in) { return octo::linear(in[0], in[1]); },
                    {leaf(xs), leaf({2, 4})}));
    CHECK(gradcheck([](const TensorList& in) { return octo::linear(in[0], in[1], in[2]); },
                    {leaf(xs), leaf({2, 4}), leaf({2})}));
  }
  // Non-contiguous input and weight; a constant bias.
  Tensor bias = octo::randn({3}, {.dtype = octo::kFloat64});
  CHECK(gradcheck([bias](const TensorList& in) { return octo::linear(in[0].t(), in[1].t(), bias); },
                  {leaf({4, 5}), leaf({4, 3})}));
  // Only the bias requires grad.
  Tensor x = octo::randn({5, 4}, {.dtype = octo::kFloat64});
  Tensor w = octo::randn({3, 4}, {.dtype = octo::kFloat64});
  CHECK(gradcheck([x, w](const TensorList& in) { return octo::linear(x, w, in[0]); }, {leaf({3})}));
}

TEST_CASE("products record nothing without grad") {
  Tensor a = leaf({2, 3}), b = leaf({3, 2});
  {
    octo::NoGradGuard no_grad;
    CHECK_FALSE(octo::matmul(a, b).requires_grad());
    CHECK_FALSE(octo::linear(a, b.t()).requires_grad());
  }
  Tensor out = octo::matmul(a, b);
  REQUIRE(out.grad_fn() != nullptr);
  CHECK(out.grad_fn()->name() == "MmBackward");
  CHECK(octo::matmul(a.unsqueeze(0), b).grad_fn()->name() == "MatmulBackward");
  CHECK(octo::linear(a, b.t()).grad_fn()->name() == "LinearBackward");
  CHECK_FALSE(octo::matmul(a.detach(), b.detach()).requires_grad());
}
