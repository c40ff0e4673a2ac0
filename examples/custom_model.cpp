// The tutorial's custom model: a 2-layer MLP as an nn::Module, trained a few steps on synthetic
// data, saved with octo::save, loaded into a fresh model, and checked to predict the same.
#include <cstdio>
#include <filesystem>
#include <iostream>

#include <octo/octo.h>

namespace nn = octo::nn;
using octo::Tensor;

struct TwoLayerNet : nn::Cloneable<TwoLayerNet> {
  TwoLayerNet(int64_t in, int64_t hidden, int64_t out)
      : Cloneable("TwoLayerNet"), in(in), hidden(hidden), out(out) {
    reset();
  }
  void reset() override {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(in, hidden));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(hidden, out));
  }
  Tensor forward(const Tensor& x) override { return fc2->forward(octo::relu(fc1->forward(x))); }
  int64_t in, hidden, out;
  std::shared_ptr<nn::Linear> fc1, fc2;
};

int main(int argc, char** argv) {
  octo::manual_seed(0);
  // Synthetic regression: y = x @ w_true + 0.1 * noise.
  Tensor x = octo::randn({256, 8});
  Tensor y = octo::matmul(x, octo::randn({8, 1})) + octo::randn({256, 1}) * 0.1;

  auto model = std::make_shared<TwoLayerNet>(8, 32, 1);
  std::printf("model:\n");
  model->pretty_print(std::cout);
  std::printf("\n%lld parameters\n", static_cast<long long>(model->num_parameters()));
  octo::optim::SGD opt(model->parameters(), {.lr = 0.05, .momentum = 0.9});
  double first = 0, last = 0;
  for (int step = 0; step < 50; ++step) {
    opt.zero_grad();
    Tensor loss = nn::functional::mse_loss(model->forward(x), y);
    loss.backward();
    opt.step();
    last = loss.item<double>();
    if (step == 0) first = last;
    if (step % 10 == 0) std::printf("step %2d  mse %.4f\n", step, last);
  }
  std::printf("mse went from %.4f to %.4f in 50 steps\n", first, last);

  std::string path =
      argc > 1 ? argv[1]
               : (std::filesystem::temp_directory_path() / "custom_model.safetensors").string();
  octo::save(*model, path);
  auto restored = std::make_shared<TwoLayerNet>(8, 32, 1);  // fresh random weights
  octo::load(*restored, path);
  std::printf("saved to and loaded back from %s\n", path.c_str());

  octo::NoGradGuard no_grad;
  Tensor a = model->forward(x), b = restored->forward(x);
  bool same = octo::eq(a, b).to(octo::kFloat64).sum().item<double>() == double(a.numel());
  std::printf("predictions of the loaded model %s the original's\n",
              same ? "equal" : "DIFFER from");
  if (argc <= 1) std::filesystem::remove(path);
  return same && last < first ? 0 : 1;
}
