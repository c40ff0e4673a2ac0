// Checkpoints with hostile values: every value a checkpoint restores is validated, and the error
// names the key and the value (integer overflow, silent dtype conversion, made-up epochs,
// infinite hyper-parameters, out-of-range counters), and save never writes through a device.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <cmath>
#include <filesystem>
#include <limits>

#include <octo/octo.h>

using octo::Tensor;
namespace nn = octo::nn;
namespace fs = std::filesystem;

namespace {

struct Setup {
  std::shared_ptr<nn::Linear> model = std::make_shared<nn::Linear>(3, 2);
  octo::optim::SGD opt{model->parameters(), {.lr = 0.1, .momentum = 0.9}};
  octo::optim::StepLR sched{opt, 2};
  octo::TrainingState state() {
    octo::TrainingState s;
    s.model = model.get();
    s.optimizer = &opt;
    s.scheduler = &sched;
    return s;
  }
};

fs::path good_checkpoint() {
  static fs::path path = [] {
    auto p = fs::temp_directory_path() / ("octo_hostile_" + std::to_string(::getpid()));
    fs::create_directories(p);
    Setup s;
    s.opt.zero_grad();
    s.model->forward(octo::ones({1, 3})).sum().backward();
    s.opt.step();
    s.sched.step();
    auto st = s.state();
    st.epoch = 3;
    octo::save_checkpoint(st, (p / "good.safetensors").string());
    return p / "good.safetensors";
  }();
  return path;
}

/// The good checkpoint with `edit` applied to its tensors and metadata, written to a new file.
template <typename Edit>
std::string tampered(const std::string& name, Edit edit) {
  auto file = octo::load_safetensors(good_checkpoint().string());
  edit(file.tensors, file.metadata);
  auto path = (good_checkpoint().parent_path() / (name + ".safetensors")).string();
  octo::save_safetensors(file.tensors, path, file.metadata);
  return path;
}

void set(std::vector<std::pair<std::string, Tensor>>& tensors, const std::string& key, Tensor v) {
  for (auto& [k, t] : tensors)
    if (k == key) t = v;
}

std::string load_error(const std::string& path) {
  Setup s;
  auto st = s.state();
  try {
    octo::load_checkpoint(st, path);
  } catch (const octo::Error& e) {
    return e.msg();
  }
  return "";
}

Tensor f64(double v) { return octo::scalar_tensor(v, {.dtype = octo::kFloat64}); }

}  // namespace

TEST_CASE("the untouched checkpoint loads") {
  CHECK(load_error(good_checkpoint().string()).empty());
}

TEST_CASE("an optimizer group index of INT64_MAX is an error, not an overflow") {
  auto path = tampered("group_max", [](auto& tensors, auto&) {
    for (auto& [k, t] : tensors)
      if (k == "optimizer.param_groups.0.lr") k = "optimizer.param_groups.9223372036854775807.lr";
  });
  std::string msg = load_error(path);
  CHECK_THAT(msg, Catch::Contains("9223372036854775807"));
}

TEST_CASE("a weight stored as int32 where float32 is expected is refused, naming the key") {
  auto path = tampered("int_weight", [](auto& tensors, auto&) {
    for (auto& [k, t] : tensors)
      if (k == "model.weight") t = octo::full(t.sizes(), 5, {.dtype = octo::kInt32});
  });
  std::string msg = load_error(path);
  CHECK_THAT(msg, Catch::Contains("dtype mismatch for weight") && Catch::Contains("int32") &&
                      Catch::Contains("float32"));
}

TEST_CASE("a made-up epoch is refused") {
  for (std::string epoch : {"-5", "3junk", "", "99999999999999999999", " 3"}) {
    auto path = tampered("epoch", [&](auto&, auto& meta) { meta["octo.epoch"] = epoch; });
    INFO("epoch '" << epoch << "'");
    CHECK_THAT(load_error(path), Catch::Contains("bad epoch"));
  }
}

TEST_CASE("infinite or NaN hyper-parameters are refused, naming the key") {
  for (double bad : {std::numeric_limits<double>::infinity(), std::nan("")}) {
    auto path = tampered(
        "lr", [&](auto& tensors, auto&) { set(tensors, "optimizer.param_groups.0.lr", f64(bad)); });
    CHECK_THAT(load_error(path), Catch::Contains("optimizer.param_groups.0.lr") ||
                                     Catch::Contains("param_groups.0.lr"));
  }
}

TEST_CASE("scheduler counters out of range are refused before any cast") {
  for (double bad : {std::nan(""), 1e300, 9223372036854775807.0, -7.0, 2.5}) {
    auto path = tampered("last_epoch", [&](auto& tensors, auto&) {
      set(tensors, "scheduler.last_epoch", f64(bad));
    });
    INFO("last_epoch " << bad);
    CHECK_THAT(load_error(path), Catch::Contains("last_epoch"));
  }
}

TEST_CASE("save refuses a target that is not a regular file, and long names work") {
  auto dir = good_checkpoint().parent_path();
  auto fifo = dir / "a_fifo";
  fs::remove(fifo);
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  Tensor t = octo::ones({2});
  try {
    octo::save_safetensors({{"t", t}}, fifo.string());
    FAIL("saved onto a FIFO");
  } catch (const octo::IOError& e) {
    CHECK_THAT(e.msg(), Catch::Contains("not a regular file") && Catch::Contains("a FIFO"));
  }
  CHECK(fs::is_fifo(fifo));  // still the FIFO, not replaced by a file
  CHECK_THROWS_AS(octo::save_safetensors({{"t", t}}, "/dev/null"), octo::IOError);
  CHECK_THROWS_AS(octo::save_safetensors({{"t", t}}, dir.string()), octo::IOError);
  std::string long_name(250, 'x');
  auto path = dir / (long_name + ".st");  // 253 bytes: the old temp suffix made it too long
  octo::save_safetensors({{"t", t}}, path.string());
  CHECK(octo::load_safetensors(path.string()).tensors.size() == 1);
}
