// Tests for batch_norm_relu (Note [Fused batch norm + ReLU]): gradchecks, and the same bits as
// relu(batch_norm(...)) in values, gradients and running statistics, for every dtype and layout.
#include <catch2/catch.hpp>

#include <octo/octo.h>

#include <cstring>
#include <random>

#include "kernels/backend.h"

using Catch::Matchers::Contains;
using octo::DType;
using octo::Shape;
using octo::Tensor;
using octo::autograd::TensorList;

namespace {

Tensor rand_tensor(const Shape& shape, uint32_t seed, DType dtype = octo::kFloat64,
                   bool requires_grad = false) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> dist(0.3, 1.0);  // off-centre: some channels mostly positive
  std::vector<double> v(static_cast<size_t>(octo::detail::shape_numel(shape)));
  for (double& x : v) x = dist(gen);
  Tensor t = octo::tensor(v, shape, {.dtype = dtype});
  if (requires_grad) t.requires_grad_();
  return t;
}

/// The same bits: every dtype octo has widens to double exactly and injectively, so comparing
/// the doubles' bytes compares the values' bits (the sign of a zero included).
void require_same_bits(const Tensor& got, const Tensor& want) {
  REQUIRE(got.defined() == want.defined());
  if (!got.defined()) return;
  REQUIRE(got.dtype() == want.dtype());
  REQUIRE(got.sizes() == want.sizes());
  const auto a = got.to_vector<double>(), b = want.to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i) {
    INFO("element " << i << ": " << a[i] << " vs " << b[i]);
    REQUIRE(std::memcmp(&a[i], &b[i], sizeof(double)) == 0);
  }
}

struct Case {
  DType dtype = octo::kFloat32;        // the input's
  DType param_dtype = octo::kFloat32;  // weight, bias and running statistics
  bool training = true;
  bool affine = true;
  bool strided = false;  // the input a transposed view
};

/// The output, the gradients of input, weight and bias, and the running statistics after one
/// forward and backward of the fused op (fused) or of relu(batch_norm(...)).
TensorList run(const Case& c, bool fused) {
  const Shape shape{4, 3, 5, 6};  // 30 values per plane: the 8-lane sums have a tail
  Tensor x = c.strided ? rand_tensor({4, 3, 6, 5}, 1, c.dtype).transpose(2, 3)
                       : rand_tensor(shape, 1, c.dtype);
  x.requires_grad_();
  Tensor w, b;
  if (c.affine) {
    w = rand_tensor({3}, 2, c.param_dtype, true);
    b = rand_tensor({3}, 3, c.param_dtype, true);
  }
  Tensor rm = rand_tensor({3}, 4, c.param_dtype) * 0.1;
  Tensor rv = rand_tensor({3}, 5, c.param_dtype).abs() + 0.5;
  Tensor y = fused ? octo::batch_norm_relu(x, rm, rv, w, b, c.training, 0.1, 1e-5)
                   : octo::relu(octo::batch_norm(x, rm, rv, w, b, c.training, 0.1, 1e-5));
  y.backward(rand_tensor(shape, 6, c.dtype));
  return {y,  x.grad(), w.defined() ? w.grad() : Tensor(), b.defined() ? b.grad() : Tensor(),
          rm, rv};
}

}  // namespace

TEST_CASE("batch_norm_relu: gradcheck in float64", "[norm][gradcheck]") {
  for (const Shape& shape : std::vector<Shape>{{4, 3}, {2, 3, 3, 2}, {3, 2, 5}}) {
    INFO("shape " << octo::shape_str(shape));
    const int64_t C = shape[1];
    Tensor x = rand_tensor(shape, 20, octo::kFloat64, true);
    Tensor w = rand_tensor({C}, 21, octo::kFloat64, true);
    Tensor b = rand_tensor({C}, 22, octo::kFloat64, true);
    Tensor rm = octo::zeros({C}, {.dtype = octo::kFloat64});
    Tensor rv = octo::ones({C}, {.dtype = octo::kFloat64});
    REQUIRE(octo::autograd::gradcheck(
        [&](const TensorList& in) {
          return octo::batch_norm_relu(in[0], rm, rv, in[1], in[2], true, 0.1, 1e-5);
        },
        {x, w, b}));
    REQUIRE(octo::autograd::gradcheck(
        [](const TensorList& in) { return octo::batch_norm_relu(in[0], {}, {}, {}, {}, true); },
        {x}));
    // Eval: the running statistics are constants.
    Tensor erm = rand_tensor({C}, 23) * 0.1, erv = rand_tensor({C}, 24).abs() + 0.5;
    REQUIRE(octo::autograd::gradcheck(
        [&](const TensorList& in) {
          return octo::batch_norm_relu(in[0], erm, erv, in[1], in[2], false, 0.1, 1e-5);
        },
        {x, w, b}));
  }
  // A non-contiguous input.
  Tensor x = rand_tensor({3, 2, 4}, 30, octo::kFloat64, true);  // used as [4, 2, 3]
  Tensor w = rand_tensor({2}, 31, octo::kFloat64, true);
  REQUIRE(octo::autograd::gradcheck(
      [](const TensorList& in) {
        return octo::batch_norm_relu(in[0].transpose(0, 2), {}, {}, in[1], {}, true);
      },
      {x, w}));
}

TEST_CASE("batch_norm_relu: the bits of relu(batch_norm(...))", "[norm]") {
  std::vector<Case> cases;
  for (DType dt : {octo::kFloat32, octo::kFloat64})
    for (bool training : {true, false})
      for (bool affine : {true, false})
        for (bool strided : {false, true}) cases.push_back({dt, dt, training, affine, strided});
  // 16-bit input beside float32 parameters (autocast's case, run natively) and beside 16-bit
  // parameters (staged through float32, so the fused op runs the two kernels).
  for (DType dt : {octo::kBFloat16, octo::kFloat16})
    for (DType pt : {octo::kFloat32, dt})
      for (bool training : {true, false}) cases.push_back({dt, pt, training, true, false});
  for (const Case& c : cases) {
    INFO(c.dtype << " input, " << c.param_dtype << " parameters, training " << c.training
                 << ", affine " << c.affine << ", strided " << c.strided);
    const TensorList fused = run(c, true), composite = run(c, false);
    for (size_t i = 0; i < fused.size(); ++i) {
      INFO("result " << i << " (output, grad input, grad weight, grad bias, running mean, var)");
      require_same_bits(fused[i], composite[i]);
    }
  }
}

TEST_CASE("batch_norm_relu: the CPU kernel fuses the cases it claims", "[norm]") {
  auto& cpu = octo::kernels::backend(octo::Device("cpu"));
  auto try_forward = [&](DType dt, DType pt) {
    Tensor x = rand_tensor({4, 3, 2}, 40, dt);
    Tensor out = octo::empty(x.sizes(), {.dtype = dt});
    const DType st = octo::is_half(dt) ? octo::kFloat32 : dt;
    Tensor mean = octo::empty({3}, {.dtype = st}), invstd = octo::empty({3}, {.dtype = st});
    Tensor w = octo::ones({3}, {.dtype = pt});
    return cpu.batch_norm_relu_forward(out.arg(), mean.arg(), invstd.arg(), x.arg(), w.arg(),
                                       Tensor().arg(), Tensor().arg(), Tensor().arg(), true, 0.1,
                                       1e-5);
  };
  CHECK(try_forward(octo::kFloat32, octo::kFloat32));
  CHECK(try_forward(octo::kFloat64, octo::kFloat64));
  CHECK(try_forward(octo::kBFloat16, octo::kFloat32));
  CHECK(try_forward(octo::kFloat16, octo::kFloat32));
  CHECK_FALSE(try_forward(octo::kBFloat16, octo::kBFloat16));  // staged: left to the caller
}

TEST_CASE("batch_norm_relu: records one node and checks its inputs as batch_norm", "[norm]") {
  Tensor x = rand_tensor({4, 3}, 50, octo::kFloat64, true);
  Tensor y = octo::batch_norm_relu(x, {}, {}, {}, {}, true);
  REQUIRE(y.grad_fn() != nullptr);
  CHECK(y.grad_fn()->name() == "BatchNormReluBackward");
  REQUIRE_THROWS_AS(octo::batch_norm_relu(rand_tensor({4}, 51), {}, {}, {}, {}, true),
                    octo::ValueError);
  REQUIRE_THROWS_WITH(octo::batch_norm_relu(rand_tensor({4}, 51), {}, {}, {}, {}, true),
                      Contains("batch_norm_relu") && Contains("at least 2 dims"));
  REQUIRE_THROWS_WITH(
      octo::batch_norm_relu(x, {}, {}, octo::ones({4}, {.dtype = octo::kFloat64}), {}, true),
      Contains("weight") && Contains("[3]"));
  Tensor w1 = octo::ones({3}, {.dtype = octo::kFloat64, .device = octo::Device("cpu:1")});
  REQUIRE_THROWS_AS(octo::batch_norm_relu(x, {}, {}, w1, {}, true), octo::DeviceError);
  // An in-place change to the saved output is detected at backward.
  Tensor y2 = octo::batch_norm_relu(x, {}, {}, {}, {}, true);
  {
    octo::NoGradGuard no_grad;
    y2.fill_(1.0);
  }
  REQUIRE_THROWS_WITH(y2.backward(octo::ones({4, 3}, {.dtype = octo::kFloat64})),
                      Contains("modified by an inplace operation"));
}
