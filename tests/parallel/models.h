// Small models for the parallel tests: an MLP, a CNN (no BatchNorm) and a model with BatchNorm-
// like running statistics, all Cloneable so DataParallel can replicate them.
#pragma once

#include <cmath>

#include <octo/octo.h>

namespace test_models {

using octo::Tensor;
namespace nn = octo::nn;

struct Mlp : nn::Cloneable<Mlp> {
  explicit Mlp(int64_t in = 6, int64_t hidden = 8, int64_t out = 3)
      : Cloneable("Mlp"), in(in), hidden(hidden), out(out) {
    reset();
  }
  void reset() override {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(in, hidden));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(hidden, out));
  }
  Tensor forward(const Tensor& x) override { return fc2->forward(octo::tanh(fc1->forward(x))); }
  int64_t in, hidden, out;
  std::shared_ptr<nn::Linear> fc1, fc2;
};

/// conv(3x3, pad 1) -> relu -> maxpool 2 -> conv(3x3) -> relu -> flatten -> linear.
struct Cnn : nn::Cloneable<Cnn> {
  Cnn() : Cloneable("Cnn") { reset(); }
  void reset() override {
    w1 = register_parameter("w1", octo::randn({4, 1, 3, 3}) * (1.0 / 3.0));
    b1 = register_parameter("b1", octo::zeros({4}));
    w2 = register_parameter("w2", octo::randn({6, 4, 3, 3}) * (1.0 / 6.0));
    b2 = register_parameter("b2", octo::zeros({6}));
    fc = register_module("fc", std::make_shared<nn::Linear>(6 * 2 * 2, 5));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = octo::relu(octo::conv2d(x, w1, b1, {1, 1}, {1, 1}));
    h = octo::max_pool2d(h, {2, 2});
    h = octo::relu(octo::conv2d(h, w2, b2));
    return fc->forward(h.flatten(1));
  }
  Tensor w1, b1, w2, b2;
  std::shared_ptr<nn::Linear> fc;
};

/// Normalises with batch statistics and keeps a running mean buffer, like BatchNorm1d.
struct RunningMean : nn::Cloneable<RunningMean> {
  RunningMean() : Cloneable("RunningMean") { reset(); }
  void reset() override {
    running_mean = register_buffer("running_mean", octo::zeros({3}));
    fc = register_module("fc", std::make_shared<nn::Linear>(3, 3));
  }
  Tensor forward(const Tensor& x) override {
    Tensor m = octo::mean(x, {0});
    if (is_training()) {
      octo::NoGradGuard no_grad;
      running_mean.mul_(0.9);
      running_mean.add_(m.detach(), 0.1);
    }
    return fc->forward(x - m);
  }
  Tensor running_mean;
  std::shared_ptr<nn::Linear> fc;
};

}  // namespace test_models
