// CPU conv2d forward and backward: oneDNN's primitives for float32 and bfloat16 when octo is
// built with oneDNN (conv_dnnl.cpp), else (and for float64) im2col + Eigen GEMM, parallel over
// the batch.
//
// Threading: when the batch has at least as many samples as we have threads (and enough work),
// samples are split across threads and each runs single-threaded Eigen products (Eigen's GEMM
// does not start threads inside an OpenMP parallel region: Parallelizer.h checks
// omp_get_num_threads() > 1). Otherwise samples run one after another and Eigen parallelises
// each product itself, capped at get_num_threads() through the calling thread's OpenMP ICV (so
// a virtual device worker's ThreadLimitGuard holds). Results are deterministic for a given
// thread count: the weight gradient adds per-chunk partial sums in chunk order.
#include <omp.h>

#include <Eigen/Core>
#include <vector>

#include "core/threads.h"
#include "kernels/cpu/conv_dnnl.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/im2col.h"
#include "kernels/cpu/omp_threads.h"
#include "kernels/float32_staging.h"

namespace octo::kernels {

namespace {

using cpu::ConvGeometry;

template <typename T>
using RowMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <typename T>
using MapMat = Eigen::Map<RowMat<T>>;
template <typename T>
using MapConstMat = Eigen::Map<const RowMat<T>>;

/// A per-thread scratch buffer of at least n elements of T, reused across calls.
template <typename T>
T* scratch(int64_t n) {
  thread_local std::vector<T> buffer;
  if (static_cast<int64_t>(buffer.size()) < n) buffer.resize(static_cast<size_t>(n));
  return buffer.data();
}

/// A contiguous read-only view of `a`: `a` itself, or a packed copy kept in `storage`.
template <typename T>
const T* contiguous_input(const TensorArg& a, std::vector<T>& storage) {
  if (a.is_contiguous()) return a.data_as<T>();
  storage.resize(static_cast<size_t>(a.numel()));
  cpu_backend().copy(contiguous_like(a, storage.data()), a);
  return storage.data();
}

/// A contiguous output: writes go straight to `a` when it is contiguous, else to a buffer that
/// finish() copies into `a`.
template <typename T>
class ContiguousOutput {
 public:
  explicit ContiguousOutput(const TensorArg& a) : arg_(a) {
    if (a.is_contiguous()) {
      data_ = a.data_as<T>();
    } else {
      storage_.resize(static_cast<size_t>(a.numel()));
      data_ = storage_.data();
    }
  }
  T* data() const { return data_; }
  void finish() {
    if (!storage_.empty()) cpu_backend().copy(arg_, contiguous_like(arg_, storage_.data()));
  }

 private:
  TensorArg arg_;
  std::vector<T> storage_;
  T* data_ = nullptr;
};

// Below this many multiply-adds a call runs on one thread: starting a parallel region costs
// more than it saves (and much more when the machine is oversubscribed).
constexpr int64_t kMinParallelWork = 1 << 20;

/// Multiply-adds of one sample's products (all groups).
int64_t sample_work(const ConvGeometry& g) { return g.K * g.rows() * g.cols(); }

/// Whether to split the batch across threads (else samples run in order and Eigen may
/// parallelise each product).
bool batch_parallel(const ConvGeometry& g, int nt) {
  return nt > 1 && g.N >= nt && g.N * sample_work(g) >= kMinParallelWork;
}

/// Runs fn(n) for every sample, in parallel over samples when batch_parallel().
template <typename Fn>
void for_each_sample(const ConvGeometry& g, Fn fn) {
  const int nt = get_num_threads();
  cpu::OmpThreadsGuard scope(nt);
  if (batch_parallel(g, nt)) {
    parallel_for(0, g.N, 1, [&](int64_t b, int64_t e) {
      for (int64_t n = b; n < e; ++n) fn(n);
    });
  } else {
    for (int64_t n = 0; n < g.N; ++n) fn(n);
  }
}

template <typename T>
void forward_impl(const TensorArg& out_arg, const TensorArg& input, const TensorArg& weight,
                  const TensorArg& bias, const Conv2dParams& p) {
  const ConvGeometry g(input, weight, out_arg, p);
  std::vector<T> x_store, w_store;
  const T* x = contiguous_input<T>(input, x_store);
  const T* w = contiguous_input<T>(weight, w_store);
  ContiguousOutput<T> out(out_arg);
  T* y = out.data();
  const int64_t R = g.rows(), P = g.cols();
  for_each_sample(g, [&](int64_t n) {
    T* col = g.pointwise() ? nullptr : scratch<T>(R * P);
    for (int64_t grp = 0; grp < g.G; ++grp) {
      const T* img = x + (n * g.C + grp * g.Cg) * g.H * g.W;
      if (!g.pointwise()) cpu::im2col(img, col, g);
      MapConstMat<T> wg(w + grp * g.Kg * R, g.Kg, R);
      MapConstMat<T> cols(g.pointwise() ? img : col, R, P);
      MapMat<T> yg(y + (n * g.K + grp * g.Kg) * P, g.Kg, P);
      yg.noalias() = wg * cols;
    }
    if (bias.defined()) {
      const T* b = bias.data_as<T>();
      for (int64_t k = 0; k < g.K; ++k) {
        const T bk = b[k * bias.strides[0]];
        T* row = y + (n * g.K + k) * P;
        for (int64_t i = 0; i < P; ++i) row[i] += bk;
      }
    }
  });
  out.finish();
}

template <typename T>
void backward_input_impl(const TensorArg& grad_input, const TensorArg& grad_out,
                         const TensorArg& weight, const Conv2dParams& p) {
  const ConvGeometry g(grad_input, weight, grad_out, p);
  std::vector<T> gy_store, w_store;
  const T* gy = contiguous_input<T>(grad_out, gy_store);
  const T* w = contiguous_input<T>(weight, w_store);
  ContiguousOutput<T> out(grad_input);
  T* gx = out.data();
  const int64_t R = g.rows(), P = g.cols();
  for_each_sample(g, [&](int64_t n) {
    T* col = g.pointwise() ? nullptr : scratch<T>(R * P);
    for (int64_t grp = 0; grp < g.G; ++grp) {
      T* img = gx + (n * g.C + grp * g.Cg) * g.H * g.W;
      MapConstMat<T> wg(w + grp * g.Kg * R, g.Kg, R);
      MapConstMat<T> gyg(gy + (n * g.K + grp * g.Kg) * P, g.Kg, P);
      if (g.pointwise()) {  // the col matrix is the gradient image itself
        MapMat<T>(img, R, P).noalias() = wg.transpose() * gyg;
        continue;
      }
      MapMat<T>(col, R, P).noalias() = wg.transpose() * gyg;
      std::fill(img, img + g.Cg * g.H * g.W, T(0));
      cpu::col2im_add(col, img, g);
    }
  });
  out.finish();
}

template <typename T>
void backward_weight_impl(const TensorArg& grad_weight, const TensorArg& grad_out,
                          const TensorArg& input, const Conv2dParams& p) {
  const ConvGeometry g(input, grad_weight, grad_out, p);
  std::vector<T> gy_store, x_store;
  const T* gy = contiguous_input<T>(grad_out, gy_store);
  const T* x = contiguous_input<T>(input, x_store);
  ContiguousOutput<T> out(grad_weight);
  T* gw = out.data();
  const int64_t R = g.rows(), P = g.cols(), numel_w = g.K * R;

  // dW_g += dY[n, g] [Kg, P] * col[n, g]^T [P, R], accumulated over the samples of a chunk.
  auto accumulate = [&](int64_t n, T* acc) {
    T* col = g.pointwise() ? nullptr : scratch<T>(R * P);
    for (int64_t grp = 0; grp < g.G; ++grp) {
      const T* img = x + (n * g.C + grp * g.Cg) * g.H * g.W;
      if (!g.pointwise()) cpu::im2col(img, col, g);
      MapConstMat<T> cols(g.pointwise() ? img : col, R, P);
      MapConstMat<T> gyg(gy + (n * g.K + grp * g.Kg) * P, g.Kg, P);
      MapMat<T>(acc + grp * g.Kg * R, g.Kg, R).noalias() += gyg * cols.transpose();
    }
  };

  std::fill(gw, gw + numel_w, T(0));
  const int nt = get_num_threads();
  cpu::OmpThreadsGuard scope(nt);
  if (batch_parallel(g, nt)) {
    // Fixed chunks of samples, one partial sum each, added in chunk order.
    const int64_t chunks = nt;
    std::vector<T> partial(static_cast<size_t>((chunks - 1) * numel_w), T(0));
    parallel_for(0, chunks, 1, [&](int64_t b, int64_t e) {
      for (int64_t c = b; c < e; ++c) {
        T* acc = c == 0 ? gw : partial.data() + (c - 1) * numel_w;
        for (int64_t n = c * g.N / chunks; n < (c + 1) * g.N / chunks; ++n) accumulate(n, acc);
      }
    });
    for (int64_t c = 1; c < chunks; ++c) {
      const T* src = partial.data() + (c - 1) * numel_w;
      for (int64_t i = 0; i < numel_w; ++i) gw[i] += src[i];
    }
  } else {
    for (int64_t n = 0; n < g.N; ++n) accumulate(n, gw);
  }
  out.finish();
}

void check_args(const TensorArg& a, const TensorArg& b, const TensorArg& c, const char* op) {
  OCTO_INTERNAL_ASSERT(a.ndim == 4 && b.ndim == 4 && c.ndim == 4, op);
  OCTO_INTERNAL_ASSERT(a.dtype == b.dtype && b.dtype == c.dtype, op);
}

}  // namespace

void CpuBackend::conv2d_forward(const TensorArg& out, const TensorArg& input,
                                const TensorArg& weight, const TensorArg& bias,
                                const Conv2dParams& p) {
  if (cpu::dnnl_conv2d_forward(out, input, weight, bias, p)) return;  // Note [oneDNN convolution]
  if (staged_in_float32({&out, &input, &weight, &bias}, [&](Float32Staging& s) {
        conv2d_forward(s.output(out), s.input(input), s.input(weight), s.input(bias), p);
      }))
    return;  // Note [16-bit kernels]
  check_args(out, input, weight, "conv2d_forward");
  OCTO_INTERNAL_ASSERT(!bias.defined() || (bias.ndim == 1 && bias.dtype == out.dtype));
  if (out.numel() == 0) return;
  OCTO_DISPATCH_FLOATING(out.dtype, "conv2d",
                         [&] { forward_impl<scalar_t>(out, input, weight, bias, p); });
}

void CpuBackend::conv2d_backward_input(const TensorArg& grad_input, const TensorArg& grad_out,
                                       const TensorArg& weight, const Conv2dParams& p) {
  if (cpu::dnnl_conv2d_backward_input(grad_input, grad_out, weight, p)) return;
  if (staged_in_float32({&grad_input, &grad_out, &weight}, [&](Float32Staging& s) {
        conv2d_backward_input(s.output(grad_input), s.input(grad_out), s.input(weight), p);
      }))
    return;  // Note [16-bit kernels]
  check_args(grad_input, grad_out, weight, "conv2d_backward_input");
  if (grad_input.numel() == 0) return;
  OCTO_DISPATCH_FLOATING(grad_input.dtype, "conv2d_backward_input",
                         [&] { backward_input_impl<scalar_t>(grad_input, grad_out, weight, p); });
}

void CpuBackend::conv2d_backward_weight(const TensorArg& grad_weight, const TensorArg& grad_out,
                                        const TensorArg& input, const Conv2dParams& p) {
  if (cpu::dnnl_conv2d_backward_weight(grad_weight, grad_out, input, p)) return;
  if (staged_in_float32({&grad_weight, &grad_out, &input}, [&](Float32Staging& s) {
        conv2d_backward_weight(s.output(grad_weight), s.input(grad_out), s.input(input), p);
      }))
    return;  // Note [16-bit kernels]
  check_args(grad_weight, grad_out, input, "conv2d_backward_weight");
  if (grad_weight.numel() == 0) return;
  OCTO_DISPATCH_FLOATING(grad_weight.dtype, "conv2d_backward_weight",
                         [&] { backward_weight_impl<scalar_t>(grad_weight, grad_out, input, p); });
}

}  // namespace octo::kernels
