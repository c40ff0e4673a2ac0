// libFuzzer target: safetensors files (header JSON, offsets, dtypes, shapes and data).
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string path = fuzz::write_file("input.safetensors", data, size);
  fuzz::expect_clean([&] {
    octo::SafetensorsFile file = octo::load_safetensors(path);
    for (auto& [name, t] : file.tensors)
      if (t.numel() > 0 && t.numel() < (1 << 20)) (void)t.to(octo::kFloat64).sum().item<double>();
  });
  return 0;
}
