// The MNIST example's models: an MLP and a LeNet-style CNN (optionally with BatchNorm).
// The GPU benchmark (bench/bench_gpu.cpp) trains these same definitions; tools/bench_torch.py
// builds the same networks in PyTorch.
#pragma once

#include <memory>

#include <octo/octo.h>

namespace examples {

namespace nn = octo::nn;
using octo::Tensor;

// 784 -> 256 -> 128 -> 10 with ReLU.
struct Mlp : nn::Cloneable<Mlp> {
  Mlp() : Cloneable("Mlp") { reset(); }
  void reset() override {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(784, 256));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(256, 128));
    fc3 = register_module("fc3", std::make_shared<nn::Linear>(128, 10));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = octo::relu(fc1->forward(x.flatten(1)));
    return fc3->forward(octo::relu(fc2->forward(h)));
  }
  std::shared_ptr<nn::Linear> fc1, fc2, fc3;
};

// LeNet-5 style: conv5x5(pad 2)-[BN]-relu-pool2 - conv5x5-[BN]-relu-pool2 - 400->120->84->10,
// with the channel counts (6, 16) multiplied by `width`.
struct LeNet : nn::Cloneable<LeNet> {
  LeNet(int64_t width, bool batchnorm) : Cloneable("LeNet"), width(width), batchnorm(batchnorm) {
    reset();
  }
  void reset() override {
    int64_t c1 = 6 * width, c2 = 16 * width;
    auto block = [&](int64_t in, int64_t out, int64_t pad) {
      auto seq = std::make_shared<nn::Sequential>();
      seq->push_back(std::make_shared<nn::Conv2d>(
          in, out, 5, nn::Conv2dOptions{.padding = pad, .bias = !batchnorm}));
      if (batchnorm) seq->push_back(std::make_shared<nn::BatchNorm2d>(out));
      seq->push_back(std::make_shared<nn::ReLU>());
      seq->push_back(std::make_shared<nn::MaxPool2d>(2));
      return seq;
    };
    features = register_module(
        "features", std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
                        block(1, c1, 2), block(c1, c2, 0)}));
    classifier = register_module(
        "classifier",
        std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
            std::make_shared<nn::Linear>(c2 * 5 * 5, 120), std::make_shared<nn::ReLU>(),
            std::make_shared<nn::Linear>(120, 84), std::make_shared<nn::ReLU>(),
            std::make_shared<nn::Linear>(84, 10)}));
  }
  Tensor forward(const Tensor& x) override {
    return classifier->forward(features->forward(x).flatten(1));
  }
  int64_t width;
  bool batchnorm;
  std::shared_ptr<nn::Sequential> features, classifier;
};

}  // namespace examples
