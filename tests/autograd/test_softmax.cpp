// Gradients of softmax and log_softmax over every dim, contiguous or not.
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

Tensor transposed_leaf(int64_t a, int64_t b) {
  Tensor x = octo::randn({b, a}, {.dtype = octo::kFloat64}).t();
  x.requires_grad_();
  return x;
}

}  // namespace

TEST_CASE("softmax and log_softmax gradients") {
  std::vector<Tensor> inputs = {leaf({}),     leaf({1}),       leaf({5}),
                                leaf({3, 4}), leaf({2, 3, 4}), transposed_leaf(3, 5)};
  for (const Tensor& x : inputs) {
    int64_t nd = std::max<int64_t>(1, x.dim());
    for (int64_t dim = -nd; dim < nd; ++dim) {
      INFO("shape " << octo::shape_str(x.sizes()) << " dim " << dim);
      CHECK(gradcheck([&](const TensorList& in) { return octo::softmax(in[0], dim); }, {x}));
      CHECK(gradcheck([&](const TensorList& in) { return in[0].log_softmax(dim); }, {x}));
      // A non-contiguous view inside the function, too.
      if (x.dim() >= 2) {
        CHECK(gradcheck(
            [&](const TensorList& in) { return octo::softmax(in[0].transpose(0, 1), dim); }, {x}));
      }
    }
  }
}

TEST_CASE("softmax's gradient has the closed form y * (g - sum(g * y))") {
  Tensor x = leaf({2, 4});
  Tensor w = octo::randn({2, 4}, {.dtype = octo::kFloat64});
  Tensor y = octo::softmax(x, 1);
  (y * w).sum().backward();
  std::vector<double> yv = y.detach().to_vector<double>(), wv = w.to_vector<double>();
  std::vector<double> g = x.grad().to_vector<double>();
  for (int r = 0; r < 2; ++r) {
    double s = 0;
    for (int c = 0; c < 4; ++c) s += wv[r * 4 + c] * yv[r * 4 + c];
    for (int c = 0; c < 4; ++c)
      CHECK(g[r * 4 + c] == Approx(yv[r * 4 + c] * (wv[r * 4 + c] - s)).epsilon(1e-12));
  }
  // Softmax output rows sum to 1, so a plain sum has zero gradient.
  Tensor z = leaf({3, 5});
  octo::softmax(z, 1).sum().backward();
  for (double v : z.grad().to_vector<double>()) CHECK(v == Approx(0.0).margin(1e-12));
}

TEST_CASE("log_softmax composes with the rest of a loss") {
  // The cross-entropy-like pattern: -log_softmax(x)[target] averaged.
  Tensor x = leaf({4, 6});
  Tensor onehot = octo::zeros({4, 6}, {.dtype = octo::kFloat64});
  for (int r = 0; r < 4; ++r) onehot.select(0, r).select(0, (r * 5) % 6).fill_(1.0);
  CHECK(gradcheck(
      [&](const TensorList& in) { return -(octo::log_softmax(in[0], 1) * onehot).sum() / 4.0; },
      {x}));
  CHECK(gradcheck([&](const TensorList& in) { return octo::log_softmax(in[0] * 3.0, 0).mean(); },
                  {x}));
}
