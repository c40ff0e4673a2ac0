// Datasets and the IDX / CIFAR-10 readers, validating everything a file can get wrong.
#include "data/dataset.h"

#include <zlib.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "autograd/grad_mode.h"
#include "autograd/ops/indexing.h"
#include "core/error.h"
#include "tensor/factories.h"

namespace octo::data {

namespace fs = std::filesystem;

Example Dataset::get_batch(const std::vector<size_t>& indices) const {
  std::vector<Tensor> data, targets;
  for (size_t i : indices) {
    Example e = get(i);
    data.push_back(e.data);
    targets.push_back(e.target);
  }
  return {stack(data), stack(targets)};
}

TensorDataset::TensorDataset(Tensor data, Tensor targets)
    : data_(std::move(data)), targets_(std::move(targets)) {
  OCTO_CHECK_VALUE(data_.dim() >= 1 && targets_.dim() >= 1 && data_.size(0) == targets_.size(0),
                   "TensorDataset: data and targets must have the same first dimension, got ",
                   data_.sizes(), " and ", targets_.sizes());
}

size_t TensorDataset::size() const { return static_cast<size_t>(data_.size(0)); }

Example TensorDataset::get(size_t index) const {
  OCTO_CHECK_INDEX(index < size(), "TensorDataset: index ", index, " out of range for ", size(),
                   " examples");
  auto i = static_cast<int64_t>(index);
  return {data_.select(0, i), targets_.select(0, i)};
}

Example TensorDataset::get_batch(const std::vector<size_t>& indices) const {
  std::vector<int64_t> idx(indices.begin(), indices.end());
  for (int64_t i : idx)
    OCTO_CHECK_INDEX(i >= 0 && static_cast<size_t>(i) < size(), "TensorDataset: index ", i,
                     " out of range for ", size(), " examples");
  NoGradGuard no_grad;
  Tensor index = from_vector(idx, {static_cast<int64_t>(idx.size())});
  return {index_select(data_, 0, index), index_select(targets_, 0, index)};
}

namespace {

/// The whole file, gunzipped when it is gzip (magic 1f 8b).
std::vector<uint8_t> read_file(const std::string& path) {
  std::error_code ec;
  OCTO_CHECK_IO(fs::is_regular_file(path, ec), "cannot open '", path, "': no such file");
  auto size = fs::file_size(path, ec);
  OCTO_CHECK_IO(!ec, "cannot read the size of '", path, "': ", ec.message());
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  std::ifstream in(path, std::ios::binary);
  OCTO_CHECK_IO(in.good(), "cannot open '", path, "'");
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(size));
  OCTO_CHECK_IO(static_cast<uint64_t>(in.gcount()) == size, "'", path, "': read ", in.gcount(),
                " of ", size, " bytes");
  if (bytes.size() < 2 || bytes[0] != 0x1f || bytes[1] != 0x8b) {
    OCTO_CHECK_IO(path.size() < 3 || path.substr(path.size() - 3) != ".gz", "'", path,
                  "' is named .gz but is not a gzip file");
    return bytes;
  }
  // gzip: inflate in chunks (the uncompressed size is not trusted from the trailer).
  z_stream zs{};
  OCTO_CHECK_IO(inflateInit2(&zs, 16 + MAX_WBITS) == Z_OK, "'", path, "': zlib init failed");
  std::vector<uint8_t> out;
  std::vector<uint8_t> chunk(1 << 20);
  zs.next_in = bytes.data();
  zs.avail_in = static_cast<uInt>(bytes.size());
  int status = Z_OK;
  while (status != Z_STREAM_END) {
    zs.next_out = chunk.data();
    zs.avail_out = static_cast<uInt>(chunk.size());
    status = inflate(&zs, Z_NO_FLUSH);
    if (status != Z_OK && status != Z_STREAM_END) {
      std::string why =
          zs.msg ? zs.msg : (status == Z_BUF_ERROR ? "unexpected end of data" : "error");
      inflateEnd(&zs);
      OCTO_THROW(IOError, "'", path, "': bad gzip data (", why, ")");
    }
    out.insert(out.end(), chunk.data(), chunk.data() + (chunk.size() - zs.avail_out));
    if (status != Z_STREAM_END && zs.avail_in == 0 && zs.avail_out != 0) {
      inflateEnd(&zs);
      OCTO_THROW(IOError, "'", path, "': bad gzip data (truncated stream)");
    }
  }
  inflateEnd(&zs);
  return out;
}

uint32_t big_endian_u32(const uint8_t* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}

std::string find_file(const std::string& root, const std::string& name) {
  for (const std::string& candidate : {root + "/" + name, root + "/" + name + ".gz"})
    if (fs::exists(candidate)) return candidate;
  OCTO_THROW(IOError, "'", root, "' has no ", name, " (nor ", name, ".gz)");
}

}  // namespace

Tensor read_idx(const std::string& path) {
  std::vector<uint8_t> bytes = read_file(path);
  OCTO_CHECK_IO(bytes.size() >= 4, "'", path, "': too short for an IDX header (", bytes.size(),
                " bytes)");
  OCTO_CHECK_IO(bytes[0] == 0 && bytes[1] == 0, "'", path, "': bad magic number ",
                big_endian_u32(bytes.data()), " (expected 2049 for labels or 2051 for images)");
  OCTO_CHECK_IO(bytes[2] == 0x08, "'", path, "': unsupported IDX element type 0x", std::hex,
                int(bytes[2]), std::dec, " (only unsigned bytes, 0x08, are supported)");
  int ndim = bytes[3];
  OCTO_CHECK_IO(ndim >= 1 && ndim <= 4, "'", path, "': bad magic number ",
                big_endian_u32(bytes.data()), " (", ndim,
                " dimensions; expected 2049 for labels or 2051 for images)");
  size_t header = 4 + 4 * static_cast<size_t>(ndim);
  OCTO_CHECK_IO(bytes.size() >= header, "'", path, "': truncated header (", bytes.size(),
                " bytes, ", header, " needed for ", ndim, " dimensions)");
  Shape dims;
  uint64_t count = 1;
  for (int d = 0; d < ndim; ++d) {
    uint32_t n = big_endian_u32(bytes.data() + 4 + 4 * d);
    OCTO_CHECK_IO(n > 0 && n < (1u << 31), "'", path, "': dimension ", d, " is ", n);
    dims.push_back(static_cast<int64_t>(n));
    OCTO_CHECK_IO(!__builtin_mul_overflow(count, uint64_t(n), &count), "'", path, "': dimensions ",
                  dims, " overflow");
  }
  uint64_t payload = bytes.size() - header;
  OCTO_CHECK_IO(payload == count, "'", path, "': ", payload < count ? "truncated" : "too long",
                ": the header says ", dims, " = ", count, " bytes of data but the file has ",
                payload);
  Tensor t = detail::make_empty(dims, kUInt8, kCPU);
  std::memcpy(t.raw_data(), bytes.data() + header, count);
  return t;
}

void write_idx(const std::string& path, const Tensor& data) {
  OCTO_CHECK_VALUE(data.dtype() == kUInt8, "write_idx: expected uint8 data, got ", data.dtype());
  OCTO_CHECK_VALUE(data.dim() >= 1 && data.dim() <= 4, "write_idx: expected 1 to 4 dims, got ",
                   data.dim());
  std::vector<uint8_t> bytes = {0, 0, 0x08, static_cast<uint8_t>(data.dim())};
  for (int64_t s : data.sizes())
    for (int shift : {24, 16, 8, 0}) bytes.push_back(static_cast<uint8_t>(uint64_t(s) >> shift));
  auto values = data.contiguous().to_vector<uint8_t>();
  bytes.insert(bytes.end(), values.begin(), values.end());
  bool gz = path.size() >= 3 && path.substr(path.size() - 3) == ".gz";
  if (gz) {
    gzFile f = gzopen(path.c_str(), "wb");
    OCTO_CHECK_IO(f != nullptr, "cannot write '", path, "'");
    int n = gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
    gzclose(f);
    OCTO_CHECK_IO(n == static_cast<int>(bytes.size()), "cannot write '", path, "'");
  } else {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
    OCTO_CHECK_IO(out.good(), "cannot write '", path, "'");
  }
}

namespace {
std::tuple<Tensor, Tensor, std::string> load_mnist(const std::string& root, bool train) {
  std::string prefix = train ? "train" : "t10k";
  std::string images_path = find_file(root, prefix + "-images-idx3-ubyte");
  std::string labels_path = find_file(root, prefix + "-labels-idx1-ubyte");
  Tensor images = read_idx(images_path);
  Tensor labels = read_idx(labels_path);
  OCTO_CHECK_IO(images.dim() == 3, "'", images_path,
                "': expected image data with 3 dimensions [N, rows, cols] (magic 2051), got ",
                images.dim(), " dimensions");
  OCTO_CHECK_IO(labels.dim() == 1, "'", labels_path,
                "': expected labels with 1 dimension [N] (magic 2049), got ", labels.dim(),
                " dimensions");
  OCTO_CHECK_IO(images.size(0) == labels.size(0), "'", images_path, "' has ", images.size(0),
                " images but '", labels_path, "' has ", labels.size(0), " labels");
  NoGradGuard no_grad;
  return {images.unsqueeze(1), labels.to(kInt64), images_path};
}
}  // namespace

MNIST::MNIST(const std::string& root, bool train) : MNIST(load_mnist(root, train)) {}

MNIST::MNIST(std::tuple<Tensor, Tensor, std::string> loaded)
    : TensorDataset(std::move(std::get<0>(loaded)), std::move(std::get<1>(loaded))),
      images_path_(std::move(std::get<2>(loaded))) {}

CIFAR10::CIFAR10(const std::string& root, bool train)
    : TensorDataset(octo::zeros({0, 3, 32, 32}, {.dtype = kUInt8}),
                    octo::zeros({0}, {.dtype = kInt64})) {
  std::vector<std::string> files;
  if (train) {
    for (int i = 1; i <= 5; ++i)
      files.push_back(root + "/data_batch_" + std::to_string(i) + ".bin");
  } else {
    files.push_back(root + "/test_batch.bin");
  }
  std::vector<uint8_t> labels;
  std::vector<uint8_t> pixels;
  for (const std::string& f : files) {
    std::vector<uint8_t> bytes = read_file(f);
    OCTO_CHECK_IO(
        !bytes.empty() && bytes.size() % kRecordBytes == 0, "'", f, "': size ", bytes.size(),
        " is not a whole number of ", kRecordBytes,
        "-byte CIFAR-10 records (1 label byte + 3072 pixel bytes); truncated or not CIFAR-10 binary");
    size_t n = bytes.size() / kRecordBytes;
    for (size_t r = 0; r < n; ++r) {
      const uint8_t* rec = bytes.data() + r * kRecordBytes;
      OCTO_CHECK_IO(rec[0] < 10, "'", f, "': record ", r, " has label ", int(rec[0]),
                    "; CIFAR-10 labels are 0..9");
      labels.push_back(rec[0]);
      pixels.insert(pixels.end(), rec + 1, rec + kRecordBytes);
    }
  }
  auto n = static_cast<int64_t>(labels.size());
  data_ = from_vector(pixels, {n, 3, 32, 32});
  std::vector<int64_t> targets(labels.begin(), labels.end());
  targets_ = from_vector(targets, {n});
}

}  // namespace octo::data
