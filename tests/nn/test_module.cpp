// nn::Module: registration, dotted names, modes, placement, state dicts, cloning, printing, init.
#include <catch2/catch.hpp>

#include <cmath>
#include <sstream>

#include <octo/octo.h>

using octo::Tensor;
namespace nn = octo::nn;

namespace {
struct Block : nn::Cloneable<Block> {
  Block() : Cloneable("Block") { reset(); }
  void reset() override {
    fc = register_module("fc", std::make_shared<nn::Linear>(4, 3));
    scale = register_parameter("scale", octo::ones({3}));
    count = register_buffer("count", octo::zeros({1}, {.dtype = octo::kInt64}));
  }
  Tensor forward(const Tensor& x) override { return fc->forward(x) * scale; }
  std::shared_ptr<nn::Linear> fc;
  Tensor scale, count;
};
}  // namespace

TEST_CASE("parameters, buffers and children are registered by dotted name") {
  auto seq = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<Block>(), std::make_shared<nn::Linear>(3, 2)});
  std::vector<std::string> names;
  for (auto& [n, p] : seq->named_parameters()) names.push_back(n);
  CHECK(names ==
        std::vector<std::string>{"0.scale", "0.fc.weight", "0.fc.bias", "1.weight", "1.bias"});
  CHECK(seq->named_buffers().at(0).first == "0.count");
  CHECK(seq->num_parameters() == 3 + 12 + 3 + 6 + 2);
  auto mods = seq->named_modules();
  CHECK(mods.size() == 4);
  CHECK(mods[2].first == "0.fc");
  CHECK(seq->state_dict().size() == 6);
  auto block = std::make_shared<Block>();
  CHECK_THROWS_AS(block->register_parameter("scale", octo::ones({1})), octo::ValueError);
  CHECK_THROWS_AS(block->register_parameter("a.b", octo::ones({1})), octo::ValueError);
}

TEST_CASE("train/eval propagate, apply visits every module") {
  auto block = std::make_shared<Block>();
  block->eval();
  CHECK_FALSE(block->is_training());
  CHECK_FALSE(block->fc->is_training());
  block->train();
  CHECK(block->fc->is_training());
  int visited = 0;
  block->apply([&](nn::Module&) { ++visited; });
  CHECK(visited == 2);
}

TEST_CASE("to() moves parameters in place, keeping the handles") {
  auto block = std::make_shared<Block>();
  Tensor w = block->fc->weight;
  block->to(octo::Device("cpu:1"));
  CHECK(w.device() == octo::Device("cpu:1"));
  CHECK(block->fc->weight.device() == octo::Device("cpu:1"));
  CHECK(block->count.device() == octo::Device("cpu:1"));
  block->to(octo::kFloat64);
  CHECK(w.dtype() == octo::kFloat64);
  CHECK(block->count.dtype() == octo::kInt64);  // integer buffers keep their dtype
  CHECK(w.requires_grad());
  CHECK(w.is_leaf());
}

TEST_CASE("zero_grad drops or zeroes gradients") {
  auto block = std::make_shared<Block>();
  block->forward(octo::randn({2, 4})).sum().backward();
  CHECK(block->fc->weight.grad().defined());
  block->zero_grad(/*set_to_none=*/false);
  for (float g : block->fc->weight.grad().to_vector<float>()) CHECK(g == 0.0f);
  block->zero_grad();
  CHECK_FALSE(block->fc->weight.grad().defined());
}

TEST_CASE("load_state_dict copies values and reports mismatches by name") {
  auto a = std::make_shared<Block>();
  auto b = std::make_shared<Block>();
  b->load_state_dict(a->state_dict());
  CHECK(b->fc->weight.to_vector<float>() == a->fc->weight.to_vector<float>());
  auto state = a->state_dict();
  std::erase_if(state, [](const auto& kv) { return kv.first == "count"; });
  state.emplace_back("extra", octo::zeros({1}));
  REQUIRE(state[0].first == "scale");  // PyTorch's order: own parameters, buffers, then children
  state[0].second = octo::zeros({5});  // scale has shape [3]
  CHECK_THROWS_WITH(
      b->load_state_dict(state),
      Catch::Contains("Missing key(s) in state_dict: \"count\"") &&
          Catch::Contains("Unexpected key(s) in state_dict: \"extra\"") &&
          Catch::Contains(
              "size mismatch for scale: copying a param with shape [5], the shape in current model is [3]"));
}

TEST_CASE("clone is a deep copy that keeps members and the random stream") {
  auto a = std::make_shared<Block>();
  octo::manual_seed(3);
  auto before = octo::default_generator().state();
  auto c = std::dynamic_pointer_cast<Block>(a->clone(octo::Device("cpu:1")));
  REQUIRE(c);
  CHECK(octo::default_generator().state().offset == before.offset);
  CHECK(c->fc->weight.device() == octo::Device("cpu:1"));
  CHECK(c->fc->weight.to_vector<float>() == a->fc->weight.to_vector<float>());
  CHECK(c->fc->weight.impl_ptr() == c->named_parameters()[1].second.impl_ptr());
  CHECK_FALSE(c->fc->weight.is_alias_of(a->fc->weight));
  struct NotCloneable : nn::Module {};
  auto n = std::make_shared<NotCloneable>();
  CHECK_THROWS_WITH(n->clone(), Catch::Contains("octo::nn::Cloneable"));
}

TEST_CASE("modules print like PyTorch") {
  auto seq = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(784, 128), std::make_shared<nn::Flatten>()});
  std::ostringstream os;
  os << *seq;
  CHECK(
      os.str() ==
      "Sequential(\n  (0): Linear(in_features=784, out_features=128, bias=True)\n  (1): Flatten(start_dim=1, end_dim=-1)\n)");
}

TEST_CASE("Linear's default initialisation matches PyTorch's bounds") {
  octo::manual_seed(0);
  nn::Linear fc(400, 300);
  double bound = 1.0 / std::sqrt(400.0);  // kaiming_uniform(a=sqrt(5)) -> 1/sqrt(fan_in)
  auto w = fc.weight.to_vector<float>();
  double sum = 0, sq = 0, mx = 0;
  for (float v : w) {
    sum += v;
    sq += double(v) * v;
    mx = std::max(mx, std::fabs(double(v)));
  }
  double mean = sum / w.size(), var = sq / w.size() - mean * mean;
  CHECK(mx <= bound);
  CHECK(mx > 0.99 * bound);
  CHECK(std::fabs(mean) < 0.01 * bound);
  CHECK(std::fabs(var - bound * bound / 3.0) < 0.03 * bound * bound / 3.0);  // U(-b, b) variance
  for (float v : fc.bias.to_vector<float>()) CHECK(std::fabs(v) <= bound);
}

TEST_CASE("init functions follow PyTorch's formulas") {
  using namespace nn::init;
  CHECK(calculate_gain(Nonlinearity::ReLU) == Approx(std::sqrt(2.0)));
  CHECK(calculate_gain(Nonlinearity::Tanh) == Approx(5.0 / 3.0));
  CHECK(calculate_gain(Nonlinearity::LeakyReLU, 0.2) == Approx(std::sqrt(2.0 / 1.04)));
  Tensor w = octo::empty({64, 32, 3, 3});
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(w);
  CHECK(fan_in == 32 * 9);
  CHECK(fan_out == 64 * 9);
  octo::manual_seed(1);
  kaiming_normal_(w, 0.0, FanMode::FanIn, Nonlinearity::ReLU);
  auto v = w.to_vector<float>();
  double sq = 0;
  for (float x : v) sq += double(x) * x;
  double std_expected = std::sqrt(2.0 / (32 * 9));
  CHECK(std::sqrt(sq / v.size()) == Approx(std_expected).epsilon(0.03));
  xavier_uniform_(w);
  double xb = std::sqrt(6.0 / (fan_in + fan_out));
  for (float x : w.to_vector<float>()) CHECK(std::fabs(x) <= xb);
  constant_(w, 0.5);
  CHECK(w.to_vector<float>()[7] == 0.5f);
}
