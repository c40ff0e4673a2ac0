// Printing tensors the way PyTorch does: aligned values, nested brackets, device/dtype suffixes.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "tensor/autograd_hooks.h"
#include "tensor/tensor.h"

namespace octo {

namespace {

constexpr int64_t kSummarizeThreshold = 1000;  // elements; above this, edges only
constexpr int64_t kEdgeItems = 3;

struct Formatter {
  DType dtype;
  bool int_mode = false;  // floats that are all whole numbers print as "1."
  bool sci_mode = false;
  int width = 1;

  explicit Formatter(const std::vector<double>& values, DType t) : dtype(t) {
    if (!is_floating(t)) {
      for (double v : values) width = std::max(width, static_cast<int>(fmt(v).size()));
      return;
    }
    std::vector<double> finite;
    for (double v : values)
      if (std::isfinite(v)) finite.push_back(std::fabs(v));
    int_mode = true;
    for (double v : finite)
      if (v != std::nearbyint(v)) int_mode = false;
    if (!finite.empty()) {
      double mx = *std::max_element(finite.begin(), finite.end());
      if (int_mode) {
        sci_mode = mx > 1e8;
      } else {
        double nonzero_min = mx;
        for (double v : finite)
          if (v != 0 && v < nonzero_min) nonzero_min = v;
        sci_mode = mx / std::max(nonzero_min, 1e-300) > 1000.0 || mx > 1e8 ||
                   (nonzero_min != 0 && nonzero_min < 1e-4);
      }
    }
    for (double v : values) width = std::max(width, static_cast<int>(fmt(v).size()));
  }

  std::string fmt(double v) const {
    char buf[64];
    if (dtype == kBool) return v != 0 ? "True" : "False";
    if (!is_floating(dtype)) {
      std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
      return buf;
    }
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    if (sci_mode) {
      std::snprintf(buf, sizeof buf, "%.4e", v);
    } else if (int_mode) {
      std::snprintf(buf, sizeof buf, "%.0f.", v);
    } else {
      std::snprintf(buf, sizeof buf, "%.4f", v);
    }
    return buf;
  }
  std::string pad(double v) const {
    std::string s = fmt(v);
    return std::string(static_cast<size_t>(std::max(0, width - static_cast<int>(s.size()))), ' ') +
           s;
  }
};

void print_dim(std::ostream& os, const std::vector<double>& v, const Shape& sizes,
               const Shape& strides, size_t dim, int64_t offset, const Formatter& f, int indent,
               bool summarize) {
  int64_t n = sizes[dim];
  auto visible = [&](int64_t i) {
    return !summarize || n <= 2 * kEdgeItems || i < kEdgeItems || i >= n - kEdgeItems;
  };
  os << '[';
  bool last_dim = dim + 1 == sizes.size();
  bool skipped = false;
  bool first = true;
  for (int64_t i = 0; i < n; ++i) {
    if (!visible(i)) {
      if (!skipped) {
        if (last_dim) {
          os << ", ...";
        } else {
          os << ",\n" << std::string(static_cast<size_t>(indent + 1), ' ') << "...";
        }
        skipped = true;
      }
      continue;
    }
    if (!first) {
      if (last_dim) {
        os << ", ";
      } else {
        os << ',' << std::string(sizes.size() - dim - 1, '\n')
           << std::string(static_cast<size_t>(indent + 1), ' ');
      }
    }
    first = false;
    int64_t off = offset + i * strides[dim];
    if (last_dim) {
      os << f.pad(v[static_cast<size_t>(off)]);
    } else {
      print_dim(os, v, sizes, strides, dim + 1, off, f, indent + 1, summarize);
    }
  }
  os << ']';
}

}  // namespace

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (!t.defined()) return os << "tensor(undefined)";
  std::vector<double> values = t.to(kFloat64).contiguous().to_vector<double>();
  if (t.dtype() == kInt64) {  // exact integers beyond 2^53
    auto iv = t.contiguous().to_vector<int64_t>();
    for (size_t i = 0; i < iv.size(); ++i) values[i] = static_cast<double>(iv[i]);
  }
  bool summarize = t.numel() > kSummarizeThreshold;
  Formatter f(values, t.dtype());
  os << "tensor(";
  if (t.dim() == 0) {
    os << f.fmt(values[0]);
  } else if (t.numel() == 0) {
    os << "[]";
    if (t.dim() > 1) {
      os << ", size=(";
      for (int64_t i = 0; i < t.dim(); ++i) os << (i ? ", " : "") << t.size(i);
      os << ")";
    }
  } else {
    print_dim(os, values, t.sizes(), detail::contiguous_strides(t.sizes()), 0, 0, f, 7, summarize);
  }
  if (t.device() != kCPU) os << ", device='" << t.device() << "'";
  if (t.dtype() != kFloat32 && t.dtype() != kInt64 && t.dtype() != kBool)
    os << ", dtype=" << t.dtype();
  if (auto node = t.grad_fn()) {
    os << ", grad_fn=<" << detail::node_name(*node) << ">";
  } else if (t.requires_grad()) {
    os << ", requires_grad=True";
  }
  return os << ')';
}

}  // namespace octo
