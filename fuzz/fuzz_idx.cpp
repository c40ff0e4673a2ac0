// libFuzzer target: IDX files, raw and gzip'd (octo::data::read_idx picks by the gzip magic).
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const bool gz = size >= 2 && data[0] == 0x1f && data[1] == 0x8b;
  std::string path = fuzz::write_file(gz ? "input.idx.gz" : "input.idx", data, size);
  fuzz::expect_clean([&] {
    octo::Tensor t = octo::data::read_idx(path);
    if (t.numel() > 0) (void)t.to(octo::kFloat64).sum().item<double>();  // touch every element
  });
  return 0;
}
