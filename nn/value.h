// Value: a tensor, a number, a string, or a list of Values -- a module's nested inputs and outputs.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "core/error.h"
#include "tensor/tensor.h"

namespace octo::nn {

/// What flows through Module::forward_values and DataParallel: tensors, plain numbers and strings
/// (passed to every replica unchanged), and lists of Values (tuples are lists), nested freely.
///
///   nn::Value in = nn::Value::list({x, nn::Value::list({mask, 0.5})});
class Value {
 public:
  using List = std::vector<Value>;
  Value() = default;
  Value(Tensor t) : v_(std::move(t)) {}          // NOLINT: a tensor is a Value
  Value(double d) : v_(d) {}                     // NOLINT
  Value(int64_t i) : v_(i) {}                    // NOLINT
  Value(int i) : v_(static_cast<int64_t>(i)) {}  // NOLINT
  Value(bool b) : v_(b) {}                       // NOLINT
  Value(std::string s) : v_(std::move(s)) {}     // NOLINT
  Value(const char* s) : v_(std::string(s)) {}   // NOLINT
  Value(List l) : v_(std::move(l)) {}            // NOLINT
  static Value list(List items) { return Value(std::move(items)); }

  bool is_none() const { return std::holds_alternative<std::monostate>(v_); }
  bool is_tensor() const { return std::holds_alternative<Tensor>(v_); }
  bool is_list() const { return std::holds_alternative<List>(v_); }
  bool is_double() const { return std::holds_alternative<double>(v_); }
  bool is_int() const { return std::holds_alternative<int64_t>(v_); }
  bool is_bool() const { return std::holds_alternative<bool>(v_); }
  bool is_string() const { return std::holds_alternative<std::string>(v_); }

  const Tensor& tensor() const {
    OCTO_CHECK_VALUE(is_tensor(), "Value: expected a tensor, got ", kind());
    return std::get<Tensor>(v_);
  }
  const List& list() const {
    OCTO_CHECK_VALUE(is_list(), "Value: expected a list, got ", kind());
    return std::get<List>(v_);
  }
  double to_double() const {
    OCTO_CHECK_VALUE(is_double() || is_int(), "Value: expected a number, got ", kind());
    return is_double() ? std::get<double>(v_) : static_cast<double>(std::get<int64_t>(v_));
  }
  int64_t to_int() const {
    OCTO_CHECK_VALUE(is_int(), "Value: expected an integer, got ", kind());
    return std::get<int64_t>(v_);
  }
  bool to_bool() const {
    OCTO_CHECK_VALUE(is_bool(), "Value: expected a bool, got ", kind());
    return std::get<bool>(v_);
  }
  const std::string& str() const {
    OCTO_CHECK_VALUE(is_string(), "Value: expected a string, got ", kind());
    return std::get<std::string>(v_);
  }
  /// "tensor", "list", "double", "int", "bool", "string" or "none".
  const char* kind() const {
    static const char* names[] = {"none", "tensor", "double", "int", "bool", "string", "list"};
    return names[v_.index()];
  }

 private:
  std::variant<std::monostate, Tensor, double, int64_t, bool, std::string, List> v_;
};

}  // namespace octo::nn
