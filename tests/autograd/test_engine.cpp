// The engine: tape order, retain_graph, version checks, hooks, accumulation, autograd::grad.
#include <catch2/catch.hpp>

#include <memory>

#include <octo/octo.h>

using octo::Tensor;
using octo::autograd::TensorList;

namespace {
Tensor leaf(std::initializer_list<double> v) {
  return octo::tensor(v, {.dtype = octo::kFloat64, .requires_grad = true});
}
std::vector<double> vec(const Tensor& t) { return t.to_vector<double>(); }
}  // namespace

TEST_CASE("backward computes gradients of a small expression") {
  Tensor x = leaf({1, 2, 3});
  Tensor w = leaf({4, 5, 6});
  Tensor y = (x * w + x).sum();  // dy/dx = w + 1, dy/dw = x
  CHECK(y.item<double>() == 4 + 10 + 18 + 6);
  y.backward();
  CHECK(vec(x.grad()) == std::vector<double>{5, 6, 7});
  CHECK(vec(w.grad()) == std::vector<double>{1, 2, 3});
  CHECK(x.is_leaf());
  CHECK_FALSE(y.is_leaf());
  CHECK(y.grad_fn()->name() == "SumBackward");
}

TEST_CASE("no_grad records nothing") {
  Tensor x = leaf({1, 2});
  Tensor y;
  {
    octo::NoGradGuard guard;
    y = x * x;
    {
      octo::EnableGradGuard enable;
      CHECK((x * x).requires_grad());
    }
  }
  CHECK_FALSE(y.requires_grad());
  CHECK(y.grad_fn() == nullptr);
  CHECK_THROWS_WITH(y.sum().backward(), Catch::Contains("does not require grad"));
}

TEST_CASE("retain_graph allows a second backward; without it the error is clear") {
  Tensor x = leaf({2});
  Tensor y = (x * x).sum();
  y.backward({}, /*retain_graph=*/true);
  y.backward();
  CHECK(vec(x.grad()) == std::vector<double>{8});  // 4 + 4: accumulated
  CHECK_THROWS_WITH(y.backward(),
                    Catch::Contains("Trying to backward through the graph a second time") &&
                        Catch::Contains("retain_graph"));
}

TEST_CASE("an in-place change to a saved tensor is reported at backward") {
  Tensor x = leaf({1, 2});
  Tensor a = x * 2;
  Tensor y = (a * a).sum();  // saves a
  {
    a.add_(octo::ones_like(a));  // a is not a leaf: allowed, but invalidates the saved value
  }
  CHECK_THROWS_WITH(y.backward(), Catch::Contains("modified by an inplace operation") &&
                                      Catch::Contains("MulBackward") &&
                                      Catch::Contains("is at version 1; expected version 0"));
}

TEST_CASE("a saved input rebased by an in-place op onto the saving node's result is freed") {
  // a.copy_(maximum(a, b)) gives a a CopyBackward leading to MaximumBackward, which saved a: if
  // the node held a itself, node -> a -> node would be a cycle never freed (Note [Saved tensors
  // and double backward]).
  std::weak_ptr<octo::autograd::Node> node;
  {
    Tensor x = leaf({1, 2, 3});
    Tensor a = x * 2;
    Tensor m = octo::maximum(a, octo::full({3}, 3.0, {.dtype = octo::kFloat64}));
    node = m.grad_fn();
    a.copy_(m);
    CHECK_FALSE(node.expired());
    CHECK_THROWS_WITH(a.sum().backward(), Catch::Contains("modified by an inplace operation"));
  }
  CHECK(node.expired());
}

TEST_CASE("in-place ops on leaves that require grad are refused") {
  Tensor x = leaf({1, 2});
  CHECK_THROWS_WITH(
      x.add_(octo::ones_like(x)),
      Catch::Contains("a leaf Variable that requires grad is being used in an in-place operation"));
  octo::NoGradGuard guard;
  x.add_(octo::ones_like(x));  // allowed without grad mode (what optimizers do)
  CHECK(vec(x) == std::vector<double>{2, 3});
}

TEST_CASE("gradient flows through in-place ops on non-leaves") {
  Tensor x = leaf({1, 2});
  Tensor y = leaf({2, 5});
  Tensor a = x * 3;
  a.mul_(y);  // a = 3x * y
  a.sum().backward();
  CHECK(vec(x.grad()) == std::vector<double>{6, 15});  // 3y
  CHECK(vec(y.grad()) == std::vector<double>{3, 6});   // 3x
  // Multiplying by an alias of itself saves a value the op then overwrites: reported.
  Tensor b = x * 3;
  b.mul_(b.detach());
  CHECK_THROWS_WITH(b.sum().backward(), Catch::Contains("modified by an inplace operation"));
}

TEST_CASE("gradients accumulate across backward calls until zeroed") {
  Tensor x = leaf({1, 1});
  (x * 3).sum().backward();
  (x * 4).sum().backward();
  CHECK(vec(x.grad()) == std::vector<double>{7, 7});
  x.grad().zero_();
  (x * 5).sum().backward();
  CHECK(vec(x.grad()) == std::vector<double>{5, 5});
  x.set_grad(Tensor());
  (x * 2).sum().backward();
  CHECK(vec(x.grad()) == std::vector<double>{2, 2});
}

TEST_CASE("autograd::grad returns gradients and leaves .grad untouched") {
  Tensor x = leaf({1, 2});
  Tensor w = leaf({3, 4});
  Tensor y = (x * w).sum();
  TensorList g = octo::autograd::grad({y}, {x});
  CHECK(vec(g[0]) == std::vector<double>{3, 4});
  CHECK_FALSE(x.grad().defined());
  CHECK_FALSE(w.grad().defined());
  Tensor z = leaf({1});
  Tensor y2 = (x * x).sum();
  CHECK_THROWS_WITH(octo::autograd::grad({y2}, {z}), Catch::Contains("allow_unused"));
}

TEST_CASE("hooks fire in reverse tape order and can replace gradients") {
  Tensor x = leaf({1, 2});
  std::vector<std::string> order;
  Tensor a = x * 2;
  Tensor b = a * 3;
  Tensor c = b * 4;
  a.register_hook([&](const Tensor&) {
    order.push_back("a");
    return Tensor();
  });
  b.register_hook([&](const Tensor& g) {
    order.push_back("b");
    return g * 0.5;
  });
  c.register_hook([&](const Tensor&) {
    order.push_back("c");
    return Tensor();
  });
  x.register_hook([&](const Tensor&) {
    order.push_back("x");
    return Tensor();
  });
  c.sum().backward();
  CHECK(order == std::vector<std::string>{"c", "b", "a", "x"});
  CHECK(vec(x.grad()) == std::vector<double>{12, 12});  // 24 halved by b's hook
}

TEST_CASE("post-accumulate hooks run after .grad is updated") {
  Tensor x = leaf({1, 2});
  std::vector<double> seen;
  x.register_post_accumulate_grad_hook([&](Tensor& t) { seen = vec(t.grad()); });
  (x * 5).sum().backward();
  CHECK(seen == std::vector<double>{5, 5});
  Tensor y = x * 2;
  CHECK_THROWS_AS(y.register_post_accumulate_grad_hook([](Tensor&) {}), octo::Error);
}

TEST_CASE("retain_grad keeps a non-leaf's gradient") {
  Tensor x = leaf({1, 2});
  Tensor a = x * 2;
  a.retain_grad();
  (a * a).sum().backward();
  CHECK(vec(a.grad()) == std::vector<double>{4, 8});
  Tensor b = x * 3;
  (b * b).sum().backward();
  CHECK_FALSE(b.grad().defined());
}

TEST_CASE("the tape orders nodes by sequence number and diamonds sum their branches") {
  Tensor x = leaf({3});
  Tensor a = x * 2;
  Tensor b = a * a;  // uses a twice
  Tensor c = a + b;  // diamond: two paths from c to a
  CHECK(b.grad_fn()->sequence_nr() > a.grad_fn()->sequence_nr());
  CHECK(c.grad_fn()->sequence_nr() > b.grad_fn()->sequence_nr());
  c.sum().backward();
  // c = 2x + 4x^2 -> dc/dx = 2 + 8x = 26
  CHECK(vec(x.grad()) == std::vector<double>{26});
}

TEST_CASE("backward needs a gradient for non-scalar outputs") {
  Tensor x = leaf({1, 2});
  Tensor y = x * 2;
  CHECK_THROWS_WITH(y.backward(),
                    Catch::Contains("grad can be implicitly created only for scalar outputs"));
  y.backward(octo::tensor({1, 10}, {.dtype = octo::kFloat64}));
  CHECK(vec(x.grad()) == std::vector<double>{2, 20});
}

TEST_CASE("gradients cross virtual devices through to()") {
  Tensor x = leaf({1, 2});
  Tensor y = x.to(octo::Device("cpu:1")) * 3;
  CHECK(y.device() == octo::Device("cpu:1"));
  y.sum().backward();
  CHECK(x.grad().device() == octo::Device("cpu:0"));
  CHECK(vec(x.grad()) == std::vector<double>{3, 3});
  Tensor z = octo::ones({2}, {.dtype = octo::kFloat64, .device = octo::Device("cpu:1")});
  CHECK_THROWS_AS(x * z, octo::DeviceError);
  CHECK_THROWS_WITH(
      x * z,
      Catch::Contains(
          "Expected all tensors to be on the same device, but found at least two devices, cpu:0 and cpu:1!"));
}

TEST_CASE("to_dot shows the recorded graph") {
  Tensor x = leaf({1, 2});
  Tensor y = (x * x).sum();
  std::string dot = octo::autograd::to_dot(y);
  CHECK_THAT(dot, Catch::StartsWith("digraph"));
  CHECK_THAT(dot, Catch::Contains("SumBackward"));
  CHECK_THAT(dot, Catch::Contains("MulBackward"));
  CHECK_THAT(dot, Catch::Contains("AccumulateGrad"));
  CHECK_THAT(dot, Catch::Contains("float64 [2]"));  // saved tensors' shapes
  CHECK_THAT(dot, Catch::Contains("cpu:0"));
}

TEST_CASE("a 3-layer MLP built from raw ops learns XOR to zero training error") {
  octo::manual_seed(0);
  // XOR with a margin: four clusters of points, label = sign(x0) xor sign(x1).
  const int n = 64;
  Tensor x = octo::randn({n, 2}, {.dtype = octo::kFloat64}) * 0.1;
  std::vector<double> signs, labels;
  for (int i = 0; i < n; ++i) {
    double s0 = (i & 1) ? 1 : -1, s1 = (i & 2) ? 1 : -1;
    signs.push_back(s0);
    signs.push_back(s1);
    labels.push_back(s0 * s1 < 0 ? 1.0 : 0.0);
  }
  x = x + octo::tensor(signs, {n, 2}, {.dtype = octo::kFloat64});
  Tensor y = octo::tensor(labels, {n, 1}, {.dtype = octo::kFloat64});
  auto param = [](octo::Shape s, double scale) {
    return (octo::randn(s, {.dtype = octo::kFloat64}) * scale).requires_grad_();
  };
  Tensor w1 = param({2, 16}, 0.7), b1 = param({16}, 0.0);
  Tensor w2 = param({16, 16}, 0.25), b2 = param({16}, 0.0);
  Tensor w3 = param({16, 1}, 0.25), b3 = param({1}, 0.0);
  std::vector<Tensor> params{w1, b1, w2, b2, w3, b3};
  double loss_value = 0;
  for (int step = 0; step < 300; ++step) {
    Tensor h1 = octo::tanh(octo::matmul(x, w1) + b1);
    Tensor h2 = octo::tanh(octo::matmul(h1, w2) + b2);
    Tensor p = octo::sigmoid(octo::matmul(h2, w3) + b3);
    Tensor loss = octo::mean(octo::square(p - y));
    loss_value = loss.item<double>();
    loss.backward();
    octo::NoGradGuard no_grad;
    for (Tensor& t : params) {
      t.add_(t.grad(), -0.5);
      t.grad().zero_();
    }
  }
  Tensor h1 = octo::tanh(octo::matmul(x, w1) + b1);
  Tensor h2 = octo::tanh(octo::matmul(h1, w2) + b2);
  Tensor pred = octo::gt(octo::matmul(h2, w3) + b3, octo::zeros({1}, {.dtype = octo::kFloat64}));
  auto p = pred.to(octo::kFloat64).to_vector<double>();
  int errors = 0;
  for (int i = 0; i < n; ++i) errors += p[i] != labels[i];
  INFO("final loss " << loss_value);
  CHECK(errors == 0);
}

TEST_CASE("gradients of a small MLP and a small CNN match finite differences") {
  using octo::autograd::gradcheck;
  octo::manual_seed(3);
  auto p = [](octo::Shape s) {
    return octo::randn(s, {.dtype = octo::kFloat64, .requires_grad = true});
  };
  Tensor x = p({4, 5}), w1 = p({5, 6}), b1 = p({6}), w2 = p({6, 3}), b2 = p({3});
  Tensor labels = octo::tensor({0, 2, 1, 2}, {.dtype = octo::kInt64});
  CHECK(gradcheck(
      [&](const TensorList& in) {
        Tensor h = octo::tanh(octo::matmul(in[0], in[1]) + in[2]);
        Tensor logits = octo::matmul(h, in[3]) + in[4];
        return octo::nn::functional::cross_entropy(logits, labels);
      },
      {x, w1, b1, w2, b2}));
  Tensor img = p({2, 1, 6, 6}), k1 = p({3, 1, 3, 3}), c1 = p({3}), fc = p({3 * 2 * 2, 2});
  CHECK(gradcheck(
      [&](const TensorList& in) {
        Tensor h = octo::relu(octo::conv2d(in[0], in[1], in[2], {1, 1}, {1, 1}));
        h = octo::avg_pool2d(h, {3, 3});
        return octo::sum(octo::square(octo::matmul(h.flatten(1), in[3])));
      },
      {img, k1, c1, fc}));
}
