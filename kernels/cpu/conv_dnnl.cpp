// conv2d forward and backward through oneDNN's convolution primitives (Note [oneDNN convolution]).
#include "kernels/cpu/conv_dnnl.h"

#include "octo_config.h"

#if OCTO_WITH_DNNL

#include <oneapi/dnnl/dnnl.hpp>

#include <compare>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "core/threads.h"
#include "kernels/cpu/omp_threads.h"

namespace octo::kernels::cpu {

// Note [oneDNN convolution]: float32 and bfloat16 convolutions (forward, and both backward
// passes) run on oneDNN's primitives when octo is built with oneDNN: its JIT kernels reach
// 2-3x the GFLOP/s of im2col + GEMM on the small channel counts of the examples' networks
// (docs/benchmarks.md), and on CPUs with AVX512-BF16 or AMX a bfloat16 convolution runs on the
// 16-bit dot-product instructions, accumulating in float32 and rounding each output once, the
// rounding Note [16-bit kernels] promises. Tensors stay in octo's NCHW / OIHW layouts;
// oneDNN picks its own blocked layouts (format_tag::any) and each call reorders into and out of
// them, as PyTorch does for plain tensors. A primitive is built once per shape, dtype and thread
// count and kept (oneDNN JIT-compiles it); executing one from several threads at once is safe.
// float64, other layouts, and shapes oneDNN has no implementation for fall back to conv.cpp's
// im2col kernels.

namespace {

using dnnl::memory;
using Dims = memory::dims;

const dnnl::engine& engine() {
  static const dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

enum class Pass { kForward, kBackwardData, kBackwardWeights };

/// Everything a primitive depends on.
struct Key {
  Pass pass;
  int64_t n, c, h, w, k, kh, kw, oh, ow, groups;
  int64_t stride[2], padding[2], dilation[2];
  DType dtype, bias_dtype;  // bias_dtype: kBool when there is no bias
  int threads;
  auto operator<=>(const Key&) const = default;
};

/// A primitive with its three operands' layouts -- octo's (`user`) and the ones it chose -- in
/// the order each pass takes them (forward: src, weights, dst; backward data: diff_dst, weights,
/// diff_src; backward weights: src, diff_dst, diff_weights).
struct Entry {
  dnnl::primitive primitive;
  memory::desc user[3], operand[3];
  memory::desc bias;        // octo's [K] bias, forward only (empty: none)
  memory::desc scratchpad;  // the caller provides it (scratchpad_mode::user), per execution
};

bool supported(DType t) { return t == kFloat32 || t == kBFloat16; }
memory::data_type to_dnnl(DType t) {
  return t == kBFloat16 ? memory::data_type::bf16 : memory::data_type::f32;
}

struct Shapes {
  memory::desc src, weights, dst;  // octo's layouts, in the key's dtype
  Dims strides, dilates, padding;
};

Shapes shapes_of(const Key& key) {
  const memory::data_type t = to_dnnl(key.dtype);
  Shapes s;
  s.src = memory::desc({key.n, key.c, key.h, key.w}, t, memory::format_tag::nchw);
  s.dst = memory::desc({key.n, key.k, key.oh, key.ow}, t, memory::format_tag::nchw);
  s.weights =
      key.groups == 1
          ? memory::desc({key.k, key.c, key.kh, key.kw}, t, memory::format_tag::oihw)
          : memory::desc({key.groups, key.k / key.groups, key.c / key.groups, key.kh, key.kw}, t,
                         memory::format_tag::goihw);
  s.strides = {key.stride[0], key.stride[1]};
  s.dilates = {key.dilation[0] - 1, key.dilation[1] - 1};  // oneDNN counts the gaps
  s.padding = {key.padding[0], key.padding[1]};
  return s;
}

/// The same shape with format_tag::any: oneDNN chooses the layout.
memory::desc any(const memory::desc& md) {
  return memory::desc(md.dims(), md.data_type(), memory::format_tag::any);
}

std::shared_ptr<Entry> build(const Key& key) {
  const Shapes s = shapes_of(key);
  const auto algo = dnnl::algorithm::convolution_direct;
  const memory::desc bias = key.bias_dtype == kBool ? memory::desc()
                                                    : memory::desc({key.k}, to_dnnl(key.bias_dtype),
                                                                   memory::format_tag::x);
  dnnl::convolution_forward::desc fwd_desc(dnnl::prop_kind::forward_training, algo, any(s.src),
                                           any(s.weights), bias, any(s.dst), s.strides, s.dilates,
                                           s.padding, s.padding);
  // A scratchpad of the caller's, not the library's, so that device workers may run
  // primitives at the same time.
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  dnnl::convolution_forward::primitive_desc fwd(fwd_desc, attr, engine());
  auto e = std::make_shared<Entry>();
  auto fill = [&](dnnl::primitive prim, const memory::desc(&user)[3],
                  const memory::desc(&chosen)[3], const memory::desc& scratchpad) {
    e->primitive = std::move(prim);
    for (int i = 0; i < 3; ++i) e->user[i] = user[i], e->operand[i] = chosen[i];
    e->scratchpad = scratchpad;
  };
  switch (key.pass) {
    case Pass::kForward:
      fill(dnnl::convolution_forward(fwd), {s.src, s.weights, s.dst},
           {fwd.src_desc(), fwd.weights_desc(), fwd.dst_desc()}, fwd.scratchpad_desc());
      e->bias = bias;
      break;
    case Pass::kBackwardData: {
      dnnl::convolution_backward_data::desc d(algo, any(s.src), any(s.weights), any(s.dst),
                                              s.strides, s.dilates, s.padding, s.padding);
      dnnl::convolution_backward_data::primitive_desc pd(d, attr, engine(), fwd);
      fill(dnnl::convolution_backward_data(pd), {s.dst, s.weights, s.src},
           {pd.diff_dst_desc(), pd.weights_desc(), pd.diff_src_desc()}, pd.scratchpad_desc());
      break;
    }
    case Pass::kBackwardWeights: {
      dnnl::convolution_backward_weights::desc d(algo, any(s.src), any(s.weights), any(s.dst),
                                                 s.strides, s.dilates, s.padding, s.padding);
      dnnl::convolution_backward_weights::primitive_desc pd(d, attr, engine(), fwd);
      fill(dnnl::convolution_backward_weights(pd), {s.src, s.dst, s.weights},
           {pd.src_desc(), pd.diff_dst_desc(), pd.diff_weights_desc()}, pd.scratchpad_desc());
      break;
    }
  }
  return e;
}

/// The cached primitive for `key`, or null when oneDNN has none (remembered, so a shape it
/// cannot take costs one attempt).
std::shared_ptr<Entry> primitive_for(const Key& key) {
  static std::mutex mutex;
  static std::map<Key, std::shared_ptr<Entry>> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  std::shared_ptr<Entry> e;
  try {
    e = build(key);
  } catch (const dnnl::error&) {
    e = nullptr;  // no implementation: conv.cpp's kernels take this shape
  }
  cache.emplace(key, e);
  return e;
}

Key key_of(Pass pass, const TensorArg& input, const TensorArg& weight, const TensorArg& out,
           const TensorArg& bias, const Conv2dParams& p) {
  return Key{pass,
             input.sizes[0],
             input.sizes[1],
             input.sizes[2],
             input.sizes[3],
             weight.sizes[0],
             weight.sizes[2],
             weight.sizes[3],
             out.sizes[2],
             out.sizes[3],
             p.groups,
             {p.stride[0], p.stride[1]},
             {p.padding[0], p.padding[1]},
             {p.dilation[0], p.dilation[1]},
             input.dtype,
             bias.defined() ? bias.dtype : kBool,
             get_num_threads()};
}

/// Whether oneDNN can take these tensors: float32 or bfloat16 alike, contiguous, non-empty.
bool eligible(std::initializer_list<const TensorArg*> args) {
  const DType t = (*args.begin())->dtype;
  if (!supported(t)) return false;
  for (const TensorArg* a : args) {
    if (!a->defined()) continue;
    if (a->dtype != t && a->ndim != 1) return false;  // a bias may be float32 beside bfloat16
    if (!supported(a->dtype) || !a->is_contiguous() || a->numel() == 0) return false;
  }
  return true;
}

/// One operand of an execution: octo's tensor, and the layout the primitive wants.
class Operand {
 public:
  Operand(const memory::desc& user, const memory::desc& chosen, void* data, bool output,
          dnnl::stream& stream)
      : user_(user, engine(), data), output_(output), stream_(stream) {
    if (chosen == user) {
      mem_ = user_;
    } else {
      mem_ = memory(chosen, engine());
      if (!output_) dnnl::reorder(user_, mem_).execute(stream_, user_, mem_);
    }
  }
  const memory& get() const { return mem_; }
  /// Writes an output back into octo's layout.
  void finish() {
    if (output_ && mem_ != user_) dnnl::reorder(mem_, user_).execute(stream_, mem_, user_);
  }

 private:
  memory user_, mem_;
  bool output_;
  dnnl::stream& stream_;
};

/// Runs the pass with operands a, b (inputs) and c (the output), in Entry's order.
bool run(const Key& key, const TensorArg& a, const TensorArg& b, const TensorArg& c, int arg_a,
         int arg_b, int arg_c, const TensorArg* bias = nullptr) {
  // oneDNN sizes a primitive's work split by the thread count it is built under, so it is built
  // and run under the same count, the key's.
  OmpThreadsGuard threads(key.threads);
  std::shared_ptr<Entry> e = primitive_for(key);
  if (!e) return false;
  try {
    thread_local dnnl::stream stream(engine());
    Operand oa(e->user[0], e->operand[0], a.data, false, stream);
    Operand ob(e->user[1], e->operand[1], b.data, false, stream);
    Operand oc(e->user[2], e->operand[2], c.data, true, stream);
    std::unordered_map<int, memory> args = {
        {arg_a, oa.get()}, {arg_b, ob.get()}, {arg_c, oc.get()}};
    thread_local std::vector<char> scratch;
    if (scratch.size() < e->scratchpad.get_size()) scratch.resize(e->scratchpad.get_size());
    args.emplace(DNNL_ARG_SCRATCHPAD, memory(e->scratchpad, engine(), scratch.data()));
    if (bias && bias->defined()) args.emplace(DNNL_ARG_BIAS, memory(e->bias, engine(), bias->data));
    e->primitive.execute(stream, args);
    oc.finish();
    stream.wait();
  } catch (const dnnl::error& err) {
    OCTO_THROW(Error, "conv2d: oneDNN failed (status ", static_cast<int>(err.status),
               "): ", err.what());
  }
  return true;
}

}  // namespace

bool dnnl_conv2d_forward(const TensorArg& out, const TensorArg& input, const TensorArg& weight,
                         const TensorArg& bias, const Conv2dParams& p) {
  if (!eligible({&input, &weight, &out, &bias})) return false;
  const Key key = key_of(Pass::kForward, input, weight, out, bias, p);
  return run(key, input, weight, out, DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST, &bias);
}

bool dnnl_conv2d_backward_input(const TensorArg& grad_input, const TensorArg& grad_out,
                                const TensorArg& weight, const Conv2dParams& p) {
  if (!eligible({&grad_input, &grad_out, &weight})) return false;
  const Key key = key_of(Pass::kBackwardData, grad_input, weight, grad_out, TensorArg(), p);
  return run(key, grad_out, weight, grad_input, DNNL_ARG_DIFF_DST, DNNL_ARG_WEIGHTS,
             DNNL_ARG_DIFF_SRC);
}

bool dnnl_conv2d_backward_weight(const TensorArg& grad_weight, const TensorArg& grad_out,
                                 const TensorArg& input, const Conv2dParams& p) {
  if (!eligible({&input, &grad_out, &grad_weight})) return false;
  const Key key = key_of(Pass::kBackwardWeights, input, grad_weight, grad_out, TensorArg(), p);
  return run(key, input, grad_out, grad_weight, DNNL_ARG_SRC, DNNL_ARG_DIFF_DST,
             DNNL_ARG_DIFF_WEIGHTS);
}

}  // namespace octo::kernels::cpu

#else  // built without oneDNN: conv.cpp's kernels take every call

namespace octo::kernels::cpu {
bool dnnl_conv2d_forward(const TensorArg&, const TensorArg&, const TensorArg&, const TensorArg&,
                         const Conv2dParams&) {
  return false;
}
bool dnnl_conv2d_backward_input(const TensorArg&, const TensorArg&, const TensorArg&,
                                const Conv2dParams&) {
  return false;
}
bool dnnl_conv2d_backward_weight(const TensorArg&, const TensorArg&, const TensorArg&,
                                 const Conv2dParams&) {
  return false;
}
}  // namespace octo::kernels::cpu

#endif
