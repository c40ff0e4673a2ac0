// data/: IDX and CIFAR-10 readers on generated files and every corruption; samplers; DataLoader.
#include <catch2/catch.hpp>

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include <octo/octo.h>

namespace fs = std::filesystem;
using octo::Tensor;
using namespace octo::data;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() /
           ("octo_data_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter()++));
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
  static int& counter() {
    static int c = 0;
    return c;
  }
};

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

/// A small MNIST-format directory: n images of 28x28 with pixel (i + r + c) % 256, labels i % 10.
void write_mnist(const TempDir& dir, const std::string& prefix, int64_t n, bool gz) {
  std::vector<uint8_t> pixels, labels;
  for (int64_t i = 0; i < n; ++i) {
    labels.push_back(static_cast<uint8_t>(i % 10));
    for (int r = 0; r < 28; ++r)
      for (int c = 0; c < 28; ++c) pixels.push_back(static_cast<uint8_t>((i + r + c) % 256));
  }
  std::string ext = gz ? ".gz" : "";
  write_idx(dir / (prefix + "-images-idx3-ubyte" + ext), octo::from_vector(pixels, {n, 28, 28}));
  write_idx(dir / (prefix + "-labels-idx1-ubyte" + ext), octo::from_vector(labels, {n}));
}

}  // namespace

TEST_CASE("IDX files round-trip, raw and gzip") {
  TempDir dir;
  write_mnist(dir, "train", 5, false);
  write_mnist(dir, "t10k", 3, true);
  MNIST train(dir.path.string(), true);
  REQUIRE(train.size() == 5);
  CHECK(train.data().sizes() == octo::Shape{5, 1, 28, 28});
  CHECK(train.data().dtype() == octo::kUInt8);
  CHECK(train.targets().dtype() == octo::kInt64);
  CHECK(train.targets().to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2, 3, 4});
  Example e = train.get(2);
  CHECK(e.data.contiguous().to_vector<uint8_t>()[28 + 3] == (2 + 1 + 3));
  MNIST test(dir.path.string(), false);
  CHECK(test.size() == 3);
  CHECK_THAT(test.images_path(), Catch::EndsWith(".gz"));
  auto raw = read_bytes(dir / "train-labels-idx1-ubyte");
  CHECK(raw[3] == 1);
  CHECK(raw[2] == 0x08);
  CHECK((raw[7] == 5 && raw.size() == 8 + 5));  // big-endian count, then the bytes
}

TEST_CASE("every corruption of an IDX file is reported with the file and the problem") {
  TempDir dir;
  write_mnist(dir, "train", 4, false);
  std::string images = dir / "train-images-idx3-ubyte";
  std::string labels = dir / "train-labels-idx1-ubyte";
  auto good = read_bytes(images);
  auto expect = [&](const std::vector<uint8_t>& bytes, const std::string& fragment) {
    write_bytes(images, bytes);
    CHECK_THROWS_AS(MNIST(dir.path.string(), true), octo::IOError);
    CHECK_THROWS_WITH(MNIST(dir.path.string(), true),
                      Catch::Contains(fragment) && Catch::Contains("train-images-idx3-ubyte"));
  };
  auto bad_magic = good;
  bad_magic[0] = 0x12;
  expect(bad_magic, "bad magic number");
  auto wrong_dims = good;
  wrong_dims[3] = 2;  // says [N, 28] -> the data no longer matches
  expect(wrong_dims, "too long");
  auto truncated = std::vector<uint8_t>(good.begin(), good.end() - 100);
  expect(truncated,
         "truncated: the header says [4, 28, 28] = 3136 bytes of data but the file has 3036");
  expect(std::vector<uint8_t>(good.begin(), good.begin() + 10), "truncated header");
  expect({}, "too short for an IDX header");
  // A label file of a different length.
  write_bytes(images, good);
  write_idx(labels, octo::from_vector(std::vector<uint8_t>{1, 2, 3}, {3}));
  CHECK_THROWS_WITH(MNIST(dir.path.string(), true),
                    Catch::Contains("has 4 images but") && Catch::Contains("has 3 labels"));
  // Labels and images swapped: dimensions do not fit their role.
  write_idx(labels, octo::zeros({4, 2}, {.dtype = octo::kUInt8}));
  CHECK_THROWS_WITH(MNIST(dir.path.string(), true),
                    Catch::Contains("expected labels with 1 dimension"));
  // Missing files.
  CHECK_THROWS_WITH(MNIST(dir.path.string(), false),
                    Catch::Contains("has no t10k-images-idx3-ubyte"));
}

TEST_CASE("a bad or truncated gzip stream is reported") {
  TempDir dir;
  write_mnist(dir, "train", 4, true);
  std::string images = dir / "train-images-idx3-ubyte.gz";
  auto gz = read_bytes(images);
  write_bytes(images,
              std::vector<uint8_t>(gz.begin(), gz.begin() + static_cast<int64_t>(gz.size() / 2)));
  CHECK_THROWS_WITH(MNIST(dir.path.string(), true), Catch::Contains("bad gzip data"));
  auto corrupt = gz;
  for (size_t i = 20; i < 40 && i < corrupt.size(); ++i) corrupt[i] ^= 0x5a;
  write_bytes(images, corrupt);
  CHECK_THROWS_WITH(MNIST(dir.path.string(), true), Catch::Contains("bad gzip data"));
  write_bytes(images, {1, 2, 3, 4});
  CHECK_THROWS_WITH(MNIST(dir.path.string(), true),
                    Catch::Contains("is named .gz but is not a gzip file"));
}

TEST_CASE("CIFAR-10 binary batches load and corruptions are reported") {
  TempDir dir;
  std::vector<uint8_t> record(CIFAR10::kRecordBytes);
  for (int b = 1; b <= 5; ++b) {
    std::vector<uint8_t> bytes;
    for (int r = 0; r < 2; ++r) {
      record[0] = static_cast<uint8_t>((b + r) % 10);
      for (int64_t k = 1; k < CIFAR10::kRecordBytes; ++k)
        record[k] = static_cast<uint8_t>((k + b) % 251);
      bytes.insert(bytes.end(), record.begin(), record.end());
    }
    write_bytes(dir / ("data_batch_" + std::to_string(b) + ".bin"), bytes);
  }
  write_bytes(dir / "test_batch.bin", record);
  CIFAR10 train(dir.path.string(), true);
  CHECK(train.size() == 10);
  CHECK(train.data().sizes() == octo::Shape{10, 3, 32, 32});
  CHECK(train.targets().to_vector<int64_t>()[3] == 3);  // batch 2, record 1
  // Channel-major: byte 1 + 1024 is the first green pixel.
  CHECK(train.data()[0][1][0][0].item<uint8_t>() == (1 + 1024 + 1) % 251);
  CHECK(CIFAR10(dir.path.string(), false).size() == 1);
  const auto good3 = read_bytes(dir / "data_batch_3.bin");
  auto bytes = good3;
  write_bytes(dir / "data_batch_3.bin", std::vector<uint8_t>(bytes.begin(), bytes.end() - 7));
  CHECK_THROWS_WITH(
      CIFAR10(dir.path.string(), true),
      Catch::Contains("data_batch_3.bin") && Catch::Contains("not a whole number of 3073-byte"));
  bytes[CIFAR10::kRecordBytes] = 42;  // second record's label
  write_bytes(dir / "data_batch_3.bin", bytes);
  CHECK_THROWS_WITH(CIFAR10(dir.path.string(), true), Catch::Contains("record 1 has label 42"));
  write_bytes(dir / "data_batch_3.bin", good3);
  fs::remove(dir / "data_batch_5.bin");
  CHECK_THROWS_WITH(CIFAR10(dir.path.string(), true), Catch::Contains("data_batch_5.bin"));
}

TEST_CASE("the real Fashion-MNIST test set loads when installed") {
  std::string root = "/usr/share/datasets/fashion-mnist";
  if (!fs::exists(root + "/t10k-images-idx3-ubyte.gz")) {
    WARN("Debian's dataset-fashion-mnist is not installed; skipping");
    return;
  }
  MNIST test(root, false);
  CHECK(test.size() == 10000);
  auto counts = std::vector<int64_t>(10, 0);
  for (int64_t t : test.targets().to_vector<int64_t>()) counts.at(static_cast<size_t>(t))++;
  for (int64_t c : counts) CHECK(c == 1000);  // Fashion-MNIST's test set is balanced
}

TEST_CASE("DataLoader visits every sample once per epoch, reproducibly by seed") {
  auto ds = std::make_shared<TensorDataset>(octo::arange(10).view({10, 1}), octo::arange(10));
  auto epoch_order = [&](DataLoader& loader) {
    std::vector<int64_t> seen;
    for (const Example& b : loader)
      for (int64_t v : b.target.to_vector<int64_t>()) seen.push_back(v);
    return seen;
  };
  DataLoader a(ds, {.batch_size = 3, .shuffle = true, .seed = 11});
  CHECK(a.size() == 4);
  auto e0 = epoch_order(a);
  CHECK(std::set<int64_t>(e0.begin(), e0.end()).size() == 10);
  CHECK(e0.size() == 10);
  a.set_epoch(1);
  auto e1 = epoch_order(a);
  CHECK(e1 != e0);
  DataLoader b(ds, {.batch_size = 3, .shuffle = true, .num_workers = 2, .seed = 11});
  CHECK(epoch_order(b) == e0);  // workers do not change the order
  b.set_epoch(1);
  CHECK(epoch_order(b) == e1);
  DataLoader c(ds, {.batch_size = 3, .shuffle = true, .seed = 12});
  CHECK(epoch_order(c) != e0);
  DataLoader seq(ds, {.batch_size = 4, .drop_last = true});
  CHECK(seq.size() == 2);
  CHECK(epoch_order(seq) == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7});
  CHECK_THROWS_AS(DataLoader(ds, {.batch_size = 0}), octo::ValueError);
}

TEST_CASE("transforms run per batch with reproducible randomness, errors reach the caller") {
  auto ds = std::make_shared<TensorDataset>(octo::rand({8, 1, 4, 4}), octo::arange(8));
  auto flip_all = [](Example b, octo::Generator& g) {
    b.data = random_horizontal_flip(b.data, 0.5, g);
    return b;
  };
  DataLoader a(ds, {.batch_size = 4, .num_workers = 0, .seed = 3, .transform = flip_all});
  DataLoader b(ds, {.batch_size = 4, .num_workers = 2, .seed = 3, .transform = flip_all});
  auto ia = a.begin();
  auto ib = b.begin();
  CHECK(ia->data.to_vector<float>() == ib->data.to_vector<float>());
  auto failing = [](Example, octo::Generator&) -> Example {
    throw std::runtime_error("bad batch");
  };
  DataLoader f(ds, {.batch_size = 4, .num_workers = 2, .transform = failing});
  CHECK_THROWS_WITH(f.begin(), Catch::Contains("bad batch"));
}

TEST_CASE("DistributedSampler partitions the data across ranks") {
  std::set<size_t> all;
  size_t per_rank = 0;
  for (size_t r = 0; r < 3; ++r) {
    DistributedSampler s(3, r, /*shuffle=*/true, /*seed=*/5);
    s.set_epoch(2);
    auto idx = s.indices(10);
    per_rank = idx.size();
    all.insert(idx.begin(), idx.end());
  }
  CHECK(per_rank == 4);     // ceil(10 / 3), padded
  CHECK(all.size() == 10);  // together they cover everything
  DistributedSampler d0(3, 0, false, 0, /*drop_last=*/true), d1(3, 1, false, 0, true);
  CHECK(d0.indices(10) == std::vector<size_t>{0, 3, 6});
  CHECK(d1.indices(10) == std::vector<size_t>{1, 4, 7});
  CHECK_THROWS_AS(DistributedSampler(2, 2), octo::ValueError);
}

TEST_CASE("image transforms") {
  Tensor img = octo::arange(0.0, 16.0).view({1, 1, 4, 4});
  octo::Generator g(1);
  Tensor f = random_horizontal_flip(img, 1.0, g);
  CHECK(f.contiguous().to_vector<float>()[0] == 3.0f);
  Tensor same = random_horizontal_flip(img, 0.0, g);
  CHECK(same.to_vector<float>() == img.to_vector<float>());
  Tensor crop = random_crop(img, 4, 2, g);
  CHECK(crop.sizes() == octo::Shape{1, 1, 4, 4});
  Tensor centered = random_crop(img, 4, 0, g);
  CHECK(centered.to_vector<float>() == img.to_vector<float>());
  Tensor u8 = octo::full({1, 3, 2, 2}, 255, {.dtype = octo::kUInt8});
  Tensor x = to_float(u8);
  CHECK(x.dtype() == octo::kFloat32);
  CHECK(x.to_vector<float>()[0] == 1.0f);
  Tensor n = normalize(x, {0.5, 0.5, 0.5}, {0.25, 0.5, 1.0});
  CHECK(n[0][0][0][0].item<float>() == Approx(2.0));
  CHECK(n[0][2][0][0].item<float>() == Approx(0.5));
  CHECK_THROWS_AS(normalize(x, {0.5}, {0.5}), octo::ValueError);
  // One channel takes the scalar path: the same (x - mean) / std, over [N, 1, H, W] and [1, H, W].
  Tensor gray = to_float(octo::from_vector<uint8_t>({0, 51, 255, 102}, {2, 1, 1, 2}));
  const std::vector<float> normed = normalize(gray, {0.5}, {0.25}).to_vector<float>();
  const std::vector<double> want = {-2.0, -1.2, 2.0, -0.4};
  REQUIRE(normed.size() == want.size());
  for (size_t i = 0; i < normed.size(); ++i) CHECK(normed[i] == Approx(want[i]));
  CHECK(normalize(gray[1], {0.5}, {0.25}).sizes() == octo::Shape{1, 1, 2});
}

namespace {
/// The composite normalize was before Note [One-pass normalize]: (x / 255 - mean) / std.
Tensor composite_normalize(const Tensor& x, const std::vector<double>& mean,
                           const std::vector<double>& std) {
  const int64_t c = static_cast<int64_t>(mean.size());
  std::vector<double> inv;
  for (double s : std) inv.push_back(1.0 / s);
  return (to_float(x) - octo::tensor(mean, {c, 1, 1})) * octo::tensor(inv, {c, 1, 1});
}

void check_close(const Tensor& got, const Tensor& want) {
  REQUIRE(got.sizes() == want.sizes());
  REQUIRE(got.dtype() == octo::kFloat32);
  const std::vector<float> g = got.contiguous().to_vector<float>();
  const std::vector<float> w = want.contiguous().to_vector<float>();
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::fabs(g[i] - w[i]) > 4e-7f * std::max(1.0f, std::fabs(w[i]))) {  // a few float ulps
      FAIL_CHECK("element " << i << ": got " << g[i] << ", want " << w[i]);
      return;
    }
  }
  SUCCEED();
}
}  // namespace

TEST_CASE("normalize reads uint8 batches in one pass, as the composite would") {
  octo::manual_seed(3);
  Tensor bytes = octo::randint(0, 256, {4, 3, 5, 6}).to(octo::kUInt8);
  const std::vector<double> mean = {0.4914, 0.4822, 0.4465}, std = {0.2470, 0.2435, 0.2616};
  SECTION("[N, C, H, W] and [C, H, W], three channels and one") {
    check_close(normalize(bytes, mean, std), composite_normalize(bytes, mean, std));
    check_close(normalize(bytes[2], mean, std), composite_normalize(bytes[2], mean, std));
    Tensor gray = bytes.select(1, 0).unsqueeze(1);  // [4, 1, 5, 6], not contiguous
    check_close(normalize(gray, {0.2860}, {0.3530}), composite_normalize(gray, {0.2860}, {0.3530}));
  }
  SECTION("non-contiguous batches (a channels-last view, a strided slice)") {
    Tensor nhwc = bytes.permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2});
    REQUIRE_FALSE(nhwc.is_contiguous());
    check_close(normalize(nhwc, mean, std), composite_normalize(nhwc, mean, std));
    Tensor every_other = bytes.slice(3, 0, 6, 2);
    check_close(normalize(every_other, mean, std), composite_normalize(every_other, mean, std));
  }
  SECTION("float batches give the same values, as a new tensor") {
    Tensor x = to_float(bytes);
    const std::vector<float> before = x.to_vector<float>();
    check_close(normalize(x, mean, std), composite_normalize(bytes, mean, std));
    CHECK(x.to_vector<float>() == before);
  }
  SECTION("a float batch that requires grad keeps a differentiable graph") {
    Tensor x = to_float(bytes[0]).requires_grad_();
    Tensor y = normalize(x, mean, std);
    REQUIRE(y.requires_grad());
    y.sum().backward();
    const std::vector<float> grad = x.grad().to_vector<float>();
    const int64_t plane = 5 * 6;
    for (int64_t ch = 0; ch < 3; ++ch) CHECK(grad[ch * plane] == Approx(1.0 / std[ch]));
  }
  SECTION("empty batches and bad dtypes") {
    Tensor none = octo::empty({0, 3, 5, 6}, {.dtype = octo::kUInt8});
    CHECK(normalize(none, mean, std).sizes() == octo::Shape{0, 3, 5, 6});
    Tensor ints = bytes.to(octo::kInt64);
    CHECK_THROWS_WITH(normalize(ints, mean, std),
                      Catch::Contains("expected uint8 or floating-point images, got int64"));
  }
}

namespace {
/// Example 5 cannot be read (as a truncated file on a network disk would fail).
struct FailingDataset : Dataset {
  size_t size() const override { return 16; }
  Example get(size_t index) const override {
    if (index == 5) throw octo::IOError("example 5: read failed (simulated)");
    return {octo::full({2}, double(index)),
            octo::full({}, int64_t(index), {.dtype = octo::kInt64})};
  }
};
}  // namespace

TEST_CASE("a failure while preparing a batch reaches the caller with its origin and type") {
  for (size_t workers : {size_t(0), size_t(2)}) {
    INFO(workers << " workers");
    DataLoader loader(std::make_shared<FailingDataset>(),
                      {.batch_size = 4, .num_workers = workers});
    std::string msg;
    size_t batches = 0;
    try {
      for (const auto& batch : loader) {
        (void)batch;
        ++batches;
      }
    } catch (const octo::IOError& e) {
      msg = e.msg();
    }
    CHECK(batches == 1);  // batch 0 arrived; batch 1 holds example 5
    CHECK_THAT(msg, Catch::Contains("DataLoader: batch 1 of epoch 0") &&
                        Catch::Contains("example 5: read failed (simulated)") &&
                        Catch::Contains(workers ? "worker thread" : "calling thread"));
  }
}
