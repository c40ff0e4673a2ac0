// Runs the example programs (mnist, cifar10, custom_model) on tiny generated data: exit codes,
// output, CSV/SVG files, bit-for-bit resume, and errors for bad flags.
#include <cstring>
#include <filesystem>
#include <map>
#include <string>

#include <octo/octo.h>
#include <catch2/catch.hpp>

#include "examples/example_helpers.h"

namespace fs = std::filesystem;
using namespace example_helpers;

namespace {

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

TEST_CASE("mnist: --amp bf16 and fp16 train under autocast", "[examples]") {
  fs::path d = make_mnist("amp", 512, 128);
  for (const char* amp : {"bf16", "fp16"}) {
    INFO(amp);
    Run r = run(bin("mnist/mnist") + " --model mlp --data " + d.string() +
                " --epochs 2 --batch-size 32 --threads 1 --seed 3 --amp " + amp);
    REQUIRE(r.rc == 0);
    CHECK(r.out.find(std::string("mixed precision ") +
                     (amp == std::string("bf16") ? "bfloat16 (autocast)"
                                                 : "float16 (autocast and GradScaler)")) !=
          std::string::npos);
    CHECK(final_accuracy(r.out) > 80.0);  // as the float32 run above
  }
  Run bad = run(bin("mnist/mnist") + " --amp bf17");
  CHECK(bad.rc == 2);
  CHECK(bad.out.find("--amp: bf17 not in {off,bf16,fp16}") != std::string::npos);
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
  std::string model = GENERATE(std::string("cnn"), std::string("mlp --devices cpu:0,cpu:1"),
                               std::string("mlp --amp fp16"));
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
  // The loss scaler's state travels with the checkpoint (only when there is one: --amp fp16).
  const bool fp16 = model.find("fp16") != std::string::npos;
  CHECK((r.out.find("loss scale 65536 after the epoch") != std::string::npos) == fp16);
  size_t scaler_keys = 0;
  for (const auto& [name, t] : octo::load_safetensors(part.string()).tensors)
    scaler_keys += name.rfind("scaler.", 0) == 0;
  CHECK(scaler_keys == (fp16 ? 5u : 0u));
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

TEST_CASE("mnist: flag mistakes found by a hostile user give short, right errors", "[examples]") {
  std::string mnist = bin("mnist/mnist");
  Run r = run(mnist + " --lr abc");
  CHECK(r.rc == 2);
  CHECK(r.out.find("expected a positive number, got 'abc'") != std::string::npos);
  CHECK(r.out.find("179769") == std::string::npos);  // not DBL_MAX's 309 digits
  r = run(mnist + " --devices cpu:0,bogus");
  CHECK(r.rc == 2);
  CHECK(r.out.find("--devices") != std::string::npos);
  r = run(mnist + " --devices cpu:0,cpu:0");
  CHECK(r.rc == 2);
  CHECK(r.out.find("listed twice") != std::string::npos);
  r = run(mnist + " --save /nonexistent-octo-dir/ckpt.safetensors");
  CHECK(r.rc == 2);
  CHECK(r.out.find("does not exist") != std::string::npos);
  CHECK(r.out.find("epoch 1") == std::string::npos);  // refused before training
  r = run(mnist + " --save /dev/null");
  CHECK(r.rc == 2);
  CHECK(r.out.find("not a regular file") != std::string::npos);
}

TEST_CASE("mnist: a loss that turns NaN stops training, naming the batch", "[examples]") {
  auto d = make_mnist("nan", 256, 64);
  Run r = run(bin("mnist/mnist") + " --model mlp --data " + d.string() +
              " --epochs 1 --batch-size 32 --lr 1e30");
  CHECK(r.rc == 1);
  CHECK(r.out.find("training stopped: the loss is") != std::string::npos);
  CHECK(r.out.find("batch ") != std::string::npos);
  // With anomaly mode the run stops at the op that first made a NaN or Inf, and names it.
  r = run(bin("mnist/mnist") + " --model mlp --data " + d.string() +
          " --epochs 1 --batch-size 32 --lr 1e30 --detect-anomaly");
  CHECK(r.rc == 1);
  const bool named = r.out.find("anomaly mode: the op recorded as") != std::string::npos ||
                     r.out.find("Function '") != std::string::npos;
  CHECK(named);
  CHECK(r.out.find("training stopped: the loss is") == std::string::npos);
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
