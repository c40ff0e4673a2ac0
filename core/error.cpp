// Error construction: message first, source location after.
#include "core/error.h"

namespace octo {

namespace {
std::string with_location(const std::string& msg, const char* file, int line) {
  std::string f = file ? file : "?";
  // Trim to the path below the source root so messages stay short.
  for (const char* root : {"/core/", "/tensor/", "/kernels/", "/autograd/", "/nn/", "/optim/",
                           "/parallel/", "/data/"}) {
    auto pos = f.rfind(root);
    if (pos != std::string::npos) {
      f = f.substr(pos + 1);
      break;
    }
  }
  return msg + " (" + f + ":" + std::to_string(line) + ")";
}
}  // namespace

Error::Error(std::string msg, const char* file, int line)
    : std::runtime_error(with_location(msg, file, line)), msg_(std::move(msg)) {}

}  // namespace octo
