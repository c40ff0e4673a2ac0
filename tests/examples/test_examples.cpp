// Runs the example programs (mnist, cifar10, custom_model) on tiny generated data: exit codes,
// output, CSV/SVG files, bit-for-bit resume, and errors for bad flags.
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <octo/octo.h>
#include <catch2/catch.hpp>

namespace fs = std::filesystem;

namespace {

struct Run {
  int rc;
  std::string out;  // stdout and stderr
};

std::string bin(const std::string& rel) {
  const char* dir = std::getenv("OCTO_EXAMPLES_DIR");
  REQUIRE(dir != nullptr);  // set by tests/meson.build
  return std::string(dir) + "/" + rel;
}

Run run(const std::string& cmd) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  REQUIRE(p != nullptr);
  Run r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int status = pclose(p);
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  INFO(cmd << "\n" << r.out);
  return r;
}

fs::path scratch(const std::string& name) {
  fs::path d =
      fs::temp_directory_path() / ("octo_examples_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// Easy images: class k has a bright band at rows 2k+3, 2k+4 over faint noise.
std::pair<octo::Tensor, octo::Tensor> easy_images(int64_t n, int64_t c, int64_t hw, uint64_t seed) {
  octo::manual_seed(seed);
  octo::Tensor labels = octo::randint(0, 10, {n});
  octo::Tensor img = octo::zeros({n, c, hw, hw}, {.dtype = octo::kUInt8});
  auto* px = img.data_ptr<uint8_t>();
  const auto* lb = labels.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t y = 0; y < hw; ++y)
        for (int64_t x = 0; x < hw; ++x)
          px[((i * c + ch) * hw + y) * hw + x] =
              (y / 2 == lb[i] + 1) ? 255 : static_cast<uint8_t>((x * 7 + y * 13 + i) % 40);
  return {img, labels};
}

fs::path make_mnist(const std::string& name, int64_t n_train, int64_t n_test) {
  fs::path d = scratch(name);
  auto [tr_x, tr_y] = easy_images(n_train, 1, 28, 1);
  auto [te_x, te_y] = easy_images(n_test, 1, 28, 2);
  octo::data::write_idx((d / "train-images-idx3-ubyte").string(), tr_x.view({n_train, 28, 28}));
  octo::data::write_idx((d / "train-labels-idx1-ubyte.gz").string(), tr_y.to(octo::kUInt8));
  octo::data::write_idx((d / "t10k-images-idx3-ubyte.gz").string(), te_x.view({n_test, 28, 28}));
  octo::data::write_idx((d / "t10k-labels-idx1-ubyte").string(), te_y.to(octo::kUInt8));
  return d;
}

void write_cifar(const fs::path& file, int64_t n, uint64_t seed) {
  auto [x, y] = easy_images(n, 3, 32, seed);
  std::ofstream out(file, std::ios::binary);
  const auto* px = x.data_ptr<uint8_t>();
  const auto* lb = y.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    out.put(static_cast<char>(lb[i]));
    out.write(reinterpret_cast<const char*>(px + i * 3072), 3072);
  }
}

double final_accuracy(const std::string& out) {
  auto pos = out.rfind("test accuracy: ");
  REQUIRE(pos != std::string::npos);
  return std::stod(out.substr(pos + 15));
}

// Every "model.*" tensor of two checkpoints, compared bit for bit.
void require_same_model(const fs::path& a, const fs::path& b) {
  auto fa = octo::load_safetensors(a.string()), fb = octo::load_safetensors(b.string());
  std::map<std::string, octo::Tensor> tb(fb.tensors.begin(), fb.tensors.end());
  int compared = 0;
  for (const auto& [name, t] : fa.tensors) {
    if (name.rfind("model.", 0) != 0) continue;
    INFO(name);
    REQUIRE(tb.count(name) == 1);
    const octo::Tensor& u = tb.at(name);
    REQUIRE(t.shape() == u.shape());
    REQUIRE(t.dtype() == u.dtype());
    REQUIRE(std::memcmp(t.contiguous().raw_data(), u.contiguous().raw_data(), t.nbytes()) == 0);
    ++compared;
  }
  REQUIRE(compared >= 4);
}

}  // namespace

TEST_CASE("mnist: the MLP learns easy generated data", "[examples]") {
  fs::path d = make_mnist("mlp", 512, 128);
  Run r = run(bin("mnist/mnist") + " --model mlp --data " + d.string() +
              " --epochs 2 --batch-size 32 --threads 1 --seed 3");
  REQUIRE(r.rc == 0);
  CHECK(r.out.find("mnist-mlp") != std::string::npos);
  CHECK(r.out.find("epoch 2: train loss") != std::string::npos);
  CHECK(final_accuracy(r.out) > 80.0);  // 10% is chance
  fs::remove_all(d);
}

TEST_CASE("mnist: CNN on two devices with --limit, --csv and --plot", "[examples]") {
  fs::path d = make_mnist("cnn_dp", 200, 100);
  fs::path csv = d / "m.csv", svg = d / "m.svg";
  Run r = run(bin("mnist/mnist") + " --model cnn --devices cpu:0,cpu:1 --data " + d.string() +
              " --limit 96 --epochs 2 --batch-size 32 --threads 1 --csv " + csv.string() +
              " --plot " + svg.string());
  REQUIRE(r.rc == 0);
  CHECK(r.out.find("on cpu:0,cpu:1") != std::string::npos);
  CHECK(r.out.find("96 training / 96 test examples") != std::string::npos);
  std::ifstream in(csv);
  std::string header, row1, row2, extra;
  std::getline(in, header), std::getline(in, row1), std::getline(in, row2);
  CHECK(header == "epoch,train_loss,train_acc,test_loss,test_acc,seconds,samples_per_s");
  CHECK(row1.rfind("1,", 0) == 0);
  CHECK(row2.rfind("2,", 0) == 0);
  CHECK_FALSE(std::getline(in, extra));
  std::ifstream s(svg);
  std::string text((std::istreambuf_iterator<char>(s)), std::istreambuf_iterator<char>());
  CHECK(text.rfind("<svg", 0) == 0);
  CHECK(text.find("polyline") != std::string::npos);
  CHECK(text.find("</svg>") != std::string::npos);
  fs::remove_all(d);
}

TEST_CASE("mnist: --resume gives the same weights as an uninterrupted run", "[examples]") {
  fs::path d = make_mnist("resume", 128, 32);
  std::string model = GENERATE(std::string("cnn"), std::string("mlp --devices cpu:0,cpu:1"));
  std::string common = bin("mnist/mnist") + " --model " + model + " --data " + d.string() +
                       " --batch-size 32 --threads 1 --seed 7";
  fs::path full = d / "full.safetensors", part = d / "part.safetensors";
  REQUIRE(run(common + " --epochs 3 --save " + full.string()).rc == 0);
  Run r = run(common + " --epochs 3 --stop-after 1 --save " + part.string());
  REQUIRE(r.rc == 0);
  CHECK(r.out.find("epoch 2:") == std::string::npos);
  r = run(common + " --epochs 3 --resume " + part.string() + " --save " + part.string());
  REQUIRE(r.rc == 0);
  CHECK(r.out.find("resumed from") != std::string::npos);
  CHECK(r.out.find("epoch 1:") == std::string::npos);  // epoch 1 is not trained again
  require_same_model(full, part);
  // A different seed gives different weights (the comparison is not vacuous).
  fs::path other = d / "other.safetensors";
  REQUIRE(run(bin("mnist/mnist") + " --model " + model + " --data " + d.string() +
              " --batch-size 32 --threads 1 --seed 8 --epochs 1 --save " + other.string())
              .rc == 0);
  auto fa = octo::load_safetensors(part.string()), fo = octo::load_safetensors(other.string());
  bool any_diff = false;
  std::map<std::string, octo::Tensor> to(fo.tensors.begin(), fo.tensors.end());
  for (const auto& [name, t] : fa.tensors)
    if (name.rfind("model.", 0) == 0 && t.is_floating_point() &&
        std::memcmp(t.contiguous().raw_data(), to.at(name).contiguous().raw_data(), t.nbytes()) !=
            0)
      any_diff = true;
  CHECK(any_diff);
  fs::remove_all(d);
}

TEST_CASE("mnist: bad flags and missing data give clear errors", "[examples]") {
  std::string mnist = bin("mnist/mnist");
  Run r = run(mnist + " --model resnet");
  CHECK(r.rc == 2);
  CHECK(r.out.find("--model") != std::string::npos);
  r = run(mnist + " --epochs many");
  CHECK(r.rc == 2);
  CHECK(r.out.find("--epochs") != std::string::npos);
  r = run(mnist + " --no-such-flag");
  CHECK(r.rc == 2);
  CHECK(r.out.find("no-such-flag") != std::string::npos);
  r = run(mnist + " --device tpu:0");
  CHECK(r.rc == 2);
  CHECK(r.out.find("tpu:0") != std::string::npos);
  r = run(mnist + " --devices cpu:0,,cpu:1");
  CHECK(r.rc == 2);
  r = run(mnist + " --data /nonexistent/octo-mnist");
  CHECK(r.rc == 1);
  CHECK(r.out.find("/nonexistent/octo-mnist") != std::string::npos);
  r = run(mnist + " --help");
  CHECK(r.rc == 0);
  CHECK(r.out.find("--resume") != std::string::npos);
}

TEST_CASE("cifar10: a tiny ResNet trains on generated binary batches and resumes", "[examples]") {
  fs::path d = scratch("cifar");
  for (int i = 1; i <= 5; ++i) write_cifar(d / ("data_batch_" + std::to_string(i) + ".bin"), 12, i);
  write_cifar(d / "test_batch.bin", 20, 9);
  std::string common = bin("cifar10/cifar10") + " --data " + d.string() +
                       " --width 2 --batch-size 16 --threads 1 --seed 5";
  fs::path full = d / "full.safetensors", part = d / "part.safetensors";
  Run r = run(common + " --epochs 2 --save " + full.string());
  REQUIRE(r.rc == 0);
  CHECK(r.out.find("60 training / 20 test examples") != std::string::npos);
  CHECK(r.out.find("test accuracy: ") != std::string::npos);
  REQUIRE(run(common + " --epochs 2 --stop-after 1 --save " + part.string()).rc == 0);
  REQUIRE(run(common + " --epochs 2 --resume " + part.string() + " --save " + part.string()).rc ==
          0);
  require_same_model(full, part);
  r = run(bin("cifar10/cifar10") + " --data " + d.string() + " --label-smoothing 2");
  CHECK(r.rc == 2);
  r = run(bin("cifar10/cifar10") + " --data " + (d / "missing").string());
  CHECK(r.rc == 1);
  CHECK(r.out.find("error:") != std::string::npos);
  fs::remove_all(d);
}

TEST_CASE("custom_model: trains, saves, loads and predicts the same", "[examples]") {
  fs::path d = scratch("custom");
  Run r = run(bin("custom_model") + " " + (d / "m.safetensors").string());
  REQUIRE(r.rc == 0);
  CHECK(r.out.find("predictions of the loaded model equal the original's") != std::string::npos);
  CHECK(fs::exists(d / "m.safetensors"));
  fs::remove_all(d);
}
