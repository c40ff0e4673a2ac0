// Checkpoints: module weights round-trip; a resumed run equals an uninterrupted one bit for bit.
#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>

#include <octo/octo.h>

using octo::Tensor;
namespace nn = octo::nn;

namespace {
struct Net : nn::Cloneable<Net> {
  Net() : Cloneable("Net") { reset(); }
  void reset() override {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(4, 8));
    drop = register_module("drop", std::make_shared<nn::Dropout>(0.25));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(8, 2));
  }
  Tensor forward(const Tensor& x) override {
    return fc2->forward(drop->forward(octo::relu(fc1->forward(x))));
  }
  std::shared_ptr<nn::Linear> fc1, fc2;
  std::shared_ptr<nn::Dropout> drop;
};

std::string temp_path(const char* name) {
  return (std::filesystem::temp_directory_path() / name).string();
}

/// One epoch of 5 Adam steps on random batches (dropout and data both draw random numbers).
void epoch(Net& net, octo::optim::Adam& opt, octo::optim::StepLR& sched) {
  for (int i = 0; i < 5; ++i) {
    Tensor x = octo::randn({6, 4});
    Tensor y = octo::randint(0, 2, {6});
    Tensor loss = nn::functional::cross_entropy(net.forward(x), y);
    opt.zero_grad();
    loss.backward();
    opt.step();
  }
  sched.step();
}
}  // namespace

TEST_CASE("save/load round-trips module weights by state_dict key") {
  std::string path = temp_path("octo_weights.safetensors");
  Net a, b;
  octo::save(a, path);
  auto file = octo::load_safetensors(path);
  CHECK(file.metadata.at("format") == "pt");
  octo::load(b, path);
  CHECK(b.fc1->weight.to_vector<float>() == a.fc1->weight.to_vector<float>());
  nn::Linear other(3, 3);
  CHECK_THROWS_WITH(octo::load(other, path),
                    Catch::Contains("Unexpected key(s)") && Catch::Contains("fc1.weight"));
  std::remove(path.c_str());
}

TEST_CASE("a resumed run matches an uninterrupted one bit for bit") {
  std::string path = temp_path("octo_ckpt.safetensors");
  // Uninterrupted: 4 epochs.
  octo::manual_seed(42);
  Net full;
  octo::optim::Adam opt_full(full.parameters(), {.lr = 0.01});
  octo::optim::StepLR sched_full(opt_full, 2, 0.5);
  for (int e = 0; e < 4; ++e) epoch(full, opt_full, sched_full);

  // Interrupted after 2 epochs, saved, and resumed in fresh objects.
  octo::manual_seed(42);
  {
    Net net;
    octo::optim::Adam opt(net.parameters(), {.lr = 0.01});
    octo::optim::StepLR sched(opt, 2, 0.5);
    for (int e = 0; e < 2; ++e) epoch(net, opt, sched);
    octo::save_checkpoint({&net, &opt, &sched, 2, {{"note", "halfway"}}}, path);
  }
  octo::manual_seed(7);  // a different state: the checkpoint must restore the generators
  Net resumed;
  octo::optim::Adam opt(resumed.parameters(), {.lr = 0.5});
  octo::optim::StepLR sched(opt, 2, 0.5);
  octo::TrainingState state{&resumed, &opt, &sched};
  octo::load_checkpoint(state, path);
  CHECK(state.epoch == 2);
  CHECK(state.metadata.at("note") == "halfway");
  for (int64_t e = state.epoch; e < 4; ++e) epoch(resumed, opt, sched);

  auto a = full.state_dict();
  auto b = resumed.state_dict();
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO(a[i].first);
    CHECK(a[i].second.to_vector<float>() == b[i].second.to_vector<float>());
  }
  CHECK(opt.lr() == opt_full.lr());
  octo::save(full, path);
  CHECK_THROWS_WITH(octo::load_checkpoint(state, path),
                    Catch::Contains("not an octo training checkpoint"));
  std::remove(path.c_str());
}
