// Error construction: message first, source location after.
#include "core/error.h"

#include "core/rethrow.h"

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

namespace detail {

std::string exception_message(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const Error& err) {
    return err.msg();
  } catch (const std::exception& err) {
    return err.what();
  } catch (...) {
    return "an unknown exception";
  }
}

void throw_same_subclass(const std::exception_ptr& e, const std::string& message) {
  try {
    std::rethrow_exception(e);
  } catch (const OutOfMemoryError&) {
    throw OutOfMemoryError(message);
  } catch (const DeviceError&) {
    throw DeviceError(message);
  } catch (const ValueError&) {
    throw ValueError(message);
  } catch (const IndexError&) {
    throw IndexError(message);
  } catch (const IOError&) {
    throw IOError(message);
  } catch (const NotImplementedError&) {
    throw NotImplementedError(message);
  } catch (...) {
  }
}

}  // namespace detail

}  // namespace octo
