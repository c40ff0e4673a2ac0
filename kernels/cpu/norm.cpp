// CPU batch-norm forward and backward over [N, C, *] inputs of any strides, one channel per task.
//
// Statistics are accumulated in double (two passes: mean, then centred sum of squares), so float32
// inputs get the same mean/variance as a float64 reference up to the final rounding. Channels are
// independent, so the work is split across threads by channel. Every tensor is read through its
// own strides, so views and expanded (stride-0) gradients need no copy: the loops are compiled
// for unit-stride planes, single-stride planes and, for any other view, a table of offsets.
#include <bit>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/threads.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/loops.h"
#include "kernels/float32_staging.h"

namespace octo::kernels {

namespace {

/// Where the elements of a [N, C, *] tensor are: offset(n, c, s) = n * sn + c * sc + plane(s),
/// where s is the row-major index over the spatial dims (those after C).
struct PlaneLayout {
  int64_t sn = 0, sc = 0;
  int64_t plane_stride = 1;    // plane(s) = s * plane_stride, or -1 when the dims do not collapse
  std::vector<int64_t> table;  // plane(s) for every s; built only when plane_stride == -1
  const TensorArg* arg;

  explicit PlaneLayout(const TensorArg& t) : sn(t.strides[0]), sc(t.strides[1]), arg(&t) {
    // Spatial dims collapse to one stride when each (size > 1) dim steps over the next one.
    int64_t expected = -1;  // stride the next-outer dim must have, once one dim was seen
    for (int d = t.ndim - 1; d >= 2; --d) {
      if (t.sizes[d] == 1) continue;
      if (expected == -1) {
        plane_stride = t.strides[d];
      } else if (t.strides[d] != expected) {
        plane_stride = -1;
        break;
      }
      expected = t.strides[d] * t.sizes[d];
    }
  }
  void build_table() {
    const TensorArg& t = *arg;
    int64_t count = 1;
    for (int d = 2; d < t.ndim; ++d) count *= t.sizes[d];
    table.resize(static_cast<size_t>(count));
    int64_t idx[kMaxDims] = {};
    int64_t off = 0;
    for (int64_t s = 0; s < count; ++s) {
      table[static_cast<size_t>(s)] = off;
      for (int d = t.ndim - 1; d >= 2; --d) {  // increment the multi-index over dims 2..
        off += t.strides[d];
        if (++idx[d] < t.sizes[d]) break;
        off -= idx[d] * t.strides[d];
        idx[d] = 0;
      }
    }
  }
};

// The three ways of finding element s of a plane, from fastest to most general.
struct ContiguousPlane {
  explicit ContiguousPlane(const PlaneLayout&) {}
  int64_t operator()(int64_t s) const { return s; }
};
struct StridedPlane {
  int64_t st;
  explicit StridedPlane(const PlaneLayout& l) : st(l.plane_stride) {}
  int64_t operator()(int64_t s) const { return s * st; }
};
struct TablePlane {
  const int64_t* t;
  explicit TablePlane(const PlaneLayout& l) : t(l.table.data()) {}
  int64_t operator()(int64_t s) const { return t[s]; }
};

template <typename Plane>
struct Indexer {
  int64_t sn, sc;
  Plane plane;
  explicit Indexer(const PlaneLayout& l) : sn(l.sn), sc(l.sc), plane(l) {}
  int64_t at(int64_t n, int64_t c, int64_t s) const { return n * sn + c * sc + plane(s); }
};

/// Calls fn(Indexer...) with one indexer per layout, all of the fastest kind they all allow, so
/// the common contiguous case compiles to unit-stride loops.
template <typename Fn, typename... L>
void with_indexers(Fn fn, L&... layouts) {
  if (((layouts.plane_stride == 1) && ...)) {
    fn(Indexer<ContiguousPlane>(layouts)...);
  } else if (((layouts.plane_stride != -1) && ...)) {
    fn(Indexer<StridedPlane>(layouts)...);
  } else {
    (layouts.build_table(), ...);
    fn(Indexer<TablePlane>(layouts)...);
  }
}

/// Element c of a 1-d [C] tensor, or `fallback` when the tensor is undefined.
template <typename T>
double param(const TensorArg& t, int64_t c, double fallback) {
  if (!t.defined()) return fallback;
  return static_cast<double>(t.data_as<T>()[c * t.strides[0]]);
}

template <typename T>
void set_param(const TensorArg& t, int64_t c, double v) {
  if (t.defined()) t.data_as<T>()[c * t.strides[0]] = static_cast<T>(v);
}

/// lane_sum's eight partial sums and its tail, added in its fixed order.
inline double fold_lanes(const double (&acc)[8], double tail) {
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail;
}

/// The sum over s < S of f(s) in double, kept in 8 interleaved partial sums that are added in a
/// fixed order at the end. One running sum is a chain of dependent adds (the compiler may not
/// reorder them); eight independent ones become vector adds. Deterministic for a given S.
template <typename F>
double lane_sum(int64_t S, F f) {
  double acc[8] = {};
  int64_t s = 0;
  for (; s + 8 <= S; s += 8)
    for (int k = 0; k < 8; ++k) acc[k] += f(s + k);
  double tail = 0.0;
  for (; s < S; ++s) tail += f(s);
  return fold_lanes(acc, tail);
}

/// Two lane_sums in one pass over the data: f(s) returns both terms, and each sum is added in
/// exactly lane_sum's order, so the results are lane_sum's bit for bit.
template <typename F>
std::pair<double, double> lane_sum2(int64_t S, F f) {
  double a[8] = {}, b[8] = {};
  int64_t s = 0;
  for (; s + 8 <= S; s += 8) {
    for (int k = 0; k < 8; ++k) {
      const auto [x, y] = f(s + k);
      a[k] += x;
      b[k] += y;
    }
  }
  double ta = 0.0, tb = 0.0;
  for (; s < S; ++s) {
    const auto [x, y] = f(s);
    ta += x;
    tb += y;
  }
  return {fold_lanes(a, ta), fold_lanes(b, tb)};
}

/// Grain for parallel_for over channels: at least ~kGrain elements of work per chunk.
int64_t channel_grain(int64_t per_channel) {
  return std::max<int64_t>(1, cpu::kGrain / std::max<int64_t>(per_channel, 1));
}

int64_t spatial_numel(const TensorArg& t) {
  int64_t n = 1;
  for (int d = 2; d < t.ndim; ++d) n *= t.sizes[d];
  return n;
}

void check_layout(const TensorArg& input, const TensorArg& other) {
  OCTO_INTERNAL_ASSERT(input.ndim >= 2 && other.ndim == input.ndim);
  for (int d = 0; d < input.ndim; ++d) OCTO_INTERNAL_ASSERT(other.sizes[d] == input.sizes[d]);
}

/// A double result stored as data of dtype T: through float for the 16-bit types, which is the
/// rounding the float32 kernel plus staging gives (double -> float32 -> 16 bits).
template <typename T>
T to_data(double v) {
  if constexpr (kIsHalfType<T>)
    return T(static_cast<float>(v));
  else
    return static_cast<T>(v);
}

/// v where keep, else +0.0, without a branch: a data-dependent branch on relu's mask mispredicts
/// about half the time on real activations (measured: a 10x slower backward).
inline double keep_or_zero(double v, bool keep) {
  return std::bit_cast<double>(std::bit_cast<uint64_t>(v) & (uint64_t{0} - uint64_t{keep}));
}

/// Relu of a stored output as the Relu kernel applies it (kernels/functors.h): a negative value
/// becomes +0, anything else (zeros of either sign, NaN) is kept. Applied after the rounding to
/// T, so the fused forward writes the bits of batch_norm followed by relu.
template <typename T>
T relu_data(T v) {
  return static_cast<double>(v) < 0.0 ? to_data<T>(0.0) : v;
}

// Note [16-bit batch norm]: under autocast a BatchNorm2d sees 16-bit activations beside float32
// weight, bias and running statistics. That case runs natively: the loops read the 16-bit data
// (widening is exact), compute in double as for float32, and round each output through float32,
// which are the bits Float32Staging would give, without its copies. Any other mix of 16-bit
// tensors (16-bit parameters, say) stages (Note [16-bit kernels]).
/// `data`'s first tensor is the input, always defined.
bool native_16bit(std::initializer_list<const TensorArg*> data,
                  std::initializer_list<const TensorArg*> params) {
  const DType t = (*data.begin())->dtype;
  if (!is_half(t)) return false;
  for (const TensorArg* a : data)
    if (a->defined() && a->dtype != t) return false;
  for (const TensorArg* a : params)
    if (a->defined() && a->dtype != kFloat32) return false;
  return true;
}

/// The forward for data of dtype T and per-channel parameters and statistics of dtype P (T
/// itself, or float32 beside 16-bit data: Note [16-bit batch norm]); kRelu relu's each output
/// (Note [Fused batch norm + ReLU] in autograd/ops/norm.cpp).
template <typename T, typename P, bool kRelu>
void forward_impl(const TensorArg& out, const TensorArg& save_mean, const TensorArg& save_invstd,
                  const TensorArg& input, const TensorArg& weight, const TensorArg& bias,
                  const TensorArg& running_mean, const TensorArg& running_var, bool training,
                  double momentum, double eps) {
  const int64_t N = input.sizes[0], C = input.sizes[1];
  const int64_t S = spatial_numel(input);
  const int64_t count = N * S;  // values per channel
  PlaneLayout in_layout(input), out_layout(out);
  const T* x = input.data_as<T>();
  T* y = out.data_as<T>();
  with_indexers(
      [&](auto xi, auto yi) {
        parallel_for(0, C, channel_grain(count), [&](int64_t c0, int64_t c1) {
          for (int64_t c = c0; c < c1; ++c) {
            double mean = 0.0, invstd = 0.0;
            if (training) {
              if (count == 0) {  // nothing to normalise; running stats stay as they are
                set_param<P>(save_mean, c, 0.0);
                set_param<P>(save_invstd, c, 0.0);
                continue;
              }
              double sum = 0.0;
              for (int64_t n = 0; n < N; ++n)
                sum += lane_sum(S, [&](int64_t s) { return double(x[xi.at(n, c, s)]); });
              mean = sum / static_cast<double>(count);
              double sq = 0.0;
              for (int64_t n = 0; n < N; ++n)
                sq += lane_sum(S, [&](int64_t s) {
                  const double d = static_cast<double>(x[xi.at(n, c, s)]) - mean;
                  return d * d;
                });
              const double var = sq / static_cast<double>(count);  // biased: used to normalise
              invstd = 1.0 / std::sqrt(var + eps);
              set_param<P>(save_mean, c, mean);
              set_param<P>(save_invstd, c, invstd);
              // PyTorch's rule: running = (1 - momentum) * running + momentum * batch statistic,
              // with the unbiased variance (count / (count - 1)).
              if (running_mean.defined()) {
                const double rm = param<P>(running_mean, c, 0.0);
                set_param<P>(running_mean, c, momentum * mean + (1.0 - momentum) * rm);
              }
              if (running_var.defined()) {
                const double rv = param<P>(running_var, c, 0.0);
                const double unbiased = sq / static_cast<double>(count - 1);
                set_param<P>(running_var, c, momentum * unbiased + (1.0 - momentum) * rv);
              }
            } else {
              mean = param<P>(running_mean, c, 0.0);
              invstd = 1.0 / std::sqrt(param<P>(running_var, c, 1.0) + eps);
            }
            // y = (x - mean) * (invstd * w) + b; centring first keeps precision when |mean| >>
            // std.
            const double scale = invstd * param<P>(weight, c, 1.0);
            const double shift = param<P>(bias, c, 0.0);
            for (int64_t n = 0; n < N; ++n)
              for (int64_t s = 0; s < S; ++s) {
                const T v =
                    to_data<T>((static_cast<double>(x[xi.at(n, c, s)]) - mean) * scale + shift);
                y[yi.at(n, c, s)] = kRelu ? relu_data(v) : v;
              }
          }
        });
      },
      in_layout, out_layout);
}

/// The backward for data of dtype T and parameters and saved statistics of dtype P. kRelu: the
/// gradient is grad_out masked by relu's backward on `output` (the fused forward's result); the
/// mask is ReluBackward's (kernels/functors.h), so the sums see exactly the composite's values.
template <typename T, typename P, bool kRelu>
void backward_impl(const TensorArg& grad_input, const TensorArg& grad_weight,
                   const TensorArg& grad_bias, const TensorArg& grad_out, const TensorArg& output,
                   const TensorArg& input, const TensorArg& weight, const TensorArg& save_mean,
                   const TensorArg& save_invstd) {
  const bool want_gi = grad_input.defined() && grad_input.numel() > 0;
  const int64_t N = input.sizes[0], C = input.sizes[1];
  const int64_t S = spatial_numel(input);
  const int64_t count = N * S;
  PlaneLayout in_layout(input), go_layout(grad_out), gi_layout(want_gi ? grad_input : input),
      y_layout(kRelu ? output : input);
  const T* x = input.data_as<T>();
  const T* g = grad_out.data_as<T>();
  const T* y = kRelu ? output.data_as<T>() : nullptr;
  T* gi = want_gi ? grad_input.data_as<T>() : nullptr;
  with_indexers(
      [&](auto xi, auto goi, auto gii, auto yi) {
        // The incoming gradient at (n, c, s), masked where relu's output is not positive.
        auto grad = [&](int64_t n, int64_t c, int64_t s) {
          const double gv = static_cast<double>(g[goi.at(n, c, s)]);
          if constexpr (kRelu)
            return keep_or_zero(gv, static_cast<double>(y[yi.at(n, c, s)]) > 0.0);
          return gv;
        };
        parallel_for(0, C, channel_grain(count), [&](int64_t c0, int64_t c1) {
          for (int64_t c = c0; c < c1; ++c) {
            const double mean = param<P>(save_mean, c, 0.0);
            const double invstd = param<P>(save_invstd, c, 0.0);
            // sum(g) and sum(g * xhat), xhat = (x - mean) * invstd
            double sum_g = 0.0, sum_gx = 0.0;
            for (int64_t n = 0; n < N; ++n) {
              const auto [g_sum, gx_sum] = lane_sum2(S, [&](int64_t s) {
                const double gv = grad(n, c, s);
                return std::pair<double, double>(gv, gv * (double(x[xi.at(n, c, s)]) - mean));
              });
              sum_g += g_sum;
              sum_gx += gx_sum;
            }
            sum_gx *= invstd;
            set_param<P>(grad_weight, c, sum_gx);
            set_param<P>(grad_bias, c, sum_g);
            if (!want_gi) continue;
            // grad_in = invstd * w * (g - mean(g) - xhat * mean(g * xhat))
            const double mean_g = sum_g / static_cast<double>(count);
            const double mean_gx = sum_gx / static_cast<double>(count);
            const double k = invstd * param<P>(weight, c, 1.0);
            for (int64_t n = 0; n < N; ++n)
              for (int64_t s = 0; s < S; ++s) {
                const double xhat = (static_cast<double>(x[xi.at(n, c, s)]) - mean) * invstd;
                gi[gii.at(n, c, s)] = to_data<T>(k * (grad(n, c, s) - mean_g - xhat * mean_gx));
              }
          }
        });
      },
      in_layout, go_layout, gi_layout, y_layout);
}

/// batch_norm_forward, with relu when kRelu. Returns false for the 16-bit mixes the fused kernel
/// leaves to the caller (every mix but Note [16-bit batch norm]'s: those stage unfused).
template <bool kRelu>
bool forward(CpuBackend& b, const TensorArg& out, const TensorArg& save_mean,
             const TensorArg& save_invstd, const TensorArg& input, const TensorArg& weight,
             const TensorArg& bias, const TensorArg& running_mean, const TensorArg& running_var,
             bool training, double momentum, double eps) {
  const bool native =
      native_16bit({&input, &out}, {&save_mean, &save_invstd, &weight, &bias, &running_mean,
                                    &running_var});  // Note [16-bit batch norm]
  if (!native) {
    if (kRelu && any_half({&out, &save_mean, &save_invstd, &input, &weight, &bias, &running_mean,
                           &running_var}))
      return false;
    if (!kRelu && staged_batch_norm_forward(b, out, save_mean, save_invstd, input, weight, bias,
                                            running_mean, running_var, training, momentum, eps))
      return true;  // Note [16-bit kernels]
  }
  check_layout(input, out);
  OCTO_INTERNAL_ASSERT(training || (running_mean.defined() && running_var.defined()));
  if (native) {
    if (input.dtype == kBFloat16)
      forward_impl<BFloat16, float, kRelu>(out, save_mean, save_invstd, input, weight, bias,
                                           running_mean, running_var, training, momentum, eps);
    else
      forward_impl<Float16, float, kRelu>(out, save_mean, save_invstd, input, weight, bias,
                                          running_mean, running_var, training, momentum, eps);
    return true;
  }
  OCTO_DISPATCH_FLOATING(input.dtype, "batch_norm_forward", [&] {
    forward_impl<scalar_t, scalar_t, kRelu>(out, save_mean, save_invstd, input, weight, bias,
                                            running_mean, running_var, training, momentum, eps);
  });
  return true;
}

/// batch_norm_backward, through relu's mask on `output` when kRelu; false as forward().
template <bool kRelu>
bool backward(CpuBackend& b, const TensorArg& grad_input, const TensorArg& grad_weight,
              const TensorArg& grad_bias, const TensorArg& grad_out, const TensorArg& output,
              const TensorArg& input, const TensorArg& weight, const TensorArg& save_mean,
              const TensorArg& save_invstd) {
  const bool native = native_16bit({&input, &grad_out, &grad_input, &output},
                                   {&grad_weight, &grad_bias, &weight, &save_mean, &save_invstd});
  if (!native) {
    if (kRelu && any_half({&grad_input, &grad_weight, &grad_bias, &grad_out, &output, &input,
                           &weight, &save_mean, &save_invstd}))
      return false;
    if (!kRelu && staged_batch_norm_backward(b, grad_input, grad_weight, grad_bias, grad_out, input,
                                             weight, save_mean, save_invstd))
      return true;  // Note [16-bit kernels]
  }
  check_layout(input, grad_out);
  if (grad_input.defined() && grad_input.numel() > 0) check_layout(input, grad_input);
  if (kRelu) check_layout(input, output);
  if (native) {
    if (input.dtype == kBFloat16)
      backward_impl<BFloat16, float, kRelu>(grad_input, grad_weight, grad_bias, grad_out, output,
                                            input, weight, save_mean, save_invstd);
    else
      backward_impl<Float16, float, kRelu>(grad_input, grad_weight, grad_bias, grad_out, output,
                                           input, weight, save_mean, save_invstd);
    return true;
  }
  OCTO_DISPATCH_FLOATING(input.dtype, "batch_norm_backward", [&] {
    backward_impl<scalar_t, scalar_t, kRelu>(grad_input, grad_weight, grad_bias, grad_out, output,
                                             input, weight, save_mean, save_invstd);
  });
  return true;
}

}  // namespace

void CpuBackend::batch_norm_forward(const TensorArg& out, const TensorArg& save_mean,
                                    const TensorArg& save_invstd, const TensorArg& input,
                                    const TensorArg& weight, const TensorArg& bias,
                                    const TensorArg& running_mean, const TensorArg& running_var,
                                    bool training, double momentum, double eps) {
  forward<false>(*this, out, save_mean, save_invstd, input, weight, bias, running_mean, running_var,
                 training, momentum, eps);
}

void CpuBackend::batch_norm_backward(const TensorArg& grad_input, const TensorArg& grad_weight,
                                     const TensorArg& grad_bias, const TensorArg& grad_out,
                                     const TensorArg& input, const TensorArg& weight,
                                     const TensorArg& save_mean, const TensorArg& save_invstd) {
  backward<false>(*this, grad_input, grad_weight, grad_bias, grad_out, /*output=*/input, input,
                  weight, save_mean, save_invstd);
}

bool CpuBackend::batch_norm_relu_forward(const TensorArg& out, const TensorArg& save_mean,
                                         const TensorArg& save_invstd, const TensorArg& input,
                                         const TensorArg& weight, const TensorArg& bias,
                                         const TensorArg& running_mean,
                                         const TensorArg& running_var, bool training,
                                         double momentum, double eps) {
  return forward<true>(*this, out, save_mean, save_invstd, input, weight, bias, running_mean,
                       running_var, training, momentum, eps);
}

bool CpuBackend::batch_norm_relu_backward(const TensorArg& grad_input, const TensorArg& grad_weight,
                                          const TensorArg& grad_bias, const TensorArg& grad_out,
                                          const TensorArg& output, const TensorArg& input,
                                          const TensorArg& weight, const TensorArg& save_mean,
                                          const TensorArg& save_invstd) {
  return backward<true>(*this, grad_input, grad_weight, grad_bias, grad_out, output, input, weight,
                        save_mean, save_invstd);
}

}  // namespace octo::kernels
