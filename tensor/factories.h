// Factories: tensors made from shapes, values, ranges and random distributions.
#pragma once

#include <initializer_list>
#include <vector>

#include "tensor/tensor.h"

namespace octo {

/// Uninitialised memory of the given shape.
Tensor empty(const Shape& shape, TensorOptions options = {});
Tensor zeros(const Shape& shape, TensorOptions options = {});
Tensor ones(const Shape& shape, TensorOptions options = {});
Tensor full(const Shape& shape, Scalar value, TensorOptions options = {});
/// 0, 1, ..., end-1 (int64 by default, like torch.arange with integer arguments).
Tensor arange(int64_t end, TensorOptions options = {.dtype = kInt64});
/// start, start+step, ... < end (or > end for negative steps).
Tensor arange(double start, double end, double step = 1.0, TensorOptions options = {});
/// `steps` evenly spaced values from start to end inclusive.
Tensor linspace(double start, double end, int64_t steps, TensorOptions options = {});
/// The n x m identity (m defaults to n).
Tensor eye(int64_t n, int64_t m = -1, TensorOptions options = {});
/// Uniform in [0, 1), from the device's generator (seeded by octo::manual_seed).
Tensor rand(const Shape& shape, TensorOptions options = {});
/// Standard normal.
Tensor randn(const Shape& shape, TensorOptions options = {});
/// Integers uniform in [low, high) (int64 by default).
Tensor randint(int64_t low, int64_t high, const Shape& shape,
               TensorOptions options = {.dtype = kInt64});
/// A random permutation of 0..n-1 (int64), from the CPU generator.
Tensor randperm(int64_t n, TensorOptions options = {.dtype = kInt64});

/// A 1-d tensor from values: octo::tensor({1.0, 2.0, 3.0}) is float32 (options.dtype).
Tensor tensor(std::initializer_list<double> values, TensorOptions options = {});
/// A tensor of the given shape from row-major values, converted to options.dtype.
Tensor tensor(const std::vector<double>& values, const Shape& shape, TensorOptions options = {});
/// A tensor whose dtype is T's (int64 labels, float64 data, ...), copied from `values`.
template <typename T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape, Device device = kCPU);
/// A 0-d tensor holding one value.
Tensor scalar_tensor(Scalar value, TensorOptions options = {});

/// Same shape, dtype and device as t (never requires grad unless options say so).
Tensor empty_like(const Tensor& t);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, Scalar value);
Tensor rand_like(const Tensor& t);
Tensor randn_like(const Tensor& t);

}  // namespace octo
