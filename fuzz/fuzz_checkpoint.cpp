// libFuzzer target: restoring a training checkpoint whose values are hostile. The input is not a
// file: it edits a valid checkpoint of a small model + SGD + StepLR, so that the fuzzer explores
// the restore logic (key names, group and state indices, counters, hyper-parameters, dtypes,
// shapes, the epoch) rather than the safetensors parser (fuzz_safetensors covers that). A refused
// checkpoint must leave the whole training state as it was (Note [All-or-nothing restore]); a
// state that changed is a finding (abort).
//
// Input: a line-based edit script, one edit per line:
//   k <entry> <new key>        rename the entry-th tensor
//   v <entry> <number>         set every element of the entry-th tensor to number
//   t <entry> <dtype>          convert the entry-th tensor (float32, int32, ...)
//   s <entry> <d0,d1,...>      replace the entry-th tensor by zeros of that shape
//   e <text>                   set the epoch metadata to text
#include <algorithm>
#include <sstream>

#include "fuzz_util.h"

namespace {

struct Setup {
  std::shared_ptr<octo::nn::Linear> model = std::make_shared<octo::nn::Linear>(3, 2);
  octo::optim::SGD opt{model->parameters(), {.lr = 0.1, .momentum = 0.9}};
  octo::optim::StepLR sched{opt, 2};
  octo::GradScaler scaler{{.init_scale = 256, .growth_interval = 4}};
  octo::TrainingState state() {
    octo::TrainingState s;
    s.model = model.get();
    s.optimizer = &opt;
    s.scheduler = &sched;
    s.scaler = &scaler;
    return s;
  }
  void train_step() {
    opt.zero_grad();
    scaler.scale(model->forward(octo::ones({1, 3})).sum()).backward();
    scaler.step(opt);
    scaler.update();
    sched.step();
  }
  /// Every restorable value as text, to compare before and after a refused load. Generators are
  /// those that existed before: resolving a file's "rng.cpu:3" may create that device's generator
  /// (in its initial state), which changes nothing that was there.
  std::string observed(const std::vector<octo::Device>& generators) const {
    std::ostringstream os;
    os.precision(17);
    for (const octo::nn::NamedTensors& sd :
         {model->state_dict(), opt.state_dict(), sched.state_dict(), scaler.state_dict()})
      for (const auto& [k, t] : sd) {
        os << k << '=';
        for (double v : t.to(octo::kFloat64).to_vector<double>()) os << v << ',';
      }
    for (const auto& [device, g] : octo::get_rng_states())
      if (std::find(generators.begin(), generators.end(), device) != generators.end())
        os << device << ':' << g.seed << ',' << g.offset << ';';
    return os.str();
  }
};

const octo::SafetensorsFile& good() {
  static const octo::SafetensorsFile file = [] {
    Setup s;
    s.train_step();
    auto st = s.state();
    st.epoch = 2;
    std::string path = fuzz::scratch() + "/good.safetensors";
    octo::save_checkpoint(st, path);
    return octo::load_safetensors(path);
  }();
  return file;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  octo::SafetensorsFile file = good();
  std::istringstream script(std::string(reinterpret_cast<const char*>(data), size));
  std::string line;
  int edits = 0;
  fuzz::expect_clean([&] {
    while (std::getline(script, line) && edits++ < 16) {
      std::istringstream in(line);
      char op = 0;
      in >> op;
      if (op == 'e') {
        std::string text;
        std::getline(in >> std::ws, text);
        file.metadata["octo.epoch"] = text;
        continue;
      }
      size_t entry = 0;
      std::string arg;
      if (!(in >> entry >> arg) || file.tensors.empty()) continue;
      auto& [key, t] = file.tensors[entry % file.tensors.size()];
      if (op == 'k') {
        key = arg;
      } else if (op == 'v') {
        t = octo::full(t.sizes(), std::strtod(arg.c_str(), nullptr), {.dtype = octo::kFloat64})
                .to(t.dtype());
      } else if (op == 't') {
        t = t.to(octo::dtype_from_name(arg));
      } else if (op == 's') {
        octo::Shape shape;
        std::stringstream dims(arg);
        std::string d;
        while (std::getline(dims, d, ',') && shape.size() < 4) {
          int64_t n = std::strtoll(d.c_str(), nullptr, 10);
          if (n < 0 || n > 64) return;
          shape.push_back(n);
        }
        t = octo::zeros(shape, {.dtype = t.dtype()});
      }
    }
    std::string path = fuzz::scratch() + "/edited.safetensors";
    octo::save_safetensors(file.tensors, path, file.metadata);
    Setup s;
    auto st = s.state();
    std::vector<octo::Device> generators;
    for (const auto& [device, g] : octo::get_rng_states()) generators.push_back(device);
    const std::string before = s.observed(generators);
    try {
      octo::load_checkpoint(st, path);
    } catch (const octo::Error&) {
      if (s.observed(generators) != before) std::abort();  // a refused load changed the state
      throw;
    }
    // A restored state must also be usable: one more training step.
    s.train_step();
  });
  return 0;
}
