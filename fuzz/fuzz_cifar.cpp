// libFuzzer target: a CIFAR-10 binary batch (test_batch.bin of a folder).
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::write_file("test_batch.bin", data, size);
  fuzz::expect_clean([&] {
    octo::data::CIFAR10 ds(fuzz::scratch(), /*train=*/false);
    if (ds.size() > 0) {
      octo::data::Example e = ds.get(ds.size() - 1);
      (void)e.data.to(octo::kFloat64).sum().item<double>();
    }
  });
  return 0;
}
