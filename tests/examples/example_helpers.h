// Helpers for tests that run the example programs: running a command, scratch folders, and
// small generated datasets in the real MNIST (IDX) and CIFAR-10 (binary) formats.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>

#include <octo/octo.h>
#include <catch2/catch.hpp>

namespace example_helpers {

namespace fs = std::filesystem;

struct Run {
  int rc;
  std::string out;  // stdout and stderr
};

inline std::string bin(const std::string& rel) {
  const char* dir = std::getenv("OCTO_EXAMPLES_DIR");
  REQUIRE(dir != nullptr);  // set by tests/meson.build
  return std::string(dir) + "/" + rel;
}

inline Run run(const std::string& cmd) {
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

inline fs::path scratch(const std::string& name) {
  fs::path d =
      fs::temp_directory_path() / ("octo_examples_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// Easy images: class k has a bright band at rows 2k+3, 2k+4 over faint noise.
inline std::pair<octo::Tensor, octo::Tensor> easy_images(int64_t n, int64_t c, int64_t hw,
                                                         uint64_t seed) {
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

inline fs::path make_mnist(const std::string& name, int64_t n_train, int64_t n_test) {
  fs::path d = scratch(name);
  auto [tr_x, tr_y] = easy_images(n_train, 1, 28, 1);
  auto [te_x, te_y] = easy_images(n_test, 1, 28, 2);
  octo::data::write_idx((d / "train-images-idx3-ubyte").string(), tr_x.view({n_train, 28, 28}));
  octo::data::write_idx((d / "train-labels-idx1-ubyte.gz").string(), tr_y.to(octo::kUInt8));
  octo::data::write_idx((d / "t10k-images-idx3-ubyte.gz").string(), te_x.view({n_test, 28, 28}));
  octo::data::write_idx((d / "t10k-labels-idx1-ubyte").string(), te_y.to(octo::kUInt8));
  return d;
}

inline void write_cifar(const fs::path& file, int64_t n, uint64_t seed) {
  auto [x, y] = easy_images(n, 3, 32, seed);
  std::ofstream out(file, std::ios::binary);
  const auto* px = x.data_ptr<uint8_t>();
  const auto* lb = y.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    out.put(static_cast<char>(lb[i]));
    out.write(reinterpret_cast<const char*>(px + i * 3072), 3072);
  }
}

inline double final_accuracy(const std::string& out) {
  auto pos = out.rfind("test accuracy: ");
  REQUIRE(pos != std::string::npos);
  return std::stod(out.substr(pos + 15));
}

}  // namespace example_helpers
