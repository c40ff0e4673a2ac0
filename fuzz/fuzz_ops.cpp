// libFuzzer target: the tensor API itself. The bytes are read as a small program over a pool of
// tensors: each step makes a tensor (any dtype, a small or hostile shape, on cpu or the virtual
// cpu:1, maybe requiring grad) or applies one op -- a view, an elementwise or reduction op, an
// indexing, linear-algebra, convolution, pooling, normalisation or loss op, an in-place update,
// a move between devices, scatter/gather -- to members of the pool, with argument values from the
// bytes, valid or not, sometimes under autocast. At the end every floating tensor that requires
// grad is summed and backpropagated.
//
// The rules: octo may refuse a step only with an octo::Error; a tensor it returns is well formed
// (numel is the product of the sizes, and every element it can address lies inside its storage,
// which reading it back checks under ASan); and nothing crashes, hangs or leaks.
//
// Argument values are small (-3..8) or hostile, and hostile means far too big to allocate
// (>= 2^50 elements) or overflowing int64, never a size a machine could almost allocate: a
// multi-GiB tensor that does fit would only be slow, and libFuzzer counts it as a finding.
#include "fuzz_util.h"

#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

namespace {

using octo::Device;
using octo::DType;
using octo::Shape;
using octo::Tensor;
namespace F = octo::nn::functional;
namespace comm = octo::parallel::comm;

/// The fuzzer's bytes, consumed front to back; reading past the end gives zeros.
class Program {
 public:
  Program(const uint8_t* data, size_t size) : p_(data), n_(size) {}
  bool done() const { return n_ == 0; }
  uint8_t byte() {
    if (n_ == 0) return 0;
    --n_;
    return *p_++;
  }
  bool flag() { return byte() & 1; }
  int64_t below(int64_t n) { return byte() % n; }

  /// An integer argument: mostly -3..8, one time in sixteen a hostile value.
  int64_t integer() {
    uint8_t b = byte();
    if ((b & 0xF0) != 0xF0) return static_cast<int64_t>(b % 12) - 3;
    static constexpr int64_t kHostile[] = {std::numeric_limits<int64_t>::max(),
                                           std::numeric_limits<int64_t>::min(),
                                           int64_t{1} << 50,
                                           int64_t{1} << 62,
                                           -(int64_t{1} << 62),
                                           std::numeric_limits<int64_t>::max() / 2 + 1};
    return kHostile[b % std::size(kHostile)];
  }
  /// A size: mostly 0..6, sometimes an integer() (negative or hostile).
  int64_t size() {
    uint8_t b = byte();
    return (b & 0xE0) == 0xE0 ? integer() : b % 7;
  }
  Shape shape() {
    Shape s;
    int64_t rank = below(5);
    for (int64_t i = 0; i < rank; ++i) s.push_back(size());
    return s;
  }
  std::array<int64_t, 2> pair() { return {integer(), integer()}; }
  DType dtype() {
    static constexpr DType kAll[] = {octo::kFloat32, octo::kFloat64, octo::kBFloat16,
                                     octo::kFloat16, octo::kInt64,   octo::kInt32,
                                     octo::kUInt8,   octo::kBool};
    return kAll[below(std::size(kAll))];
  }
  DType floating() {
    static constexpr DType kFloats[] = {octo::kFloat32, octo::kFloat64, octo::kBFloat16,
                                        octo::kFloat16};
    return kFloats[below(std::size(kFloats))];
  }
  Device device() { return below(4) == 0 ? Device("cpu:1") : octo::kCPU; }
  double real() {
    static constexpr double kValues[] = {0.0,
                                         1.0,
                                         -1.0,
                                         0.5,
                                         2.0,
                                         -0.25,
                                         1e-7,
                                         1e30,
                                         -1e30,
                                         std::numeric_limits<double>::infinity(),
                                         std::numeric_limits<double>::quiet_NaN(),
                                         0.1};
    return kValues[below(std::size(kValues))];
  }

 private:
  const uint8_t* p_;
  size_t n_;
};

constexpr size_t kPoolSize = 8;
constexpr int64_t kMaxElements = 1 << 16;  // results bigger than this are not kept

/// The rule on every tensor octo hands back: numel matches the sizes, and reading every element
/// (a float64 copy and its sum) stays inside the storage -- ASan reports it if not.
void check_well_formed(const Tensor& t) {
  if (!t.defined()) return;
  int64_t n = 1;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.size(d) < 0) std::abort();
    if (__builtin_mul_overflow(n, t.size(d), &n)) std::abort();
  }
  if (n != t.numel()) std::abort();
  if (n > 0 && n <= kMaxElements) {
    octo::NoGradGuard no_grad;
    (void)t.to(octo::kCPU).to(octo::kFloat64).sum().item<double>();
  }
}

struct Pool {
  std::vector<Tensor> tensors;

  /// A pool member chosen by the program; an undefined tensor while the pool is empty, which
  /// octo must refuse like any other bad argument.
  Tensor pick(Program& p) const {
    if (tensors.empty()) return {};
    return tensors[p.below(static_cast<int64_t>(tensors.size()))];
  }
  void keep(const Tensor& t) {
    check_well_formed(t);
    if (!t.defined() || t.numel() > kMaxElements) return;
    if (tensors.size() < kPoolSize)
      tensors.push_back(t);
    else
      tensors[static_cast<size_t>(t.numel()) % kPoolSize] = t;
  }
  void keep(const std::vector<Tensor>& ts) {
    for (const Tensor& t : ts) keep(t);
  }
};

Tensor make_tensor(Program& p) {
  Shape shape = p.shape();
  DType dtype = p.dtype();
  octo::TensorOptions options{.dtype = dtype, .device = p.device()};
  Tensor t;
  switch (p.below(8)) {
    case 0:
      t = octo::zeros(shape, options);
      break;
    case 1:
      t = octo::full(shape, p.real(), options);
      break;
    case 2:
      t = octo::randn(shape, options);
      break;
    case 3:
      t = octo::rand(shape, options);
      break;
    case 4:
      t = octo::randint(p.integer(), p.integer(), shape, options);
      break;
    case 5:
      t = octo::arange(p.integer(), options);
      break;
    case 6:
      t = octo::eye(p.integer(), p.integer(), options);
      break;
    default:
      t = octo::linspace(p.real(), p.real(), p.integer(), options);
      break;
  }
  if (p.flag() && octo::is_floating(t.dtype())) t.requires_grad_();
  return t;
}

Tensor view_op(Program& p, const Tensor& x) {
  switch (p.below(13)) {
    case 0:
      return x.view(p.shape());
    case 1:
      return x.reshape(p.shape());
    case 2:
      return x.transpose(p.integer(), p.integer());
    case 3:
      return x.permute(p.shape());
    case 4:
      return x.narrow(p.integer(), p.integer(), p.integer());
    case 5: {
      std::optional<int64_t> start, end;
      if (p.flag()) start = p.integer();
      if (p.flag()) end = p.integer();
      return x.slice(p.integer(), start, end, p.integer());
    }
    case 6:
      return x.select(p.integer(), p.integer());
    case 7:
      return x.expand(p.shape());
    case 8:
      return p.flag() ? x.squeeze() : x.squeeze(p.integer());
    case 9:
      return x.unsqueeze(p.integer());
    case 10:
      return x.flatten(p.integer(), p.integer());
    case 11:
      return x.t();
    default:
      return x.contiguous();
  }
}

Tensor unary_op(Program& p, const Tensor& x) {
  switch (p.below(16)) {
    case 0:
      return octo::neg(x);
    case 1:
      return octo::exp(x);
    case 2:
      return octo::log(x);
    case 3:
      return octo::sqrt(x);
    case 4:
      return octo::relu(x);
    case 5:
      return octo::sigmoid(x);
    case 6:
      return octo::tanh(x);
    case 7:
      return octo::gelu(x);
    case 8:
      return octo::pow(x, p.real());
    case 9:
      return octo::affine(x, p.real(), p.real());
    case 10:
      return octo::clamp(x, p.real(), p.real());
    case 11:
      return octo::softplus(x, p.real(), p.real());
    case 12:
      return octo::round(x);
    case 13:
      return octo::logical_not(x);
    case 14:
      return octo::abs(x);
    default:
      return x.to(p.dtype());
  }
}

Tensor binary_op(Program& p, const Tensor& a, const Tensor& b) {
  switch (p.below(10)) {
    case 0:
      return octo::add(a, b, p.real());
    case 1:
      return octo::sub(a, b);
    case 2:
      return octo::mul(a, b);
    case 3:
      return octo::div(a, b);
    case 4:
      return octo::pow(a, b);
    case 5:
      return octo::maximum(a, b);
    case 6:
      return octo::lt(a, b);
    case 7:
      return octo::logical_and(a, b);
    case 8:
      return octo::where(a, b, a);
    default:
      return octo::masked_fill(a, b, p.real());
  }
}

Tensor reduce_op(Program& p, const Tensor& x) {
  switch (p.below(11)) {
    case 0:
      return octo::sum(x);
    case 1:
      return octo::sum(x, p.shape(), p.flag());
    case 2:
      return octo::mean(x, p.shape(), p.flag());
    case 3:
      return octo::prod(x, p.integer(), p.flag());
    case 4:
      return p.flag() ? octo::max(x) : octo::min(x);
    case 5:
      return octo::argmax(x, p.integer(), p.flag());
    case 6:
      return octo::var(x, p.shape(), p.integer(), p.flag());
    case 7:
      return octo::logsumexp(x, p.integer(), p.flag());
    case 8:
      return octo::softmax(x, p.integer());
    case 9:
      return octo::log_softmax(x, p.integer());
    default:
      return octo::sum_to(x, p.shape());
  }
}

Tensor indexing_op(Program& p, Pool& pool, const Tensor& x) {
  switch (p.below(10)) {
    case 0:
      return octo::cat({x, pool.pick(p)}, p.integer());
    case 1:
      return octo::stack({x, pool.pick(p)}, p.integer());
    case 2:
      pool.keep(octo::split(x, p.integer(), p.integer()));
      return {};
    case 3:
      pool.keep(octo::chunk(x, p.integer(), p.integer()));
      return {};
    case 4:
      pool.keep(octo::split_with_sizes(x, p.shape(), p.integer()));
      return {};
    case 5:
      return octo::index_select(x, p.integer(), pool.pick(p));
    case 6:
      return octo::gather(x, p.integer(), pool.pick(p));
    case 7:
      return octo::scatter_add(x, p.integer(), pool.pick(p), pool.pick(p));
    case 8:
      return octo::embedding(x, pool.pick(p));
    default:
      return octo::one_hot(x, p.integer());
  }
}

Tensor nn_op(Program& p, Pool& pool, const Tensor& x) {
  switch (p.below(14)) {
    case 0:
      return octo::matmul(x, pool.pick(p));
    case 1:
      return octo::bmm(x, pool.pick(p));
    case 2:
      return octo::linear(x, pool.pick(p), p.flag() ? pool.pick(p) : Tensor{});
    case 3:
      return octo::conv2d(x, pool.pick(p), p.flag() ? pool.pick(p) : Tensor{}, p.pair(), p.pair(),
                          p.pair(), p.integer());
    case 4:
      return octo::max_pool2d(x, p.pair(), p.pair(), p.pair(), p.pair(), p.flag());
    case 5:
      return octo::avg_pool2d(x, p.pair(), p.pair(), p.pair(), p.flag(), p.flag());
    case 6:
      return octo::adaptive_avg_pool2d(x, p.pair());
    case 7: {
      bool relu = p.flag();
      Tensor mean = pool.pick(p), var = pool.pick(p), w = pool.pick(p), b = pool.pick(p);
      bool training = p.flag();
      double momentum = p.real(), eps = p.real();
      return relu ? octo::batch_norm_relu(x, mean, var, w, b, training, momentum, eps)
                  : octo::batch_norm(x, mean, var, w, b, training, momentum, eps);
    }
    case 8:
      return octo::layer_norm(x, p.shape(), p.flag() ? pool.pick(p) : Tensor{},
                              p.flag() ? pool.pick(p) : Tensor{}, p.real());
    case 9:
      return octo::dropout(x, p.real(), p.flag());
    case 10: {
      Tensor target = pool.pick(p);
      F::CrossEntropyOptions options;
      if (p.flag()) options.weight = pool.pick(p);
      options.ignore_index = p.integer();
      static const char* const kReductions[] = {"mean", "sum", "none", "average"};
      options.reduction = kReductions[p.below(4)];
      options.label_smoothing = p.real();
      return F::cross_entropy(x, target, options);
    }
    case 11:
      return octo::cross_entropy_per_sample(x, pool.pick(p), {}, p.integer(), p.real());
    case 12:
      return F::mse_loss(x, pool.pick(p));
    default:
      return F::nll_loss(x, pool.pick(p));
  }
}

void inplace_op(Program& p, Pool& pool, const Tensor& x) {
  switch (p.below(4)) {
    case 0:
      x.copy_(pool.pick(p));
      break;
    case 1:
      x.fill_(p.real());
      break;
    case 2:
      x.add_(pool.pick(p), p.real());
      break;
    default:
      x.mul_(p.real());
      break;
  }
}

std::vector<Device> devices(Program& p) {
  std::vector<Device> ds;
  int64_t n = p.below(4);
  for (int64_t i = 0; i < n; ++i) ds.push_back(p.device());
  return ds;
}

Tensor device_op(Program& p, Pool& pool, const Tensor& x) {
  switch (p.below(4)) {
    case 0:
      return x.to(p.device(), p.floating());
    case 1:
      pool.keep(comm::scatter(x, devices(p), std::nullopt, p.integer()));
      return {};
    case 2:
      return comm::gather({x, pool.pick(p)}, p.device(), p.integer());
    default:
      return comm::reduce_add({x, pool.pick(p)}, p.device());
  }
}

/// One step of the program; an octo::Error refuses it and the program goes on.
void step(Program& p, Pool& pool) {
  uint8_t op = p.byte();
  if (op % 8 == 0 || pool.tensors.empty()) {
    pool.keep(make_tensor(p));
    return;
  }
  Tensor x = pool.pick(p);
  switch (op % 8) {
    case 1:
      pool.keep(view_op(p, x));
      break;
    case 2:
      pool.keep(unary_op(p, x));
      break;
    case 3:
      pool.keep(binary_op(p, x, pool.pick(p)));
      break;
    case 4:
      pool.keep(reduce_op(p, x));
      break;
    case 5:
      pool.keep(p.flag() ? indexing_op(p, pool, x) : device_op(p, pool, x));
      break;
    case 6:
      pool.keep(nn_op(p, pool, x));
      break;
    default:
      inplace_op(p, pool, x);
      check_well_formed(x);
      break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Program p(data, size);
  Pool pool;
  std::optional<octo::autocast> amp;
  if (p.byte() % 4 == 0) amp.emplace(p.flag() ? octo::kBFloat16 : octo::kFloat16);
  for (int steps = 0; steps < 48 && !p.done(); ++steps) fuzz::expect_clean([&] { step(p, pool); });
  amp.reset();
  for (const Tensor& t : pool.tensors) {
    fuzz::expect_clean([&] {
      if (!t.requires_grad()) return;
      Tensor loss = octo::sum(t);
      if (p.flag()) loss = octo::mul(loss, loss);
      loss.backward();
    });
  }
  return 0;
}
