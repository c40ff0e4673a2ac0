// Rethrowing a caught exception with a new message while keeping octo's error type (a worker's
// IOError stays an IOError): what run_on_devices and the DataLoader's workers report with.
#pragma once

#include <exception>
#include <string>

namespace octo::detail {

/// The message of a caught exception: octo's msg(), what(), or "an unknown exception".
std::string exception_message(const std::exception_ptr& e);

/// Throws `message` as the same subclass of octo::Error as `e` (ValueError, IndexError,
/// DeviceError, OutOfMemoryError, IOError, NotImplementedError). Returns when `e` is none of
/// them (a plain Error, another exception type): the caller decides what to throw then.
void throw_same_subclass(const std::exception_ptr& e, const std::string& message);

}  // namespace octo::detail
