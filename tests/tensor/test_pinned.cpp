// Pinned host memory and non_blocking copies as seen without a GPU: pin_memory's errors,
// is_pinned, to()/copy_() with non_blocking between CPU devices, DataLoader's pin_memory option.
#include <catch2/catch.hpp>

#include <octo/octo.h>

#include <string>
#include <vector>

using octo::Device;
using octo::Tensor;
using octo::data::DataLoader;
using octo::data::Example;
using octo::data::TensorDataset;

namespace {
Tensor iota(const octo::Shape& shape, octo::DType dtype = octo::kFloat64) {
  return octo::arange(0.0, double(octo::detail::shape_numel(shape)), 1.0, {.dtype = dtype})
      .view(shape);
}

std::vector<double> values(const Tensor& t) { return t.to(octo::kFloat64).to_vector<double>(); }

/// Every batch of an epoch, as (data, target) values, and whether each tensor was pinned.
struct Epoch {
  std::vector<std::vector<double>> data, target;
  std::vector<bool> pinned;
};
Epoch run(DataLoader& loader) {
  Epoch e;
  for (const Example& b : loader) {
    e.data.push_back(values(b.data));
    e.target.push_back(values(b.target));
    e.pinned.push_back(b.data.is_pinned());
    e.pinned.push_back(b.target.is_pinned());
  }
  return e;
}
}  // namespace

TEST_CASE("pin_memory needs the CUDA driver and a GPU: a clear DeviceError without one") {
  Tensor t = iota({3, 4});
  if (octo::cuda::is_available()) {  // a CUDA build on a GPU machine: pinning works
    Tensor p = t.pin_memory();
    CHECK(p.is_pinned());
    CHECK(values(p) == values(t));
    return;
  }
  const std::string expected =
      octo::cuda_hooks().is_built() ? "no CUDA GPU is visible" : "built without CUDA support";
  CHECK_THROWS_AS(t.pin_memory(), octo::DeviceError);
  CHECK_THROWS_WITH(t.pin_memory(), Catch::Matchers::Contains("pin_memory") &&
                                        Catch::Matchers::Contains(expected) &&
                                        Catch::Matchers::Contains("page-locked"));
  // Views, other dtypes and other CPU devices give the same error.
  CHECK_THROWS_AS(t.transpose(0, 1).pin_memory(), octo::DeviceError);
  CHECK_THROWS_AS(iota({5}, octo::kInt64).to(Device("cpu:1")).pin_memory(), octo::DeviceError);
}

TEST_CASE("is_pinned is false for ordinary host tensors and without a GPU") {
  Tensor t = iota({4, 5});
  CHECK_FALSE(t.is_pinned());
  CHECK_FALSE(t.narrow(0, 1, 2).is_pinned());
  CHECK_FALSE(t.to(Device("cpu:2")).is_pinned());
  CHECK_FALSE(octo::empty({0}).is_pinned());
  CHECK_FALSE(Tensor().is_pinned());
  CHECK_FALSE(octo::cuda_hooks().is_pinned(t.raw_data()));
  CHECK_FALSE(octo::cuda_hooks().is_pinned(nullptr));
  if (!octo::cuda_hooks().is_built()) {
    CHECK_THROWS_AS(octo::cuda_hooks().pinned_allocator(), octo::DeviceError);
  }
}

TEST_CASE("to(device, non_blocking) between CPU devices equals to(device)") {
  Tensor t = iota({3, 4});
  const Device cpu1("cpu:1");
  Tensor a = t.to(cpu1, /*non_blocking=*/true);
  Tensor b = t.to(cpu1);
  CHECK(a.device() == cpu1);
  CHECK(values(a) == values(b));
  CHECK_FALSE(a.is_alias_of(t));
  // Same device: the tensor itself, as without the flag.
  CHECK(t.to(octo::kCPU, true).is_alias_of(t));
  // With a dtype, and from a strided view.
  Tensor c = t.transpose(0, 1).to(cpu1, octo::kFloat32, true);
  CHECK(c.dtype() == octo::kFloat32);
  CHECK(c.device() == cpu1);
  CHECK(values(c) == values(t.transpose(0, 1).to(cpu1, octo::kFloat32)));
  // copy_ with non_blocking, broadcasting a row into a tensor on another CPU device.
  Tensor dst = octo::zeros({3, 4}, {.dtype = octo::kFloat64, .device = cpu1});
  dst.copy_(t.select(0, 2), /*non_blocking=*/true);
  CHECK(values(dst) == std::vector<double>{8, 9, 10, 11, 8, 9, 10, 11, 8, 9, 10, 11});
  // Gradients flow back through a non-blocking copy.
  Tensor x = octo::randn({2, 3}, {.dtype = octo::kFloat64, .requires_grad = true});
  (x.to(cpu1, true) * 3.0).sum().backward();
  REQUIRE(x.grad().defined());
  CHECK(x.grad().device() == octo::kCPU);
  CHECK(values(x.grad()) == std::vector<double>(6, 3.0));
}

TEST_CASE("DataLoader with pin_memory yields the same batches, pinned only with a GPU") {
  auto ds = std::make_shared<TensorDataset>(iota({11, 3}, octo::kFloat32), octo::arange(11));
  for (size_t workers : {size_t(0), size_t(2)}) {
    CAPTURE(workers);
    DataLoader plain(ds, {.batch_size = 4, .shuffle = true, .num_workers = workers, .seed = 5});
    DataLoader pinned(
        ds,
        {.batch_size = 4, .shuffle = true, .num_workers = workers, .pin_memory = true, .seed = 5});
    for (uint64_t epoch = 0; epoch < 2; ++epoch) {
      plain.set_epoch(epoch);
      pinned.set_epoch(epoch);
      Epoch a = run(plain), b = run(pinned);
      REQUIRE(b.data.size() == 3);
      CHECK(a.data == b.data);
      CHECK(a.target == b.target);
      for (bool p : a.pinned) CHECK_FALSE(p);
      for (bool p : b.pinned) CHECK(p == octo::cuda::is_available());
    }
  }
}
