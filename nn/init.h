// nn::init: in-place initialisers with PyTorch's formulas (fans, gains, bounds).
#pragma once

#include <string>
#include <utility>

#include "tensor/tensor.h"

namespace octo::nn::init {

enum class FanMode { FanIn, FanOut };
enum class Nonlinearity { Linear, Conv, Sigmoid, Tanh, ReLU, LeakyReLU, SELU };

/// torch.nn.init.calculate_gain.
double calculate_gain(Nonlinearity nonlinearity, double param = 0.01);
/// (fan_in, fan_out) of a weight: [out, in, *kernel] -> (in * receptive, out * receptive).
std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t);

// All fill `t` in place without recording autograd, draw from the tensor's device generator,
// and return t.
Tensor uniform_(Tensor t, double a = 0.0, double b = 1.0);
Tensor normal_(Tensor t, double mean = 0.0, double std = 1.0);
Tensor constant_(Tensor t, double value);
Tensor zeros_(Tensor t);
Tensor ones_(Tensor t);
Tensor xavier_uniform_(Tensor t, double gain = 1.0);
Tensor xavier_normal_(Tensor t, double gain = 1.0);
/// a: the negative slope of the rectifier after this layer (used when nonlinearity is LeakyReLU).
Tensor kaiming_uniform_(Tensor t, double a = 0.0, FanMode mode = FanMode::FanIn,
                        Nonlinearity nonlinearity = Nonlinearity::LeakyReLU);
Tensor kaiming_normal_(Tensor t, double a = 0.0, FanMode mode = FanMode::FanIn,
                       Nonlinearity nonlinearity = Nonlinearity::LeakyReLU);

}  // namespace octo::nn::init
