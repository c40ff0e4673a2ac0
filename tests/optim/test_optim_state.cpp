// Tests for optim: state_dict layout, save/load/resume, load_state_dict and constructor checks.
#include <octo/octo.h>
#include <catch2/catch.hpp>

#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "optim/optim_helpers.h"

using namespace optim_test;

// --- state_dict -------------------------------------------------------------------------------

namespace {

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    path = std::filesystem::temp_directory_path() /
           ("octo_optim_test_" + std::to_string(std::random_device{}()));
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

/// Runs `total` steps uninterrupted, and `split` steps + save to a safetensors file (model and
/// optimizer together) + load into a fresh model and optimizer + the rest; compares bitwise.
template <typename Make>
void check_resume(Make make_opt, int split, int total) {
  const auto vals = initial_values();
  auto feed = [&](const std::vector<Tensor>& ps, int s) {
    for (size_t k = 0; k < ps.size(); ++k)
      give_grad(ps[k], grad_at(vals[k].size(), s, static_cast<int>(k)));
  };
  auto pa = make_params(vals);
  auto a = make_opt(pa, false);
  for (int s = 0; s < total; ++s) {
    feed(pa, s);
    a->step();
  }

  TempDir dir;
  const std::string file = (dir.path / "ckpt.safetensors").string();
  {
    auto pb = make_params(vals);
    auto b = make_opt(pb, false);
    for (int s = 0; s < split; ++s) {
      feed(pb, s);
      b->step();
    }
    optim::NamedTensors ckpt;
    for (size_t k = 0; k < pb.size(); ++k) ckpt.emplace_back("model." + std::to_string(k), pb[k]);
    for (auto& [key, t] : b->state_dict()) ckpt.emplace_back("optim." + key, t);
    octo::save_safetensors(ckpt, file);
  }
  auto loaded = octo::load_safetensors(file);
  auto pc = make_params(initial_values());
  auto c = make_opt(pc, /*other_options=*/true);
  optim::NamedTensors opt_state;
  for (auto& [key, t] : loaded.tensors) {
    if (key.rfind("model.", 0) == 0) {
      octo::NoGradGuard ng;
      pc[static_cast<size_t>(std::stoi(key.substr(6)))].copy_(t);
    } else {
      opt_state.emplace_back(key.substr(6), t);
    }
  }
  c->load_state_dict(opt_state);
  for (int s = split; s < total; ++s) {
    feed(pc, s);
    c->step();
  }
  for (size_t k = 0; k < pa.size(); ++k) {
    INFO("parameter " << k);
    CHECK(values(pc[k]) == values(pa[k]));
  }
}

}  // namespace

TEST_CASE("optim: state_dict layout", "[optim][state]") {
  auto params = make_params(initial_values());
  optim::Adam opt({optim::Adam::Group{{params[0], params[1]}, {.lr = 0.01, .amsgrad = true}},
                   optim::Adam::Group{{params[2], params[3]}, {.lr = 0.02}}});
  for (size_t k = 0; k < params.size(); ++k) give_grad(params[k], Vec(params[k].numel(), 0.5));
  opt.step();
  auto sd = opt.state_dict();
  std::map<std::string, Tensor> m(sd.begin(), sd.end());
  REQUIRE(m.count("param_groups.0.lr"));
  CHECK(m.at("param_groups.0.lr").dim() == 0);
  CHECK(m.at("param_groups.0.lr").dtype() == octo::kFloat64);
  CHECK(m.at("param_groups.0.lr").item<double>() == 0.01);
  CHECK(m.at("param_groups.1.lr").item<double>() == 0.02);
  CHECK(m.at("param_groups.0.betas.1").item<double>() == 0.999);
  CHECK(m.at("param_groups.0.amsgrad").item<double>() == 1.0);
  CHECK(m.at("param_groups.1.params").to_vector<int64_t>() == std::vector<int64_t>{2, 3});
  CHECK(m.at("state.3.step").item<double>() == 1.0);
  CHECK(m.at("state.3.exp_avg").sizes() == params[3].sizes());
  CHECK(m.count("state.1.max_exp_avg_sq") == 1);
  CHECK(m.count("state.2.max_exp_avg_sq") == 0);
}

TEST_CASE("optim: save, load into a fresh optimizer, continue == uninterrupted", "[optim][state]") {
  SECTION("SGD with momentum and groups") {
    check_resume(
        [](const std::vector<Tensor>& ps, bool other) {
          const double lr = other ? 9.0 : 0.1;  // loading must restore the saved options
          return std::make_unique<optim::SGD>(std::vector<optim::SGD::Group>{
              {{ps[0], ps[1]}, {.lr = lr, .momentum = 0.9, .dampening = 0.1}},
              {{ps[2], ps[3]}, {.lr = 0.05, .momentum = 0.5, .nesterov = true}}});
        },
        2, 5);
  }
  SECTION("Adam with amsgrad") {
    check_resume(
        [](const std::vector<Tensor>& ps, bool other) {
          return std::make_unique<optim::Adam>(
              ps,
              optim::AdamOptions{.lr = other ? 1.0 : 0.01, .weight_decay = 0.1, .amsgrad = !other});
        },
        3, 6);
  }
  SECTION("AdamW") {
    check_resume(
        [](const std::vector<Tensor>& ps, bool other) {
          return std::make_unique<optim::AdamW>(
              ps, optim::AdamWOptions{.lr = 0.01, .betas = {other ? 0.1 : 0.9, 0.99}});
        },
        1, 4);
  }
}

TEST_CASE("optim: load_state_dict moves state to the parameters' device and dtype",
          "[optim][state]") {
  auto vals = initial_values();
  auto pa = make_params(vals);
  optim::Adam a(pa, {.lr = 0.01});
  for (size_t k = 0; k < pa.size(); ++k)
    give_grad(pa[k], grad_at(vals[k].size(), 0, static_cast<int>(k)));
  a.step();
  auto pb = make_params(vals, octo::kFloat32, octo::Device("cpu:1"));
  optim::Adam b(pb, {.lr = 0.01});
  b.load_state_dict(a.state_dict());
  CHECK(b.state(0).at("exp_avg").device() == octo::Device("cpu:1"));
  CHECK(b.state(0).at("exp_avg").dtype() == octo::kFloat32);
  CHECK(b.state(0).at("step").dtype() == octo::kFloat64);
  CHECK(b.state(0).at("step").item<double>() == 1.0);
  // the loaded state is a copy: stepping b leaves a's state alone
  const Vec before = values(a.state(0).at("exp_avg"));
  for (size_t k = 0; k < pb.size(); ++k) give_grad(pb[k], Vec(vals[k].size(), 1.0));
  b.step();
  CHECK(values(a.state(0).at("exp_avg")) == before);
}

TEST_CASE("optim: load_state_dict rejects mismatched state dicts", "[optim][state][errors]") {
  auto vals = initial_values();
  auto params = make_params(vals);
  optim::Adam full(params, {.lr = 0.01});
  for (auto& p : params) give_grad(p, Vec(static_cast<size_t>(p.numel()), 1.0));
  full.step();
  const auto sd = full.state_dict();

  SECTION("a different number of parameters") {
    optim::Adam fewer({params[0], params[1]}, {});
    CHECK_ERROR(fewer.load_state_dict(sd), octo::ValueError, "parameters in group 0");
  }
  SECTION("a different number of groups") {
    optim::Adam two({optim::Adam::Group{{params[0], params[1]}, {}},
                     optim::Adam::Group{{params[2], params[3]}, {}}});
    CHECK_ERROR(two.load_state_dict(sd), octo::ValueError,
                "1 parameter groups, but the optimizer has 2");
  }
  SECTION("another optimizer's state dict") {
    optim::SGD sgd(params, {.lr = 0.5});
    CHECK_ERROR(sgd.load_state_dict(sd), octo::ValueError, "missing key 'param_groups.0.momentum'");
    CHECK(sgd.lr() == 0.5);
  }
  SECTION("wrong shapes, unexpected keys, invalid options; nothing changes on failure") {
    optim::Adam other(params, {.lr = 0.3});
    auto bad = sd;
    for (auto& [k, t] : bad)
      if (k == "state.1.exp_avg") t = octo::zeros({7}, {.dtype = octo::kFloat64});
    CHECK_ERROR(other.load_state_dict(bad), octo::ValueError,
                "has shape [7] but parameter 1 has shape [5]");
    CHECK(other.lr() == 0.3);
    CHECK(other.state(0).empty());

    auto extra = sd;
    extra.emplace_back("momentum", octo::scalar_tensor(1.0));
    CHECK_ERROR(other.load_state_dict(extra), octo::ValueError, "unexpected key 'momentum'");

    auto neg = sd;
    for (auto& [k, t] : neg)
      if (k == "param_groups.0.lr") t = octo::scalar_tensor(-1.0, {.dtype = octo::kFloat64});
    CHECK_ERROR(other.load_state_dict(neg), octo::ValueError, "invalid learning rate");
    CHECK(other.lr() == 0.3);

    auto orphan = sd;
    orphan.emplace_back("state.9.exp_avg", octo::zeros({1}));
    CHECK_ERROR(other.load_state_dict(orphan), octo::ValueError, "state for parameter 9");
  }
}

// --- validation ---------------------------------------------------------------------------------

TEST_CASE("optim: constructor validation", "[optim][errors]") {
  Tensor w = make_param({1.0, 2.0}, {2});
  Tensor b = make_param({0.0}, {1});
  CHECK_ERROR(optim::SGD({w}, {.lr = -0.1}), octo::ValueError, "SGD: invalid learning rate: -0.1");
  CHECK_ERROR(optim::SGD({w}, {.momentum = -0.5}), octo::ValueError, "invalid momentum");
  CHECK_ERROR(optim::SGD({w}, {.weight_decay = -1}), octo::ValueError, "invalid weight_decay");
  CHECK_ERROR(optim::SGD({w}, {.nesterov = true}), octo::ValueError,
              "Nesterov momentum requires a momentum and zero dampening");
  CHECK_ERROR(optim::SGD({w}, {.momentum = 0.9, .dampening = 0.1, .nesterov = true}),
              octo::ValueError, "Nesterov momentum requires");
  CHECK_ERROR(optim::Adam({w}, {.lr = -1e-3}), octo::ValueError, "Adam: invalid learning rate");
  CHECK_ERROR(optim::Adam({w}, {.betas = {1.0, 0.999}}), octo::ValueError,
              "invalid beta parameter at index 0: 1");
  CHECK_ERROR(optim::AdamW({w}, {.betas = {0.9, -0.1}}), octo::ValueError,
              "AdamW: invalid beta parameter at index 1");
  CHECK_ERROR(optim::Adam({w}, {.eps = -1e-8}), octo::ValueError, "invalid epsilon");
  CHECK_ERROR(optim::AdamW({w}, {.weight_decay = -0.1}), octo::ValueError, "invalid weight_decay");
  CHECK_ERROR(optim::SGD(std::vector<Tensor>{}, {}), octo::ValueError, "empty parameter list");
  CHECK_ERROR(optim::SGD({w, b, w}, {}), octo::ValueError, "appear more than once");
  CHECK_ERROR(optim::Adam({optim::Adam::Group{{w}, {}}, optim::Adam::Group{{b, w}, {}}}),
              octo::ValueError, "appear more than once");
  Tensor non_leaf = octo::mul(w, w);
  CHECK_ERROR(optim::SGD({non_leaf}, {}), octo::ValueError, "non-leaf");
  CHECK_ERROR(optim::SGD({Tensor()}, {}), octo::ValueError, "undefined");
  Tensor ints = octo::zeros({2}, {.dtype = octo::kInt64});
  CHECK_ERROR(optim::SGD({ints}, {}), octo::ValueError, "floating point");
  optim::SGD ok({w}, {});
  CHECK_ERROR(ok.add_param_group({{w}, {}}), octo::ValueError, "appear more than once");
  CHECK_ERROR(ok.state(1), octo::IndexError, "state index 1 out of range");
}
