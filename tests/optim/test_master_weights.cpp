// 16-bit parameters with float32 master weights in the optimizers (Note [Master weights]): the
// master copy follows a float32 run exactly, the parameter holds its rounding, a parameter changed
// outside the optimizer wins, and the masters survive state_dict().
#include <octo/octo.h>
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

using octo::Tensor;
namespace optim = octo::optim;

namespace {

std::vector<uint8_t> bits(const Tensor& t) {
  const Tensor c = t.detach().contiguous();
  std::vector<uint8_t> v(static_cast<size_t>(c.numel()) * octo::itemsize(c.dtype()));
  std::memcpy(v.data(), c.raw_data(), v.size());
  return v;
}

/// A leaf of `shape` whose values are exact in bfloat16, in dtype dt.
Tensor leaf(const octo::Shape& shape, uint64_t seed, octo::DType dt) {
  octo::manual_seed(seed);
  return octo::randn(shape).to(octo::kBFloat16).to(dt).requires_grad_();
}

using MakeOpt = std::function<std::unique_ptr<optim::Optimizer>(Tensor, bool master)>;

struct Named {
  const char* name;
  MakeOpt make;
};

std::vector<Named> optimizers() {
  return {
      {"SGD momentum",
       [](Tensor p, bool m) {
         return std::make_unique<optim::SGD>(
             std::vector<Tensor>{p},
             optim::SGDOptions{
                 .lr = 0.05, .momentum = 0.9, .weight_decay = 1e-3, .master_weights = m});
       }},
      {"SGD reference (not fused)",
       [](Tensor p, bool m) {
         return std::make_unique<optim::SGD>(
             std::vector<Tensor>{p},
             optim::SGDOptions{.lr = 0.05, .momentum = 0.9, .fused = false, .master_weights = m});
       }},
      {"Adam amsgrad",
       [](Tensor p, bool m) {
         return std::make_unique<optim::Adam>(
             std::vector<Tensor>{p},
             optim::AdamOptions{.lr = 1e-2, .amsgrad = true, .master_weights = m});
       }},
      {"AdamW",
       [](Tensor p, bool m) {
         return std::make_unique<optim::AdamW>(
             std::vector<Tensor>{p}, optim::AdamWOptions{.lr = 1e-2, .master_weights = m});
       }},
  };
}

/// The 16-bit gradient of step k (the same values for every run).
Tensor grad_at(int k, const octo::Shape& shape, octo::DType dt) {
  octo::manual_seed(1000 + static_cast<uint64_t>(k));
  return octo::randn(shape).to(dt);
}

}  // namespace

TEST_CASE("master weights: the float32 copy follows a float32 run exactly", "[optim][master]") {
  const octo::DType dt = GENERATE(octo::kBFloat16, octo::kFloat16);
  for (const Named& o : optimizers()) {
    INFO(o.name << ", " << dt);
    Tensor p16 = leaf({7, 5}, 1, dt), p32 = leaf({7, 5}, 1, octo::kFloat32);
    auto opt16 = o.make(p16, true), opt32 = o.make(p32, false);
    for (int k = 0; k < 20; ++k) {
      const Tensor g = grad_at(k, p16.sizes(), dt);
      p16.set_grad(g.clone());
      p32.set_grad(g.to(octo::kFloat32));
      opt16->step();
      opt32->step();
    }
    CHECK(p16.dtype() == dt);
    const Tensor master = opt16->state(0).at("master_weight");
    CHECK(master.dtype() == octo::kFloat32);
    CHECK(bits(master) == bits(p32));      // the update ran in float32, on float32 state
    CHECK(bits(p16) == bits(p32.to(dt)));  // and the parameter is its rounding
    for (const auto& [key, t] : opt16->state(0))
      if (key != "step") CHECK(t.dtype() == octo::kFloat32);
  }
}

TEST_CASE("master weights keep updates a bfloat16 parameter alone would round away",
          "[optim][master]") {
  // lr * grad = 2^-12 against weights of 1: below half a bfloat16 ulp (2^-8), so each step
  // rounds back to 1 without a master copy; 64 of them add up to 2^-6 with one.
  Tensor with = octo::ones({4}).to(octo::kBFloat16).requires_grad_();
  Tensor without = octo::ones({4}).to(octo::kBFloat16).requires_grad_();
  optim::SGD a({with}, {.lr = 0x1p-12, .master_weights = true});
  optim::SGD b({without}, {.lr = 0x1p-12});
  for (int k = 0; k < 64; ++k) {
    with.set_grad(octo::full({4}, -1.0).to(octo::kBFloat16));
    without.set_grad(octo::full({4}, -1.0).to(octo::kBFloat16));
    a.step();
    b.step();
  }
  CHECK(without.to(octo::kFloat32).to_vector<float>() == std::vector<float>(4, 1.0f));
  CHECK(with.to(octo::kFloat32).to_vector<float>() == std::vector<float>(4, 1.0f + 0x1p-6f));
}

TEST_CASE("master weights: a parameter changed outside the optimizer wins", "[optim][master]") {
  Tensor p = octo::ones({3}).to(octo::kBFloat16).requires_grad_();
  optim::SGD opt({p}, {.lr = 0x1p-10, .master_weights = true});
  auto step = [&] {
    p.set_grad(octo::full({3}, -1.0).to(octo::kBFloat16));
    opt.step();
  };
  step();  // master 1 + 2^-10, p rounds to 1
  CHECK(opt.state(0).at("master_weight").to_vector<float>() ==
        std::vector<float>(3, 1.0f + 0x1p-10f));
  {
    octo::NoGradGuard no_grad;
    p.fill_(0.5);  // e.g. a checkpoint loaded into the module
  }
  step();
  CHECK(opt.state(0).at("master_weight").to_vector<float>() ==
        std::vector<float>(3, 0.5f + 0x1p-10f));
  // Writing the value p already holds keeps the master (it still rounds to p).
  {
    octo::NoGradGuard no_grad;
    p.fill_(0.5);
  }
  step();
  CHECK(opt.state(0).at("master_weight").to_vector<float>() ==
        std::vector<float>(3, 0.5f + 0x1p-9f));
}

TEST_CASE("master weights survive state_dict and load_state_dict in float32", "[optim][master]") {
  for (const Named& o : optimizers()) {
    INFO(o.name);
    Tensor p = leaf({6}, 3, octo::kBFloat16);
    auto opt = o.make(p, true);
    for (int k = 0; k < 5; ++k) {
      p.set_grad(grad_at(k, p.sizes(), octo::kBFloat16));
      opt->step();
    }
    const optim::NamedTensors saved = opt->state_dict();
    // A fresh run: the parameter as saved, an optimizer loaded from the state dict.
    Tensor q = p.detach().clone().requires_grad_();
    auto loaded = o.make(q, true);
    loaded->load_state_dict(saved);
    for (const auto& [key, t] : loaded->state(0))
      if (key != "step") CHECK(t.dtype() == octo::kFloat32);
    for (int k = 5; k < 9; ++k) {
      p.set_grad(grad_at(k, p.sizes(), octo::kBFloat16));
      q.set_grad(grad_at(k, q.sizes(), octo::kBFloat16));
      opt->step();
      loaded->step();
    }
    CHECK(bits(loaded->state(0).at("master_weight")) == bits(opt->state(0).at("master_weight")));
    CHECK(bits(q) == bits(p));
  }
}

TEST_CASE("master weights leave float32 parameters alone", "[optim][master]") {
  Tensor p = leaf({5}, 4, octo::kFloat32), r = leaf({5}, 4, octo::kFloat32);
  optim::Adam a({p}, {.lr = 1e-2, .master_weights = true}), b({r}, {.lr = 1e-2});
  for (int k = 0; k < 3; ++k) {
    p.set_grad(grad_at(k, p.sizes(), octo::kFloat32));
    r.set_grad(grad_at(k, r.sizes(), octo::kFloat32));
    a.step();
    b.step();
  }
  CHECK(a.state(0).count("master_weight") == 0);
  CHECK(bits(p) == bits(r));
}
