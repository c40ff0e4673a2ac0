// Safetensors I/O: a validating reader and an atomic (temp file + fsync + rename) writer.
#include "tensor/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <string_view>
#include <system_error>
#include <tuple>

#include <nlohmann/json.hpp>

#include "core/device_hooks.h"
#include "core/error.h"
#include "kernels/backend.h"

namespace octo {

static_assert(std::endian::native == std::endian::little,
              "safetensors stores little-endian data; octo writes and reads host memory as is");

namespace {

using Json = nlohmann::json;

/// The largest header a reader accepts (the reference implementation's limit), in bytes.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

struct DTypeName {
  std::string_view name;
  DType dtype;
};
constexpr DTypeName kDTypeNames[] = {{"F64", kFloat64},   {"F32", kFloat32}, {"F16", kFloat16},
                                     {"BF16", kBFloat16}, {"I64", kInt64},   {"I32", kInt32},
                                     {"U8", kUInt8},      {"BOOL", kBool}};
/// Safetensors dtypes that exist in the format but have no octo counterpart.
constexpr std::string_view kUnsupportedDTypes[] = {"I8",  "I16",     "U16",     "U32",
                                                   "U64", "F8_E4M3", "F8_E5M2", "F8_E8M0",
                                                   "F4",  "F6_E2M3", "F6_E3M2", "C64"};

std::string_view safetensors_dtype_name(DType t) {
  for (const auto& d : kDTypeNames)
    if (d.dtype == t) return d.name;
  OCTO_THROW(ValueError, "save_safetensors: unsupported dtype ", t);
}

/// A name or JSON fragment from a (possibly hostile) file, quoted and cut to a readable length.
std::string quote_name(std::string_view s) {
  constexpr size_t kMax = 120;
  if (s.size() <= kMax) return "'" + std::string(s) + "'";
  return "'" + std::string(s.substr(0, kMax)) + "...'";
}
std::string short_dump(const Json& j) {
  std::string s = j.dump(-1, ' ', false, Json::error_handler_t::replace);
  return s.size() <= 120 ? s : s.substr(0, 120) + "...";
}

std::string os_error(int err) { return std::error_code(err, std::generic_category()).message(); }

// ================================================================================================
// Writer
// ================================================================================================

std::atomic<int64_t> g_write_fault{-1};

/// The permission bits a newly created file gets: 0666 minus the process umask. Read from
/// /proc/self/status because umask() can only be queried by changing it (racy with threads).
mode_t default_file_mode() {
  mode_t mask = 022;
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Umask:", 0) == 0) {
      mask = static_cast<mode_t>(std::strtoul(line.c_str() + 6, nullptr, 8));
      break;
    }
  }
  return 0666 & ~mask;
}

/// The temporary file of one atomic save. The destructor closes it and, unless commit()
/// succeeded, removes it, so every exit path (errors included) leaves no temp file behind.
class AtomicFile {
 public:
  explicit AtomicFile(std::string target) : target_(std::move(target)) {
    // Only a regular file (or nothing) may be replaced: renaming over /dev/null or a FIFO would
    // swap the device node for a file.
    struct stat st;
    if (::stat(target_.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
      OCTO_THROW(IOError, "save_safetensors: refusing to write '", target_,
                 "': it exists and is not a regular file (",
                 S_ISDIR(st.st_mode)    ? "a directory"
                 : S_ISCHR(st.st_mode)  ? "a character device"
                 : S_ISBLK(st.st_mode)  ? "a block device"
                 : S_ISFIFO(st.st_mode) ? "a FIFO"
                 : S_ISSOCK(st.st_mode) ? "a socket"
                                        : "not a regular file",
                 ")");
    }
    // The temporary file sits beside the target under a short name of its own, so a target name
    // near the file-name limit (255 bytes) still works.
    const size_t slash = target_.find_last_of('/');
    std::string tmpl = (slash == std::string::npos ? std::string() : target_.substr(0, slash + 1)) +
                       ".octo-save.XXXXXX";
    fd_ = ::mkostemp(tmpl.data(), O_CLOEXEC);
    if (fd_ < 0) fail("create a temporary file for", errno);
    tmp_ = tmpl;
  }
  ~AtomicFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_ && !tmp_.empty()) ::unlink(tmp_.c_str());
  }
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t n) {
    const char* p = static_cast<const char*>(data);
    while (n > 0) {
      size_t chunk = std::min<size_t>(n, size_t{1} << 30);
      int64_t fault = g_write_fault.load();
      if (fault >= 0) {
        if (written_ >= fault) fail("write (injected fault) to", EIO);
        chunk = std::min<size_t>(chunk, static_cast<size_t>(fault - written_));
      }
      ssize_t r = ::write(fd_, p, chunk);
      if (r < 0) {
        if (errno == EINTR) continue;
        fail("write to", errno);
      }
      p += r;
      n -= static_cast<size_t>(r);
      written_ += r;
    }
  }

  /// Makes the data durable and puts it in place: fsync, rename over the target, fsync the dir.
  void commit() {
    struct stat st {};
    mode_t mode = ::stat(target_.c_str(), &st) == 0 && S_ISREG(st.st_mode) ? (st.st_mode & 07777)
                                                                           : default_file_mode();
    if (::fchmod(fd_, mode) != 0) fail("set the permissions of the temporary file for", errno);
    if (::fsync(fd_) != 0) fail("flush (fsync)", errno);
    int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) fail("close the temporary file for", errno);
    if (::rename(tmp_.c_str(), target_.c_str()) != 0) fail("rename the temporary file onto", errno);
    committed_ = true;
    // The rename is durable only once the directory entry is: fsync the directory.
    std::string dir = std::filesystem::path(target_).parent_path().string();
    if (dir.empty()) dir = ".";
    int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) fail("open the directory (to fsync it) of", errno);
    int rc = ::fsync(dfd);
    int err = errno;
    ::close(dfd);
    if (rc != 0 && err != EINVAL) fail("fsync the directory of", err);  // EINVAL: unsupported
  }

 private:
  [[noreturn]] void fail(const char* what, int err) const {
    OCTO_THROW(IOError, "save_safetensors: cannot ", what, " '", target_, "': ", os_error(err));
  }

  std::string target_;
  std::string tmp_;
  int fd_ = -1;
  int64_t written_ = 0;
  bool committed_ = false;
};

/// t's elements as a dense row-major block in host memory (t itself when it already is one).
Tensor host_contiguous(const Tensor& t) {
  if (t.device().is_cpu() && t.is_contiguous()) return t;
  Tensor host = detail::make_empty(t.sizes(), t.dtype(), kCPU);
  if (t.device().is_cuda()) {
    kernels::backend(t.device()).copy(host.arg(), t.arg());
    synchronize(t.device());
  } else {
    kernels::cpu_backend().copy(host.arg(), t.arg());
  }
  return host;
}

// ================================================================================================
// Reader
// ================================================================================================

template <typename... Args>
[[noreturn]] void bad_file(const std::string& path, const Args&... args) {
  OCTO_THROW(IOError, "load_safetensors: invalid safetensors file '", path, "': ", args...);
}

struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin, end;
};

/// Parses the header, flagging duplicate keys (nlohmann keeps the last silently) and nesting
/// deeper than a safetensors header has (root object > entry > shape list), without building
/// the over-deep part.
Json parse_header(const std::string& path, const std::string& text) {
  constexpr int kMaxContainerDepth = 2;     // containers may start at depths 0, 1 and 2
  std::vector<std::set<std::string>> keys;  // one set per open (kept) object
  std::string duplicate;
  bool too_deep = false;
  auto callback = [&](int depth, Json::parse_event_t event, Json& parsed) -> bool {
    switch (event) {
      case Json::parse_event_t::object_start:
      case Json::parse_event_t::array_start:
        if (depth > kMaxContainerDepth) {
          too_deep = true;
          return false;  // discard: nothing below is built
        }
        if (event == Json::parse_event_t::object_start) {
          keys.resize(static_cast<size_t>(depth));
          keys.emplace_back();
        }
        return true;
      case Json::parse_event_t::key:
        if (static_cast<size_t>(depth) == keys.size() && duplicate.empty() &&
            !keys.back().insert(parsed.get<std::string>()).second)
          duplicate = parsed.get<std::string>();
        return true;
      case Json::parse_event_t::object_end:
        if (!keys.empty() && static_cast<size_t>(depth) + 1 == keys.size()) keys.pop_back();
        return true;
      default:
        return true;
    }
  };
  Json header;
  try {
    header = Json::parse(text.begin(), text.end(), callback);
  } catch (const Json::exception& e) {
    bad_file(path, "the header is not valid JSON: ", e.what());
  }
  if (too_deep) bad_file(path, "the header nests deeper than a safetensors header can");
  if (!duplicate.empty()) bad_file(path, "duplicate key ", quote_name(duplicate), " in the header");
  if (!header.is_object())
    bad_file(path, "the header is not a JSON object (found ", header.type_name(), ")");
  return header;
}

DType parse_dtype(const std::string& path, const std::string& name, const Json& j) {
  if (!j.is_string())
    bad_file(path, "tensor ", quote_name(name), ": \"dtype\" must be a string, got ",
             j.type_name());
  const auto& s = j.get_ref<const std::string&>();
  for (const auto& d : kDTypeNames)
    if (d.name == s) return d.dtype;
  for (auto u : kUnsupportedDTypes)
    if (u == s)
      bad_file(path, "tensor ", quote_name(name), " has unsupported dtype ", quote_name(s),
               " (octo reads F64, F32, F16, BF16, I64, I32, U8 and BOOL)");
  bad_file(path, "tensor ", quote_name(name), " has unknown dtype ", quote_name(s));
}

Entry parse_entry(const std::string& path, const std::string& name, const Json& v,
                  uint64_t buffer_size) {
  if (!v.is_object())
    bad_file(path, "tensor ", quote_name(name),
             ": expected an object with dtype, shape and data_offsets, got ", v.type_name());
  auto field = [&](const char* f) -> const Json& {
    auto it = v.find(f);
    if (it == v.end()) bad_file(path, "tensor ", quote_name(name), " is missing \"", f, "\"");
    return *it;
  };
  Entry e;
  e.name = name;
  e.dtype = parse_dtype(path, name, field("dtype"));

  const Json& shape = field("shape");
  if (!shape.is_array())
    bad_file(path, "tensor ", quote_name(name), ": \"shape\" must be a list of integers, got ",
             shape.type_name());
  // numel for the byte count, and the product of max(dim, 1) that contiguous strides reach:
  // both must fit in int64 (checked, since the file chooses them).
  int64_t numel = 1, span = 1;
  bool overflow = false;
  for (const Json& d : shape) {
    if (d.is_number_unsigned()) {
      uint64_t u = d.get<uint64_t>();
      overflow |= u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
      int64_t dim = static_cast<int64_t>(u);
      e.shape.push_back(dim);
      overflow |= __builtin_mul_overflow(numel, dim, &numel);
      overflow |= __builtin_mul_overflow(span, std::max<int64_t>(dim, 1), &span);
    } else if (d.is_number_integer()) {
      bad_file(path, "tensor ", quote_name(name), ": negative dimension ", d.get<int64_t>(),
               " in \"shape\" ", short_dump(shape));
    } else if (d.is_number_float()) {
      bad_file(path, "tensor ", quote_name(name), ": non-integer dimension ", short_dump(d),
               " in \"shape\" ", short_dump(shape));
    } else {
      bad_file(path, "tensor ", quote_name(name), ": \"shape\" must be a list of integers, found ",
               d.type_name(), " in ", short_dump(shape));
    }
  }
  uint64_t nbytes = 0;
  overflow |= __builtin_mul_overflow(static_cast<uint64_t>(numel), itemsize(e.dtype), &nbytes);
  if (overflow)
    bad_file(path, "tensor ", quote_name(name), ": shape ", short_dump(shape),
             " is too large (its element count or byte size overflows 64 bits)");

  const Json& off = field("data_offsets");
  if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
      !off[1].is_number_unsigned())
    bad_file(path, "tensor ", quote_name(name),
             ": \"data_offsets\" must be [begin, end] with non-negative integers, got ",
             short_dump(off));
  e.begin = off[0].get<uint64_t>();
  e.end = off[1].get<uint64_t>();
  if (e.begin > e.end)
    bad_file(path, "tensor ", quote_name(name), ": data_offsets [", e.begin, ", ", e.end,
             "] has begin > end");
  if (e.end - e.begin != nbytes)
    bad_file(path, "tensor ", quote_name(name), ": data_offsets [", e.begin, ", ", e.end, "] hold ",
             e.end - e.begin, " bytes but shape ", short_dump(shape), " of dtype ",
             field("dtype").get_ref<const std::string&>(), " needs ", nbytes, " bytes");
  if (e.end > buffer_size)
    bad_file(path, "tensor ", quote_name(name), ": data_offsets [", e.begin, ", ", e.end,
             "] run past the end of the data buffer (", buffer_size, " bytes)");
  return e;
}

std::map<std::string, std::string> parse_metadata(const std::string& path, const Json& j) {
  if (!j.is_object())
    bad_file(path, "\"__metadata__\" must be an object mapping strings to strings, got ",
             j.type_name());
  std::map<std::string, std::string> m;
  for (const auto& [k, v] : j.items()) {
    if (!v.is_string())
      bad_file(path, "\"__metadata__\" must map strings to strings, but key ", quote_name(k),
               " holds a ", v.type_name());
    m.emplace(k, v.get<std::string>());
  }
  return m;
}

}  // namespace

namespace detail {
void set_safetensors_write_fault(int64_t fail_after_bytes) {
  g_write_fault.store(fail_after_bytes < 0 ? -1 : fail_after_bytes);
}
}  // namespace detail

void save_safetensors(const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::string& path, const std::map<std::string, std::string>& metadata) {
  std::set<std::string_view> names;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& [name, t] = tensors[i];
    OCTO_CHECK_VALUE(!name.empty(), "save_safetensors: tensor names must not be empty (entry ", i,
                     ")");
    OCTO_CHECK_VALUE(
        name != "__metadata__",
        "save_safetensors: the name '__metadata__' is reserved for the metadata map (entry ", i,
        ")");
    OCTO_CHECK_VALUE(names.insert(name).second, "save_safetensors: duplicate tensor name '", name,
                     "'");
    OCTO_CHECK_VALUE(t.defined(), "save_safetensors: tensor '", name, "' is undefined");
    safetensors_dtype_name(t.dtype());  // throws for dtypes the format cannot hold
  }

  // Layout: by decreasing element size (stable), so every tensor is aligned to its element size
  // (the header is padded to 8 bytes), as the reference writer lays files out.
  std::vector<size_t> order(tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return tensors[a].second.itemsize() > tensors[b].second.itemsize();
  });

  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (size_t i : order) {
    const auto& [name, t] = tensors[i];
    uint64_t end = offset + t.nbytes();
    header[name] = {{"dtype", safetensors_dtype_name(t.dtype())},
                    {"shape", t.sizes()},
                    {"data_offsets", {offset, end}}};
    offset = end;
  }
  std::string text;
  try {
    text = header.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::strict);
  } catch (const nlohmann::ordered_json::exception& e) {
    OCTO_THROW(ValueError, "save_safetensors: tensor names and metadata must be valid UTF-8 (",
               e.what(), ")");
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  OCTO_CHECK_VALUE(text.size() <= kMaxHeaderBytes, "save_safetensors: the header would be ",
                   text.size(), " bytes, over the ", kMaxHeaderBytes,
                   "-byte limit that safetensors readers accept");

  AtomicFile file(path);
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(uint64_t{text.size()} >> (8 * i));
  file.write(len, sizeof len);
  file.write(text.data(), text.size());
  for (size_t i : order) {
    const Tensor& t = tensors[i].second;
    if (t.numel() == 0) continue;
    Tensor host = host_contiguous(t);
    file.write(host.raw_data(), host.nbytes());
  }
  file.commit();
}

SafetensorsFile load_safetensors(const std::string& path, Device device) {
  check_device_available(device);
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) OCTO_THROW(IOError, "load_safetensors: cannot read '", path, "': ", ec.message());
  std::ifstream in(path, std::ios::binary);
  if (!in) OCTO_THROW(IOError, "load_safetensors: cannot open '", path, "': ", os_error(errno));
  auto read = [&](void* dst, uint64_t n, const char* what) {
    in.read(static_cast<char*>(dst), static_cast<std::streamsize>(n));
    if (static_cast<uint64_t>(in.gcount()) != n)
      OCTO_THROW(IOError, "load_safetensors: error reading ", what, " of '", path,
                 "' (did the file change while it was being read?)");
  };

  if (size < 8)
    bad_file(path, "the file is ", size, " bytes long, shorter than the 8-byte header length");
  unsigned char len[8];
  read(len, 8, "the header length");
  uint64_t header_len = 0;
  for (int i = 0; i < 8; ++i) header_len |= uint64_t{len[i]} << (8 * i);
  if (header_len > kMaxHeaderBytes)
    bad_file(path, "header length ", header_len, " is over the ", kMaxHeaderBytes, "-byte limit");
  if (header_len > size - 8)
    bad_file(path, "header length ", header_len, " runs past the end of the file (", size,
             " bytes)");
  std::string text(header_len, '\0');
  read(text.data(), header_len, "the header");
  const uint64_t buffer_size = size - 8 - header_len;

  Json header = parse_header(path, text);
  SafetensorsFile result;
  std::vector<Entry> entries;
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__")
      result.metadata = parse_metadata(path, value);
    else
      entries.push_back(parse_entry(path, key, value, buffer_size));
  }
  header = Json();  // free the DOM before allocating tensors

  // The tensors must tile the data buffer exactly: sorted by offset, each begins where the
  // previous one ended, and the last ends at the end of the file.
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
  });
  uint64_t pos = 0;
  const Entry* prev = nullptr;
  for (const Entry& e : entries) {
    if (e.begin < pos)
      bad_file(path, "tensors ", quote_name(prev->name), " and ", quote_name(e.name),
               " overlap: data_offsets [", prev->begin, ", ", prev->end, "] and [", e.begin, ", ",
               e.end, "]");
    if (e.begin > pos)
      bad_file(path, "bytes [", pos, ", ", e.begin,
               ") of the data buffer belong to no tensor (gaps are not allowed)");
    pos = e.end;
    prev = &e;
  }
  if (pos != buffer_size)
    bad_file(path, "the data buffer has ", buffer_size, " bytes but the tensors cover only ", pos,
             " (unused trailing bytes are not allowed)");

  // Everything is validated; the reads below are exactly the file's remaining bytes, in order.
  const Device host_device = device.is_cpu() ? device : kCPU;
  result.tensors.reserve(entries.size());
  for (const Entry& e : entries) {
    Tensor t = detail::make_empty(e.shape, e.dtype, host_device);
    uint64_t nbytes = e.end - e.begin;
    if (nbytes > 0) read(t.raw_data(), nbytes, ("tensor " + quote_name(e.name)).c_str());
    if (e.dtype == kBool) {  // any nonzero byte is true; keep octo's bools 0 or 1
      auto* p = static_cast<unsigned char*>(t.raw_data());
      for (uint64_t i = 0; i < nbytes; ++i) p[i] = p[i] != 0;
    }
    if (host_device != device) t = t.to(device);
    result.tensors.emplace_back(e.name, std::move(t));
  }
  return result;
}

}  // namespace octo
