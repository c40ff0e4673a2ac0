// Recursive scatter and gather over nn::Value.
#include "parallel/scatter_gather.h"

#include <algorithm>
#include <limits>

#include "core/error.h"
#include "parallel/functions.h"

namespace octo::parallel {

namespace {

constexpr size_t kEveryReplica = std::numeric_limits<size_t>::max();

/// Splits one value into per-replica values. Sets `pieces` to how many replicas its tensors
/// allow (kEveryReplica when it holds no tensor).
std::vector<nn::Value> scatter_value(const nn::Value& v, const std::vector<Device>& devices,
                                     int64_t dim, size_t& pieces) {
  if (v.is_tensor()) {
    std::vector<Tensor> chunks = Scatter::apply(v.tensor(), devices, std::nullopt, dim);
    pieces = std::min(pieces, chunks.size());
    return std::vector<nn::Value>(chunks.begin(), chunks.end());
  }
  if (v.is_list()) {
    std::vector<std::vector<nn::Value>> items;
    for (const nn::Value& item : v.list())
      items.push_back(scatter_value(item, devices, dim, pieces));
    std::vector<nn::Value> out;
    for (size_t r = 0; r < devices.size(); ++r) {
      nn::Value::List l;
      bool complete = true;
      for (auto& per_item : items) {
        if (r >= per_item.size()) {
          complete = false;
          break;
        }
        l.push_back(per_item[r]);
      }
      if (!complete) break;
      out.emplace_back(std::move(l));
    }
    return out;
  }
  return std::vector<nn::Value>(devices.size(), v);  // numbers, strings: every replica
}

}  // namespace

std::vector<std::vector<nn::Value>> scatter(const std::vector<nn::Value>& inputs,
                                            const std::vector<Device>& devices, int64_t dim) {
  OCTO_CHECK_VALUE(!devices.empty(), "scatter: expected at least one device");
  size_t pieces = kEveryReplica;
  std::vector<std::vector<nn::Value>> per_input;
  for (const nn::Value& v : inputs) per_input.push_back(scatter_value(v, devices, dim, pieces));
  size_t replicas = pieces == kEveryReplica ? devices.size() : pieces;
  std::vector<std::vector<nn::Value>> out(replicas);
  for (size_t r = 0; r < replicas; ++r)
    for (auto& values : per_input) out[r].push_back(values.at(r));
  return out;
}

nn::Value gather(const std::vector<nn::Value>& outputs, Device destination, int64_t dim) {
  OCTO_CHECK_VALUE(!outputs.empty(), "gather: no outputs to gather");
  const nn::Value& first = outputs[0];
  for (size_t i = 1; i < outputs.size(); ++i)
    OCTO_CHECK_VALUE(std::string(outputs[i].kind()) == first.kind(),
                     "gather: replica 0 returned a ", first.kind(), " but replica ", i,
                     " returned a ", outputs[i].kind());
  if (first.is_tensor()) {
    std::vector<Tensor> pieces;
    bool scalars = first.tensor().dim() == 0;
    for (const nn::Value& v : outputs) {
      const Tensor& t = v.tensor();
      OCTO_CHECK_VALUE((t.dim() == 0) == scalars,
                       "gather: replica outputs mix 0-dim and non-0-dim tensors");
      pieces.push_back(scalars ? t.unsqueeze(0) : t);
    }
    return Gather::apply(pieces, destination, scalars ? 0 : dim);
  }
  if (first.is_list()) {
    size_t n = first.list().size();
    nn::Value::List out;
    for (size_t k = 0; k < n; ++k) {
      std::vector<nn::Value> column;
      for (size_t i = 0; i < outputs.size(); ++i) {
        OCTO_CHECK_VALUE(outputs[i].list().size() == n, "gather: replica 0 returned ", n,
                         " values but replica ", i, " returned ", outputs[i].list().size());
        column.push_back(outputs[i].list()[k]);
      }
      out.push_back(gather(column, destination, dim));
    }
    return nn::Value(std::move(out));
  }
  return first;  // numbers and strings: the first replica's (they cannot be concatenated)
}

}  // namespace octo::parallel
