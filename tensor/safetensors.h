// Safetensors checkpoints: named tensors saved and loaded in the Hugging Face safetensors format.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"
#include "tensor/tensor.h"

namespace octo {

/// Writes `tensors` (name -> tensor, any device, any strides; each is copied to contiguous cpu
/// memory) and optional string metadata to `path` in the safetensors format (docs/checkpoints.md).
/// The write is atomic: the bytes go to a temporary file next to `path`, which is fsync'ed and
/// renamed over `path`, so a failure or crash leaves any previous file intact.
/// Tensors are laid out by decreasing element size (stable, so same-size tensors keep the given
/// order), which keeps every tensor aligned to its element size, as the reference writer does.
/// Throws ValueError for empty, duplicate or reserved ("__metadata__") names, undefined tensors
/// and names or metadata that are not valid UTF-8; IOError (naming the path and the OS error)
/// when the file cannot be written.
///
///   octo::save_safetensors({{"weight", w}, {"bias", b}}, "model.safetensors", {{"epoch", "3"}});
void save_safetensors(const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::string& path,
                      const std::map<std::string, std::string>& metadata = {});

/// What load_safetensors returns: the tensors in the order of their data offsets in the file
/// (for files octo wrote: by decreasing element size, then in the order they were saved), and
/// the file's "__metadata__" map (empty when the file has none).
struct SafetensorsFile {
  std::vector<std::pair<std::string, Tensor>> tensors;
  std::map<std::string, std::string> metadata;
};

/// Reads a safetensors file onto `device`. Every field of the header is validated before any
/// tensor memory is allocated; a malformed or hostile file gives an IOError naming the file and
/// what is wrong (see docs/checkpoints.md for the full list of checks).
///
///   auto ckpt = octo::load_safetensors("model.safetensors", "cpu:1");
///   for (auto& [name, t] : ckpt.tensors) ...
SafetensorsFile load_safetensors(const std::string& path, Device device = kCPU);

namespace detail {
/// Testing hook: makes every later save_safetensors fail with an I/O error once it has written
/// `fail_after_bytes` bytes to its temporary file (-1, the default, turns the fault off).
void set_safetensors_write_fault(int64_t fail_after_bytes);
}  // namespace detail

}  // namespace octo
