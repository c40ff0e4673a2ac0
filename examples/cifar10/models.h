// The CIFAR-10 example's network: a ResNet-9-style CNN (conv_bn blocks and two residual blocks).
// The GPU benchmark (bench/bench_gpu.cpp) trains these same definitions; tools/bench_torch.py
// builds the same networks in PyTorch.
#pragma once

#include <memory>

#include <octo/octo.h>

namespace examples {

namespace nn = octo::nn;
using octo::Tensor;

// conv3x3 (no bias) - BatchNorm - ReLU, optionally followed by a 2x2 max-pool.
inline std::shared_ptr<nn::Sequential> conv_bn(int64_t in, int64_t out, bool pool = false) {
  auto seq = std::make_shared<nn::Sequential>();
  seq->push_back(
      std::make_shared<nn::Conv2d>(in, out, 3, nn::Conv2dOptions{.padding = 1, .bias = false}));
  seq->push_back(std::make_shared<nn::BatchNorm2d>(out));
  seq->push_back(std::make_shared<nn::ReLU>());
  if (pool) seq->push_back(std::make_shared<nn::MaxPool2d>(2));
  return seq;
}

// x + conv_bn(conv_bn(x)).
struct Residual : nn::Cloneable<Residual> {
  explicit Residual(int64_t channels) : Cloneable("Residual"), channels(channels) { reset(); }
  void reset() override {
    res1 = register_module("res1", conv_bn(channels, channels));
    res2 = register_module("res2", conv_bn(channels, channels));
  }
  Tensor forward(const Tensor& x) override { return x + res2->forward(res1->forward(x)); }
  int64_t channels;
  std::shared_ptr<nn::Sequential> res1, res2;
};

// ResNet-9 (Page, "How to train your ResNet") with channel widths w, 2w, 4w, 8w.
struct ResNet9 : nn::Cloneable<ResNet9> {
  explicit ResNet9(int64_t width) : Cloneable("ResNet9"), width(width) { reset(); }
  void reset() override {
    int64_t w = width;
    prep = register_module("prep", conv_bn(3, w));
    layer1 = register_module("layer1", conv_bn(w, 2 * w, true));
    res1 = register_module("res1", std::make_shared<Residual>(2 * w));
    layer2 = register_module("layer2", conv_bn(2 * w, 4 * w, true));
    layer3 = register_module("layer3", conv_bn(4 * w, 8 * w, true));
    res3 = register_module("res3", std::make_shared<Residual>(8 * w));
    pool = register_module("pool", std::make_shared<nn::AdaptiveAvgPool2d>(1));
    fc = register_module("fc", std::make_shared<nn::Linear>(8 * w, 10));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = res1->forward(layer1->forward(prep->forward(x)));
    h = res3->forward(layer3->forward(layer2->forward(h)));
    return fc->forward(pool->forward(h).flatten(1));
  }
  int64_t width;
  std::shared_ptr<nn::Sequential> prep, layer1, layer2, layer3;
  std::shared_ptr<Residual> res1, res3;
  std::shared_ptr<nn::AdaptiveAvgPool2d> pool;
  std::shared_ptr<nn::Linear> fc;
};

}  // namespace examples
