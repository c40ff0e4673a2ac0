// Safetensors checkpoints: round trips, spec-built fixtures, hostile files and atomic saves.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include <octo/octo.h>

namespace fs = std::filesystem;
using octo::Device;
using octo::Tensor;

namespace {

/// A fresh directory under the system temp dir, removed with everything in it at scope exit.
struct TempDir {
  fs::path path;
  TempDir() {
    std::random_device rd;
    path = fs::temp_directory_path() /
           ("octo_safetensors_" + std::to_string(::getpid()) + "_" + std::to_string(rd()));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
  std::vector<std::string> listing() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(path)) names.push_back(e.path().filename());
    std::sort(names.begin(), names.end());
    return names;
  }
};

/// Resets the write-fault hook even when a CHECK fails.
struct FaultGuard {
  explicit FaultGuard(int64_t n) { octo::detail::set_safetensors_write_fault(n); }
  ~FaultGuard() { octo::detail::set_safetensors_write_fault(-1); }
};

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}
void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string u64_le(uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return s;
}

/// A file as the spec describes it: u64 LE header length, the header (padded with spaces to a
/// multiple of 8 unless pad is false), then the data buffer.
std::string st_file(std::string header, const std::string& data, bool pad = true) {
  if (pad)
    while (header.size() % 8) header += ' ';
  return u64_le(header.size()) + header + data;
}

/// The tensor's elements as bytes (row-major, host order), independent of its strides/device.
std::string bytes_of(const Tensor& t) {
  Tensor h = t.to(octo::kCPU).contiguous();
  return std::string(static_cast<const char*>(h.raw_data()), h.nbytes());
}

std::vector<double> values_of(const Tensor& t) { return t.to(octo::kFloat64).to_vector<double>(); }

const Tensor& find(const octo::SafetensorsFile& f, const std::string& name) {
  for (const auto& [n, t] : f.tensors)
    if (n == name) return t;
  FAIL("no tensor named " << name);
  throw;  // unreachable
}

/// Loading `bytes` must throw IOError whose message names the file and contains `fragment`.
void check_rejected(const TempDir& dir, const std::string& bytes, const std::string& fragment) {
  std::string path = dir.file("bad.safetensors");
  write_bytes(path, bytes);
  INFO("expecting: " << fragment);
  try {
    octo::load_safetensors(path);
    FAIL("load_safetensors accepted a malformed file");
  } catch (const octo::IOError& e) {
    std::string msg = e.what();
    INFO("message: " << msg);
    CHECK(msg.find(fragment) != std::string::npos);
    CHECK(msg.find(path) != std::string::npos);
  }
}

/// One entry's JSON.
std::string entry(const std::string& dtype, const std::string& shape, const std::string& offsets) {
  return "{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":" + offsets + "}";
}

Tensor sample(octo::DType dt, const octo::Shape& shape, Device dev = octo::kCPU) {
  if (dt == octo::kBool) return octo::randint(0, 2, shape, {.device = dev}).to(octo::kBool);
  if (octo::is_floating(dt)) return (octo::randn(shape, {.device = dev}) * 100.0).to(dt);
  int64_t hi = dt == octo::kUInt8 ? 256 : 1'000'000;
  int64_t lo = dt == octo::kUInt8 ? 0 : -1'000'000;
  return octo::randint(lo, hi, shape, {.device = dev}).to(dt);
}

const octo::DType kAllDTypes[] = {octo::kFloat32, octo::kFloat64, octo::kFloat16, octo::kBFloat16,
                                  octo::kInt64,   octo::kInt32,   octo::kUInt8,   octo::kBool};

}  // namespace

TEST_CASE("safetensors: every dtype round-trips, including 0-d and empty tensors") {
  TempDir dir;
  octo::manual_seed(7);
  std::vector<std::pair<std::string, Tensor>> saved;
  for (octo::DType dt : kAllDTypes) {
    std::string n(octo::dtype_name(dt));
    saved.emplace_back(n + "_2x3", sample(dt, {2, 3}));
    saved.emplace_back(n + "_odd", sample(dt, {5, 1, 3}));
    saved.emplace_back(n + "_0d", sample(dt, {}));
    saved.emplace_back(n + "_empty", sample(dt, {0, 3}));
    saved.emplace_back(n + "_empty_mid", sample(dt, {2, 0, 4}));
  }
  std::string path = dir.file("all.safetensors");
  octo::save_safetensors(saved, path);
  auto loaded = octo::load_safetensors(path);
  REQUIRE(loaded.tensors.size() == saved.size());
  CHECK(loaded.metadata.empty());
  for (const auto& [name, t] : saved) {
    INFO(name);
    const Tensor& l = find(loaded, name);
    CHECK(l.dtype() == t.dtype());
    CHECK(l.sizes() == t.sizes());
    CHECK(l.device() == Device("cpu:0"));
    CHECK(l.strides() == octo::detail::contiguous_strides(l.sizes()));  // dense row-major
    CHECK(bytes_of(l) == bytes_of(t));
    CHECK(values_of(l) == values_of(t));
  }
  // The header length is padded to a multiple of 8, so the data buffer starts 8-aligned.
  std::string bytes = read_bytes(path);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(uint8_t(bytes[i])) << (8 * i);
  CHECK(n % 8 == 0);
  CHECK(bytes.find("__metadata__") == std::string::npos);  // no metadata => no key
}

TEST_CASE("safetensors: half-precision bit patterns survive (subnormals, inf, nan, -0)") {
  TempDir dir;
  Tensor f = octo::tensor({0.0, -0.0, 1e-7, 65504.0, 1.0 / 0.0, -1.0 / 0.0, 0.0 / 0.0, 3.14159});
  Tensor h = f.to(octo::kFloat16), b = f.to(octo::kBFloat16);
  std::string path = dir.file("half.safetensors");
  octo::save_safetensors({{"h", h}, {"b", b}}, path);
  auto loaded = octo::load_safetensors(path);
  CHECK(bytes_of(find(loaded, "h")) == bytes_of(h));
  CHECK(bytes_of(find(loaded, "b")) == bytes_of(b));
}

TEST_CASE("safetensors: non-contiguous and cpu:1 sources; loading onto cpu:1") {
  TempDir dir;
  octo::manual_seed(3);
  Tensor base = octo::randn({4, 6}, {.dtype = octo::kFloat64});
  Tensor transposed = base.t();                               // [6, 4], strides [1, 6]
  Tensor stepped = octo::arange(20).slice(0, 1, 20, 3);       // int64, stride 3, offset 1
  Tensor narrowed = base.narrow(1, 2, 3).to(octo::kFloat32);  // contiguous copy
  Tensor col = base.select(1, 5);                             // stride 6
  Tensor other = octo::randn({3, 2}, {.device = Device("cpu:1")});
  Tensor other_t = other.t();  // non-contiguous on cpu:1
  REQUIRE(!transposed.is_contiguous());
  REQUIRE(!stepped.is_contiguous());
  std::vector<std::pair<std::string, Tensor>> saved = {
      {"transposed", transposed}, {"stepped", stepped}, {"narrowed", narrowed}, {"col", col},
      {"other", other},           {"other_t", other_t}};
  std::string path = dir.file("views.safetensors");
  octo::save_safetensors(saved, path);

  for (Device dev : {Device("cpu:0"), Device("cpu:1")}) {
    auto loaded = octo::load_safetensors(path, dev);
    for (const auto& [name, t] : saved) {
      INFO(name << " on " << dev);
      const Tensor& l = find(loaded, name);
      CHECK(l.device() == dev);
      CHECK(l.sizes() == t.sizes());
      CHECK(values_of(l) == values_of(t));
    }
  }
  // Spot-check against the source storage directly: element [i, j] of base.t() is base[j, i].
  auto loaded = octo::load_safetensors(path);
  auto tv = find(loaded, "transposed").to_vector<double>();
  auto bv = base.to_vector<double>();
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 4; ++j) CHECK(tv[i * 4 + j] == bv[j * 6 + i]);
  CHECK(find(loaded, "stepped").to_vector<int64_t>() ==
        std::vector<int64_t>{1, 4, 7, 10, 13, 16, 19});
}

TEST_CASE("safetensors: metadata round-trips; load order is data-offset order") {
  TempDir dir;
  std::map<std::string, std::string> meta = {{"format", "pt"},
                                             {"epoch", "3"},
                                             {"note", "h\xC3\xA9llo \xE2\x9C\x93 \"quoted\"\n"},
                                             {"empty", ""}};
  std::vector<std::pair<std::string, Tensor>> saved = {
      {"u8", sample(octo::kUInt8, {3})},     {"f64", sample(octo::kFloat64, {2})},
      {"f32a", sample(octo::kFloat32, {1})}, {"i64", sample(octo::kInt64, {2})},
      {"f32b", sample(octo::kFloat32, {3})}, {"flag", sample(octo::kBool, {5})},
      {"h", sample(octo::kFloat16, {3})}};
  std::string path = dir.file("meta.safetensors");
  octo::save_safetensors(saved, path, meta);
  auto loaded = octo::load_safetensors(path);
  CHECK(loaded.metadata == meta);
  // Laid out by decreasing element size, stably: 8-byte, 4-byte, 2-byte, 1-byte tensors.
  std::vector<std::string> order;
  for (const auto& [n, t] : loaded.tensors) order.push_back(n);
  CHECK(order == std::vector<std::string>{"f64", "i64", "f32a", "f32b", "h", "u8", "flag"});

  // A file with no tensors at all, only metadata, is valid too.
  octo::save_safetensors({}, path, {{"k", "v"}});
  auto only_meta = octo::load_safetensors(path);
  CHECK(only_meta.tensors.empty());
  CHECK(only_meta.metadata == std::map<std::string, std::string>{{"k", "v"}});
}

TEST_CASE("safetensors: a fixture built from the spec loads, and octo writes the same bytes") {
  TempDir dir;
  // What the Python library writes for {"a": np.array([1.5, -2.25], float32)}: compact JSON
  // padded with spaces to a multiple of 8, then the little-endian float32 bytes.
  const std::string json = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::string data("\x00\x00\xC0\x3F\x00\x00\x10\xC0", 8);  // 1.5f = 0x3FC00000, -2.25f
  const std::string fixture = st_file(json, data);
  REQUIRE(fixture.size() == 8 + 56 + 8);  // 54 JSON bytes + 2 spaces of padding
  std::string path = dir.file("fixture.safetensors");
  write_bytes(path, fixture);
  auto loaded = octo::load_safetensors(path);
  REQUIRE(loaded.tensors.size() == 1);
  CHECK(loaded.tensors[0].first == "a");
  CHECK(loaded.tensors[0].second.dtype() == octo::kFloat32);
  CHECK(loaded.tensors[0].second.sizes() == octo::Shape{2});
  CHECK(loaded.tensors[0].second.to_vector<float>() == std::vector<float>{1.5f, -2.25f});

  std::string out = dir.file("octo.safetensors");
  octo::save_safetensors({{"a", octo::tensor({1.5, -2.25})}}, out);
  CHECK(read_bytes(out) == fixture);

  // An unpadded header (older writers) is valid too.
  write_bytes(path, st_file(json, data, /*pad=*/false));
  CHECK(octo::load_safetensors(path).tensors.size() == 1);
}

TEST_CASE("safetensors: a multi-dtype fixture built from the spec decodes to the right values") {
  TempDir dir;
  std::string header = "{\"__metadata__\":{\"format\":\"np\"},";
  header += "\"d\":" + entry("F64", "[1]", "[0,8]") + ",";
  header += "\"l\":" + entry("I64", "[1]", "[8,16]") + ",";
  header += "\"i\":" + entry("I32", "[2]", "[16,24]") + ",";
  header += "\"h\":" + entry("F16", "[1]", "[24,26]") + ",";
  header += "\"b\":" + entry("BF16", "[1]", "[26,28]") + ",";
  header += "\"u\":" + entry("U8", "[2]", "[28,30]") + ",";
  header += "\"t\":" + entry("BOOL", "[3]", "[30,33]") + ",";
  header += "\"s\":" + entry("F32", "[]", "[33,37]") + ",";
  header += "\"e\":" + entry("F32", "[0,2]", "[37,37]") + "}";
  std::string data;
  data += std::string("\x00\x00\x00\x00\x00\x00\xF0\x3F", 8);  // 1.0 (F64)
  data += std::string("\xFE\xFF\xFF\xFF\xFF\xFF\xFF\xFF", 8);  // -2 (I64)
  data += std::string("\x01\x00\x00\x00\xFF\xFF\xFF\xFF", 8);  // 1, -1 (I32)
  data += std::string("\x00\x3C", 2);                          // 1.0 (F16 0x3C00)
  data += std::string("\xC0\xBF", 2);                          // -1.5 (BF16 0xBFC0)
  data += std::string("\x07\xFF", 2);                          // 7, 255 (U8)
  data += std::string("\x00\x01\x02", 3);                      // false, true, true (BOOL)
  data += std::string("\x00\x00\x80\x40", 4);                  // 4.0 (F32, 0-d)
  std::string path = dir.file("multi.safetensors");
  write_bytes(path, st_file(header, data));
  auto f = octo::load_safetensors(path);
  CHECK(f.metadata == std::map<std::string, std::string>{{"format", "np"}});
  CHECK(find(f, "d").to_vector<double>() == std::vector<double>{1.0});
  CHECK(find(f, "l").to_vector<int64_t>() == std::vector<int64_t>{-2});
  CHECK(find(f, "i").to_vector<int32_t>() == std::vector<int32_t>{1, -1});
  CHECK(values_of(find(f, "h")) == std::vector<double>{1.0});
  CHECK(values_of(find(f, "b")) == std::vector<double>{-1.5});
  CHECK(find(f, "u").to_vector<uint8_t>() == std::vector<uint8_t>{7, 255});
  CHECK(find(f, "t").to_vector<bool>() == std::vector<bool>{false, true, true});
  CHECK(find(f, "t").to(octo::kUInt8).to_vector<uint8_t>() == std::vector<uint8_t>{0, 1, 1});
  CHECK(find(f, "s").dim() == 0);
  CHECK(find(f, "s").item<float>() == 4.0f);
  CHECK(find(f, "e").sizes() == octo::Shape{0, 2});
  std::vector<std::string> order;
  for (const auto& [n, t] : f.tensors) order.push_back(n);
  CHECK(order == std::vector<std::string>{"d", "l", "i", "h", "b", "u", "t", "s", "e"});
}

TEST_CASE("safetensors: truncated files and bad header lengths are rejected") {
  TempDir dir;
  check_rejected(dir, "", "0 bytes long, shorter than the 8-byte header length");
  check_rejected(dir, "abc", "3 bytes long");
  check_rejected(dir, u64_le(100) + "{}",
                 "header length 100 runs past the end of the file (10 bytes)");
  check_rejected(dir, u64_le(200'000'000) + "{}", "over the 100000000-byte limit");
  check_rejected(dir, u64_le(~uint64_t{0}) + "{}", "over the 100000000-byte limit");
  check_rejected(dir, u64_le(100'000'001), "over the 100000000-byte limit");
  // The largest allowed length is still checked against the file size before anything is read.
  check_rejected(dir, u64_le(100'000'000) + "{}", "runs past the end of the file");

  std::string missing = dir.file("does_not_exist.safetensors");
  CHECK_THROWS_AS(octo::load_safetensors(missing), octo::IOError);
  CHECK_THROWS_WITH(octo::load_safetensors(missing), Catch::Contains(missing));
  CHECK_THROWS_AS(octo::load_safetensors(dir.path.string()), octo::IOError);  // a directory
}

TEST_CASE("safetensors: malformed JSON headers are rejected") {
  TempDir dir;
  const std::string a4 = "{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}";
  const std::string four(4, '\0');
  check_rejected(dir, st_file("{\"a\":", ""),
                 "the header is not valid JSON: [json.exception.parse_error");
  check_rejected(dir, st_file("{\"a\":1,}", ""), "not valid JSON");
  check_rejected(dir, st_file("{\"a\xFF\":" + a4 + "}", four), "not valid JSON");  // bad UTF-8
  check_rejected(dir, st_file("[1,2]", ""), "the header is not a JSON object (found array)");
  check_rejected(dir, st_file("\"hello\"", ""), "not a JSON object (found string)");
  check_rejected(dir, st_file("{\"a\":" + a4 + ",\"a\":" + a4 + "}", four + four),
                 "duplicate key 'a' in the header");
  check_rejected(
      dir,
      st_file("{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
              four),
      "duplicate key 'dtype'");
  check_rejected(dir, st_file("{\"a\":" + entry("F32", "[[1]]", "[0,4]") + "}", four),
                 "nests deeper");
  // A nesting bomb is refused without recursing or building the nested values.
  std::string bomb = "{\"a\":{\"dtype\":\"F32\",\"shape\":" + std::string(200000, '[') +
                     std::string(200000, ']') + ",\"data_offsets\":[0,0]}}";
  check_rejected(dir, st_file(bomb, ""), "nests deeper");
}

TEST_CASE("safetensors: entries with missing fields, wrong types or bad values are rejected") {
  TempDir dir;
  const std::string four(4, '\0');
  auto one = [&](const std::string& e, const std::string& data, const std::string& fragment) {
    check_rejected(dir, st_file("{\"w\":" + e + "}", data), fragment);
  };
  one("5", "", "tensor 'w': expected an object with dtype, shape and data_offsets, got number");
  one("{\"shape\":[1],\"data_offsets\":[0,4]}", four, "tensor 'w' is missing \"dtype\"");
  one("{\"dtype\":\"F32\",\"data_offsets\":[0,4]}", four, "tensor 'w' is missing \"shape\"");
  one("{\"dtype\":\"F32\",\"shape\":[1]}", four, "tensor 'w' is missing \"data_offsets\"");
  one(entry("F32", "[1]", "[0,4]").replace(9, 5, "32"), four,
      "\"dtype\" must be a string, got number");
  one(entry("F32", "\"1\"", "[0,4]"), four, "\"shape\" must be a list of integers, got string");
  one(entry("F32", "[1,\"2\"]", "[0,4]"), four,
      "\"shape\" must be a list of integers, found string");
  one(entry("F32", "[null]", "[0,4]"), four, "must be a list of integers, found null");
  one(entry("F128", "[1]", "[0,4]"), four, "tensor 'w' has unknown dtype 'F128'");
  one(entry("f32", "[1]", "[0,4]"), four, "unknown dtype 'f32'");
  for (const char* u : {"I8", "I16", "U16", "U32", "U64", "F8_E4M3", "F8_E5M2"})
    one(entry(u, "[1]", "[0,4]"), four,
        std::string("tensor 'w' has unsupported dtype '") + u + "'");
  one(entry("F32", "[-2]", "[0,4]"), four, "negative dimension -2");
  one(entry("F32", "[2.5]", "[0,4]"), four, "non-integer dimension 2.5");
  one(entry("F32", "[1.0]", "[0,4]"), four, "non-integer dimension");
  one(entry("F32", "[1]", "\"0-4\""), four, "\"data_offsets\" must be [begin, end]");
  one(entry("F32", "[1]", "[4]"), four, "\"data_offsets\" must be [begin, end]");
  one(entry("F32", "[1]", "[0,4,8]"), four, "\"data_offsets\" must be [begin, end]");
  one(entry("F32", "[1]", "[-4,0]"), four, "\"data_offsets\" must be [begin, end]");
  one(entry("F32", "[1]", "[0.0,4]"), four, "\"data_offsets\" must be [begin, end]");
  one(entry("F32", "[1]", "[4,0]"), four, "data_offsets [4, 0] has begin > end");
  one(entry("F32", "[3]", "[0,4]"), four,
      "data_offsets [0, 4] hold 4 bytes but shape [3] of dtype F32 needs 12 bytes");
  one(entry("F32", "[2]", "[0,8]"), four,
      "data_offsets [0, 8] run past the end of the data buffer (4 bytes)");
  one(entry("F64", "[2]", "[0,16]"), "", "run past the end of the data buffer (0 bytes)");
}

TEST_CASE("safetensors: sizes that overflow 64-bit arithmetic are rejected") {
  TempDir dir;
  auto one = [&](const std::string& dtype, const std::string& shape, const std::string& offsets) {
    check_rejected(dir, st_file("{\"w\":" + entry(dtype, shape, offsets) + "}", ""), "too large");
  };
  one("F32", "[4294967296,4294967296]", "[0,0]");    // numel = 2^64 wraps to 0
  one("F64", "[2305843009213693952]", "[0,0]");      // 2^61 * 8 bytes = 2^64 wraps to 0
  one("U8", "[9223372036854775808]", "[0,0]");       // a dim above INT64_MAX
  one("U8", "[18446744073709551615]", "[0,0]");      // UINT64_MAX
  one("F32", "[0,4294967296,4294967296]", "[0,0]");  // numel 0, but strides overflow
  one("BOOL", "[65536,65536,65536,65536,0]", "[0,0]");
  // Offsets near UINT64_MAX do not wrap either.
  check_rejected(
      dir,
      st_file("{\"w\":" + entry("U8", "[1]", "[18446744073709551615,18446744073709551615]") + "}",
              ""),
      "needs 1 bytes");
}

TEST_CASE("safetensors: the tensors must tile the data buffer exactly") {
  TempDir dir;
  auto two = [&](const std::string& a, const std::string& b, size_t nbytes,
                 const std::string& fragment) {
    check_rejected(dir, st_file("{\"a\":" + a + ",\"b\":" + b + "}", std::string(nbytes, '\0')),
                   fragment);
  };
  two(entry("F32", "[2]", "[0,8]"), entry("F32", "[1]", "[4,8]"), 8,
      "tensors 'a' and 'b' overlap: data_offsets [0, 8] and [4, 8]");
  two(entry("F32", "[2]", "[0,8]"), entry("F32", "[2]", "[0,8]"), 8, "overlap");
  two(entry("F32", "[2]", "[0,8]"), entry("F32", "[0]", "[4,4]"), 8, "overlap");  // empty inside
  two(entry("F32", "[1]", "[0,4]"), entry("F32", "[1]", "[8,12]"), 12,
      "bytes [4, 8) of the data buffer belong to no tensor");
  two(entry("F32", "[1]", "[4,8]"), entry("F32", "[0]", "[4,4]"), 8,
      "bytes [0, 4) of the data buffer belong to no tensor");
  two(entry("F32", "[1]", "[0,4]"), entry("F32", "[1]", "[4,8]"), 9,
      "the data buffer has 9 bytes but the tensors cover only 8 (unused trailing bytes");
  check_rejected(dir, st_file("{}", "x"), "cover only 0");
  // Empty tensors at the boundaries are fine.
  std::string path = dir.file("ok.safetensors");
  write_bytes(path, st_file("{\"a\":" + entry("F32", "[1]", "[0,4]") +
                                ",\"b\":" + entry("F32", "[0]", "[4,4]") +
                                ",\"c\":" + entry("U8", "[0,5]", "[0,0]") + "}",
                            std::string(4, '\0')));
  auto f = octo::load_safetensors(path);
  CHECK(f.tensors.size() == 3);
  CHECK(find(f, "c").sizes() == octo::Shape{0, 5});
}

TEST_CASE("safetensors: __metadata__ must map strings to strings") {
  TempDir dir;
  check_rejected(dir, st_file("{\"__metadata__\":\"x\"}", ""),
                 "\"__metadata__\" must be an object mapping strings to strings, got string");
  check_rejected(dir, st_file("{\"__metadata__\":{\"k\":1}}", ""),
                 "\"__metadata__\" must map strings to strings, but key 'k' holds a number");
  check_rejected(dir, st_file("{\"__metadata__\":{\"k\":{\"x\":\"y\"}}}", ""),
                 "key 'k' holds a object");
  check_rejected(dir, st_file("{\"__metadata__\":{},\"__metadata__\":{}}", ""),
                 "duplicate key '__metadata__'");
}

TEST_CASE("safetensors: loading onto a device that does not exist fails cleanly") {
  if (octo::cuda::is_available()) return;  // only meaningful without a GPU
  TempDir dir;
  std::string path = dir.file("x.safetensors");
  octo::save_safetensors({{"x", octo::ones({2})}}, path);
  CHECK_THROWS_AS(octo::load_safetensors(path, Device("cuda:0")), octo::DeviceError);
}

TEST_CASE("safetensors: save rejects bad names and undefined tensors") {
  TempDir dir;
  std::string path = dir.file("x.safetensors");
  Tensor t = octo::ones({2});
  CHECK_THROWS_AS(octo::save_safetensors({{"w", t}, {"w", t}}, path), octo::ValueError);
  CHECK_THROWS_WITH(octo::save_safetensors({{"w", t}, {"w", t}}, path),
                    Catch::Contains("duplicate tensor name 'w'"));
  CHECK_THROWS_AS(octo::save_safetensors({{"", t}}, path), octo::ValueError);
  CHECK_THROWS_WITH(octo::save_safetensors({{"", t}}, path), Catch::Contains("must not be empty"));
  CHECK_THROWS_WITH(octo::save_safetensors({{"__metadata__", t}}, path),
                    Catch::Contains("reserved"));
  CHECK_THROWS_AS(octo::save_safetensors({{"u", Tensor()}}, path), octo::ValueError);
  CHECK_THROWS_WITH(octo::save_safetensors({{"u", Tensor()}}, path),
                    Catch::Contains("'u' is undefined"));
  CHECK_THROWS_AS(octo::save_safetensors({{"bad\xFF", t}}, path), octo::ValueError);
  CHECK_THROWS_WITH(octo::save_safetensors({{"w", t}}, path, {{"k", "\xC3"}}),
                    Catch::Contains("valid UTF-8"));
  CHECK(dir.listing().empty());  // nothing was written
}

TEST_CASE("safetensors: saving into a missing directory names the path") {
  TempDir dir;
  std::string path = dir.file("no/such/dir/model.safetensors");
  try {
    octo::save_safetensors({{"w", octo::ones({2})}}, path);
    FAIL("save into a missing directory succeeded");
  } catch (const octo::IOError& e) {
    std::string msg = e.what();
    CHECK(msg.find(path) != std::string::npos);
    CHECK(msg.find(std::strerror(ENOENT)) != std::string::npos);
  }
  CHECK(dir.listing().empty());
}

TEST_CASE("safetensors: a save that fails midway keeps the old file and leaves no temp file") {
  TempDir dir;
  std::string path = dir.file("model.safetensors");
  octo::save_safetensors({{"w", octo::arange(10)}}, path, {{"version", "old"}});
  const std::string old_bytes = read_bytes(path);
  REQUIRE(old_bytes.size() > 80);

  std::vector<std::pair<std::string, Tensor>> next = {
      {"w", octo::randn({64, 32})}, {"b", octo::zeros({32}, {.dtype = octo::kFloat64})}};
  // Fail before anything is written, inside the length, inside the header, inside the data.
  for (int64_t fail_after : {0, 3, 8, 20, 200, 4000, 8000}) {
    INFO("fail after " << fail_after << " bytes");
    {
      FaultGuard fault(fail_after);
      try {
        octo::save_safetensors(next, path, {{"version", "new"}});
        FAIL("the injected fault did not fire");
      } catch (const octo::IOError& e) {
        std::string msg = e.what();
        CHECK(msg.find("injected fault") != std::string::npos);
        CHECK(msg.find(path) != std::string::npos);
      }
    }
    CHECK(read_bytes(path) == old_bytes);
    CHECK(dir.listing() == std::vector<std::string>{"model.safetensors"});
  }
  CHECK(octo::load_safetensors(path).metadata.at("version") == "old");

  // A fault past the end of the file never fires; the save replaces the old file.
  {
    FaultGuard fault(1'000'000);
    octo::save_safetensors(next, path, {{"version", "new"}});
  }
  auto loaded = octo::load_safetensors(path);
  CHECK(loaded.metadata.at("version") == "new");
  CHECK(values_of(find(loaded, "w")) == values_of(next[0].second));
  CHECK(dir.listing() == std::vector<std::string>{"model.safetensors"});
}

TEST_CASE("safetensors: file permissions follow the umask, or the file being replaced") {
  TempDir dir;
  std::string path = dir.file("perm.safetensors");
  mode_t mask = ::umask(022);
  ::umask(mask);
  octo::save_safetensors({{"w", octo::ones({1})}}, path);
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == (0666 & ~mask));
  REQUIRE(::chmod(path.c_str(), 0600) == 0);
  octo::save_safetensors({{"w", octo::zeros({1})}}, path);
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  CHECK(find(octo::load_safetensors(path), "w").item<float>() == 0.0f);
}
