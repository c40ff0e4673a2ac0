// Checkpoints with hostile values: every value a checkpoint restores is validated, and the error
// names the key and the value (integer overflow, silent dtype conversion, made-up epochs,
// infinite hyper-parameters, out-of-range counters), and save never writes through a device.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <cmath>
#include <filesystem>
#include <functional>
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
  octo::GradScaler scaler{{.init_scale = 1024, .growth_interval = 3}};
  octo::TrainingState state() {
    octo::TrainingState s;
    s.model = model.get();
    s.optimizer = &opt;
    s.scheduler = &sched;
    s.scaler = &scaler;
    return s;
  }
};

fs::path good_checkpoint() {
  static fs::path path = [] {
    auto p = fs::temp_directory_path() / ("octo_hostile_" + std::to_string(::getpid()));
    fs::create_directories(p);
    Setup s;
    s.opt.zero_grad();
    s.scaler.scale(s.model->forward(octo::ones({1, 3})).sum()).backward();
    s.scaler.step(s.opt);
    s.scaler.update();  // one good step: _growth_tracker 1
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

TEST_CASE("a loss scaler's state is saved and restored with the training state") {
  Setup s;
  auto st = s.state();
  octo::load_checkpoint(st, good_checkpoint().string());
  CHECK(s.scaler.get_scale() == 1024);
  CHECK(s.scaler.growth_tracker() == 1);
  CHECK(s.scaler.growth_interval() == 3);

  // A disabled scaler saves nothing and ignores what a file holds.
  octo::GradScaler off({.enabled = false});
  st.scaler = &off;
  auto path = (good_checkpoint().parent_path() / "no_scaler.safetensors").string();
  octo::save_checkpoint(st, path);
  for (const auto& [key, t] : octo::load_safetensors(path).tensors)
    CHECK(key.rfind("scaler.", 0) != 0);
  octo::load_checkpoint(st, good_checkpoint().string());

  // An enabled scaler refuses a file without its state, and keeps its own.
  Setup fresh;
  auto fst = fresh.state();
  try {
    octo::load_checkpoint(fst, path);
    FAIL("loaded no scaler state into an enabled scaler");
  } catch (const octo::ValueError& e) {
    CHECK_THAT(e.msg(), Catch::Contains("no GradScaler state") && Catch::Contains(path));
  }
  CHECK(fresh.scaler.get_scale() == 1024);
  CHECK(fresh.scaler.growth_tracker() == 0);
}

TEST_CASE("hostile loss-scaler values are refused, naming the key") {
  struct Case {
    const char* key;
    Tensor value;
    const char* names;
  };
  const Tensor i64 = octo::scalar_tensor(-4, {.dtype = octo::kInt64});
  for (const Case& c :
       {Case{"scaler.scale", f64(std::nan("")), "'scale'"}, Case{"scaler.scale", f64(0), "'scale'"},
        Case{"scaler.growth_factor", f64(0.5), "'growth_factor'"},
        Case{"scaler.backoff_factor", f64(1), "'backoff_factor'"},
        Case{"scaler.growth_interval", i64, "'growth_interval'"},
        Case{"scaler._growth_tracker", f64(1e300), "'_growth_tracker'"}}) {
    INFO(c.key);
    auto path = tampered("scaler", [&](auto& tensors, auto&) { set(tensors, c.key, c.value); });
    CHECK_THAT(load_error(path), Catch::Contains("GradScaler") && Catch::Contains(c.names));
  }
}

namespace {

/// Everything a training state holds, as plain values, to compare before and after a load.
struct Observed {
  std::vector<float> weight, momentum;
  double lr = 0, scale = 0;
  int64_t last_epoch = 0, tracker = 0;
  uint64_t rng_seed = 0, rng_offset = 0;
  bool operator==(const Observed&) const = default;
};

Observed observe(Setup& s) {
  Observed o;
  o.weight = s.model->weight.to_vector<float>();
  for (const auto& [key, t] : s.opt.state_dict())
    if (key == "state.0.momentum_buffer") o.momentum = t.to_vector<float>();
  o.lr = s.opt.lr();
  o.scale = s.scaler.get_scale();
  o.last_epoch = s.sched.last_epoch();
  o.tracker = s.scaler.growth_tracker();
  o.rng_seed = octo::default_generator().state().seed;
  o.rng_offset = octo::default_generator().state().offset;
  return o;
}

}  // namespace

TEST_CASE("a refused checkpoint changes nothing: model, optimizer, scheduler, scaler, generators") {
  // A state unlike the file's in every part: other weights, two steps of momentum, lr 0.05,
  // scheduler and scaler counters, another generator state.
  (void)good_checkpoint();  // made first: making it draws from the generator
  Setup s;
  for (int i = 0; i < 2; ++i) {
    s.opt.zero_grad();
    s.scaler.scale(s.model->forward(octo::full({2, 3}, 0.5)).sum()).backward();
    s.scaler.step(s.opt);
    s.scaler.update();
  }
  s.opt.set_lr(0, 0.05);
  octo::manual_seed(99);
  (void)octo::randn({5});
  const Observed before = observe(s);
  REQUIRE(!before.momentum.empty());

  // One bad part each; the parts before it in the file (and in the restore) are good.
  struct Case {
    const char* what;
    std::function<void(std::vector<std::pair<std::string, Tensor>>&)> edit;
  };
  for (const Case& c : std::vector<Case>{
           {"a model weight of the wrong shape",
            [](auto& t) {
              set(t, "model.weight", octo::zeros({5, 5}));
            }},
           {"a NaN loss scale", [](auto& t) { set(t, "scaler.scale", f64(std::nan(""))); }},
           {"a scheduler counter of 2.5",
            [](auto& t) { set(t, "scheduler.last_epoch", f64(2.5)); }},
           {"a generator of an unknown device",
            [](auto& t) {
              for (auto& [k, v] : t)
                if (k.rfind("rng.", 0) == 0) k = "rng.tpu:0";
            }},
           {"a momentum buffer of the wrong shape",
            [](auto& t) { set(t, "optimizer.state.0.momentum_buffer", octo::zeros({7})); }}}) {
    INFO(c.what);
    auto path = tampered("partial", [&](auto& tensors, auto&) { c.edit(tensors); });
    auto st = s.state();
    CHECK_THROWS_AS(octo::load_checkpoint(st, path), octo::Error);
    CHECK(observe(s) == before);
    CHECK(st.epoch == 0);
  }
  // And the good file does change them.
  auto st = s.state();
  octo::load_checkpoint(st, good_checkpoint().string());
  CHECK(!(observe(s) == before));
}

TEST_CASE("a refused checkpoint leaves an optimizer without a scheduler without initial_lr") {
  // The file's optimizer part (saved beside a StepLR) carries initial_lr; this optimizer has no
  // scheduler, so none. The optimizer part loads, the scaler part is refused: initial_lr must
  // not stay behind.
  auto path = tampered("scaler_after_opt",
                       [](auto& tensors, auto&) { set(tensors, "scaler.scale", f64(-1)); });
  Setup s;
  auto st = s.state();
  st.scheduler = nullptr;
  octo::optim::SGD plain(s.model->parameters(), {.lr = 0.1, .momentum = 0.9});
  st.optimizer = &plain;
  REQUIRE(!plain.initial_lr(0));
  CHECK_THROWS_WITH(octo::load_checkpoint(st, path), Catch::Contains("'scale'"));
  CHECK(!plain.initial_lr(0));
}
