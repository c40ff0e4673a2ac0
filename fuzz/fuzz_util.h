// Shared by the fuzz targets: the fuzzer's bytes as a file (the readers take paths), and the
// rule every target enforces: octo may reject an input only with an octo::Error.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <octo/octo.h>

namespace fuzz {

/// A scratch folder of this process, made once.
inline const std::string& scratch() {
  static const std::string dir = [] {
    std::string d = "/tmp/octo_fuzz_" + std::to_string(::getpid());
    std::string cmd = "mkdir -p " + d;
    if (std::system(cmd.c_str()) != 0) std::abort();
    return d;
  }();
  return dir;
}

/// Writes data to scratch()/name and returns the path.
inline std::string write_file(const std::string& name, const uint8_t* data, size_t size) {
  std::string path = scratch() + "/" + name;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (size && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  return path;
}

/// Runs fn; an octo::Error is the accepted way to refuse an input. Anything else -- another
/// exception type, a crash, a sanitizer report, a hang -- is a finding.
template <typename F>
void expect_clean(F&& fn) {
  try {
    fn();
  } catch (const octo::Error&) {
  }
}

}  // namespace fuzz
