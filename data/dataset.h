// Datasets: the Dataset interface, TensorDataset, and the MNIST (IDX) and CIFAR-10 readers.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "tensor/tensor.h"

namespace octo::data {

/// One example, or a batch of them (data stacked along a new dim 0).
struct Example {
  Tensor data;
  Tensor target;
};

/// A random-access collection of examples.
class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual size_t size() const = 0;
  virtual Example get(size_t index) const = 0;
  /// A batch: the examples at `indices`, stacked. The default stacks get(); datasets backed by
  /// one tensor override it with one index_select.
  virtual Example get_batch(const std::vector<size_t>& indices) const;
};

/// Examples are rows of `data` and `targets` (same first dim).
class TensorDataset : public Dataset {
 public:
  TensorDataset(Tensor data, Tensor targets);
  size_t size() const override;
  Example get(size_t index) const override;
  Example get_batch(const std::vector<size_t>& indices) const override;
  const Tensor& data() const { return data_; }
  const Tensor& targets() const { return targets_; }

 protected:
  Tensor data_, targets_;
};

/// Reads an IDX file (raw, or gzip-compressed when the name ends in .gz or the bytes say so):
/// magic 0x00000801/0x00000803 (uint8 labels / images; 2049 and 2051 in MNIST), big-endian dims.
/// Returns a uint8 tensor of those dims. Every inconsistency (bad magic, wrong dims, size not
/// matching the dims, truncation, a bad gzip stream) is an IOError naming the file.
Tensor read_idx(const std::string& path);

/// MNIST or Fashion-MNIST from a directory holding {train,t10k}-{images-idx3,labels-idx1}-ubyte
/// (each optionally .gz). data: uint8 [N, 1, 28, 28]; targets: int64 [N].
class MNIST : public TensorDataset {
 public:
  MNIST(const std::string& root, bool train);
  /// Where the files were read from.
  const std::string& images_path() const { return images_path_; }

 private:
  explicit MNIST(std::tuple<Tensor, Tensor, std::string> loaded);
  std::string images_path_;
};

/// CIFAR-10 from its binary version: data_batch_1.bin .. data_batch_5.bin (train) or
/// test_batch.bin, records of 1 label byte + 3072 pixel bytes (3 x 32 x 32, channel-major).
/// data: uint8 [N, 3, 32, 32]; targets: int64 [N].
class CIFAR10 : public TensorDataset {
 public:
  CIFAR10(const std::string& root, bool train);
  static constexpr int64_t kRecordBytes = 1 + 3 * 32 * 32;
};

/// Writes an IDX file (uint8, magic 0x08, any dims; gzip when the name ends in .gz). For tests,
/// tools and users preparing their own data.
void write_idx(const std::string& path, const Tensor& data);

}  // namespace octo::data
