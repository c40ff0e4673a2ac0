// bfloat16 products through oneDNN's matmul primitive (Note [oneDNN bf16 matmul]).
#include "kernels/cpu/matmul_dnnl.h"

#include "octo_config.h"

#if OCTO_WITH_DNNL

#include <oneapi/dnnl/dnnl.hpp>

#include <compare>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "core/error.h"
#include "core/threads.h"
#include "kernels/cpu/omp_threads.h"

namespace octo::kernels::cpu {

// Note [oneDNN bf16 matmul]: oneDNN 2.6's C API has a float32 GEMM (dnnl_sgemm, Note [oneDNN
// SGEMM]) but none for bfloat16, so bfloat16 products -- what autocast makes of linear, matmul and
// bmm -- run on its matmul primitive: bfloat16 operands, float32 accumulation, alpha as an output
// scale and beta as a sum post-op, each output rounded to bfloat16 once, the promise of Note
// [16-bit kernels]. On a CPU with AVX512-BF16 or AMX its kernels use the 16-bit dot-product
// instructions. Operands stay where they are: each is described by its own strides (row-major,
// or transposed views such as a weight's .t()), and a stride-0 batch dim is oneDNN's
// broadcast. A primitive is built once per shape, strides, scalars and thread count and kept.
// Where oneDNN offers only its reference implementation (slow by design) or none, the product
// stages through float32 as before, so the choice never costs speed.

namespace {

using dnnl::memory;
using Dims = memory::dims;

const dnnl::engine& engine() {
  static const dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

struct Key {
  int64_t batch_a, batch_b, batch, m, n, k;
  int64_t sa[3], sb[3], sc[3];
  double alpha, beta;
  int threads;
  auto operator<=>(const Key&) const = default;
};

struct Entry {
  dnnl::matmul primitive;
  memory::desc a, b, c, scratchpad;
};

std::shared_ptr<Entry> build(const Key& key) {
  const auto bf16 = memory::data_type::bf16;
  const memory::desc a({key.batch_a, key.m, key.k}, bf16, Dims{key.sa[0], key.sa[1], key.sa[2]});
  const memory::desc b({key.batch_b, key.k, key.n}, bf16, Dims{key.sb[0], key.sb[1], key.sb[2]});
  const memory::desc c({key.batch, key.m, key.n}, bf16, Dims{key.sc[0], key.sc[1], key.sc[2]});
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);  // per execution: workers may overlap
  if (key.alpha != 1.0) attr.set_output_scales(0, {static_cast<float>(key.alpha)});
  if (key.beta != 0.0) {
    dnnl::post_ops ops;
    ops.append_sum(static_cast<float>(key.beta));
    attr.set_post_ops(ops);
  }
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), attr, engine());
  const std::string impl = pd.impl_info_str();
  if (impl.find("ref") != std::string::npos) return nullptr;  // staging is faster
  auto e = std::make_shared<Entry>();
  e->primitive = dnnl::matmul(pd);
  e->a = a, e->b = b, e->c = c, e->scratchpad = pd.scratchpad_desc();
  return e;
}

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
    e = nullptr;  // no implementation: staged through float32
  }
  // Workloads have a handful of product shapes; one whose shapes never repeat must not grow
  // the cache without bound (entries in use are shared_ptrs and outlive a clear).
  if (cache.size() >= 1024) cache.clear();
  cache.emplace(key, e);
  return e;
}

/// One operand's strides for oneDNN: its own, with a stride-0 batch of more than one matrix
/// described as a batch of one (oneDNN broadcasts it) and size-1 dims given a stride that keeps
/// the layout plain. False when the matrix dims have no unit stride (oneDNN needs one).
bool operand_strides(const TensorArg& t, bool output, int64_t* batch, int64_t (&s)[3]) {
  const int64_t rows = t.sizes[1], cols = t.sizes[2];
  s[1] = rows == 1 ? cols : t.strides[1];
  s[2] = cols == 1 ? 1 : t.strides[2];
  if (rows == 1 && cols == 1) s[1] = 1;
  if (!(s[2] == 1 || s[1] == 1) || s[1] <= 0 || s[2] <= 0) return false;
  if (t.sizes[0] > 1 && t.strides[0] == 0) {
    if (output) return false;
    *batch = 1;
  } else {
    *batch = t.sizes[0];
  }
  s[0] = *batch == 1 ? rows * cols : t.strides[0];
  return s[0] > 0;
}

}  // namespace

bool dnnl_bmm_bf16(const TensorArg& out, const TensorArg& a, const TensorArg& b, double alpha,
                   double beta) {
  if (out.dtype != kBFloat16 || a.dtype != kBFloat16 || b.dtype != kBFloat16) return false;
  if (out.ndim != 3 || a.ndim != 3 || b.ndim != 3) return false;
  Key key{};
  key.m = out.sizes[1], key.n = out.sizes[2], key.k = a.sizes[2];
  if (out.numel() == 0 || key.k == 0) return false;
  if (!operand_strides(a, false, &key.batch_a, key.sa) ||
      !operand_strides(b, false, &key.batch_b, key.sb) ||
      !operand_strides(out, true, &key.batch, key.sc))
    return false;
  key.alpha = alpha, key.beta = beta;
  key.threads = get_num_threads();
  // Built and run under the same OpenMP thread count (oneDNN sizes its work split by it).
  OmpThreadsGuard threads(key.threads);
  std::shared_ptr<Entry> e = primitive_for(key);
  if (!e) return false;
  try {
    thread_local dnnl::stream stream(engine());
    thread_local std::vector<char> scratch;
    if (scratch.size() < e->scratchpad.get_size()) scratch.resize(e->scratchpad.get_size());
    std::unordered_map<int, memory> args = {
        {DNNL_ARG_SRC, memory(e->a, engine(), a.data)},
        {DNNL_ARG_WEIGHTS, memory(e->b, engine(), b.data)},
        {DNNL_ARG_DST, memory(e->c, engine(), out.data)},
        {DNNL_ARG_SCRATCHPAD, memory(e->scratchpad, engine(), scratch.data())}};
    e->primitive.execute(stream, args);
    stream.wait();
  } catch (const dnnl::error& err) {
    OCTO_THROW(Error, "matmul: oneDNN failed (status ", static_cast<int>(err.status), ") for [",
               key.m, ", ", key.k, "] @ [", key.k, ", ", key.n, "] in bfloat16: ", err.what());
  }
  return true;
}

}  // namespace octo::kernels::cpu

#else  // built without oneDNN: bfloat16 products stage through float32

namespace octo::kernels::cpu {
bool dnnl_bmm_bf16(const TensorArg&, const TensorArg&, const TensorArg&, double, double) {
  return false;
}
}  // namespace octo::kernels::cpu

#endif
