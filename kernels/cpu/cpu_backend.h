// CpuBackend: the Backend implementation over host memory (Eigen + OpenMP), one file per family.
#pragma once

#include "kernels/backend.h"

namespace octo::kernels {

class CpuBackend final : public Backend {
 public:
  // memory.cpp
  void fill(const TensorArg& out, Scalar value) override;
  void copy(const TensorArg& dst, const TensorArg& src) override;
  // elementwise.cpp
  void unary(UnaryOp op, const TensorArg& out, const TensorArg& in, Scalar alpha,
             Scalar beta) override;
  void binary(BinaryOp op, const TensorArg& out, const TensorArg& a, const TensorArg& b,
              Scalar alpha) override;
  void where(const TensorArg& out, const TensorArg& cond, const TensorArg& a,
             const TensorArg& b) override;
  // reduce.cpp
  void reduce(ReduceOp op, const TensorArg& out, const TensorArg& in, Scalar alpha) override;
  // linalg.cpp
  void bmm(const TensorArg& out, const TensorArg& a, const TensorArg& b, double alpha,
           double beta) override;
  // softmax.cpp
  void softmax(const TensorArg& out, const TensorArg& in, int dim, bool log) override;
  void softmax_backward(const TensorArg& grad_in, const TensorArg& grad_out, const TensorArg& out,
                        int dim, bool log) override;
  // conv.cpp
  void conv2d_forward(const TensorArg& out, const TensorArg& input, const TensorArg& weight,
                      const TensorArg& bias, const Conv2dParams& p) override;
  void conv2d_backward_input(const TensorArg& grad_input, const TensorArg& grad_out,
                             const TensorArg& weight, const Conv2dParams& p) override;
  void conv2d_backward_weight(const TensorArg& grad_weight, const TensorArg& grad_out,
                              const TensorArg& input, const Conv2dParams& p) override;
  // pool.cpp
  void max_pool2d_forward(const TensorArg& out, const TensorArg& indices, const TensorArg& input,
                          const Pool2dParams& p) override;
  void max_pool2d_backward(const TensorArg& grad_input, const TensorArg& grad_out,
                           const TensorArg& indices, const Pool2dParams& p) override;
  void avg_pool2d_forward(const TensorArg& out, const TensorArg& input,
                          const Pool2dParams& p) override;
  void avg_pool2d_backward(const TensorArg& grad_input, const TensorArg& grad_out,
                           const Pool2dParams& p) override;
  // norm.cpp
  void batch_norm_forward(const TensorArg& out, const TensorArg& save_mean,
                          const TensorArg& save_invstd, const TensorArg& input,
                          const TensorArg& weight, const TensorArg& bias,
                          const TensorArg& running_mean, const TensorArg& running_var,
                          bool training, double momentum, double eps) override;
  void batch_norm_backward(const TensorArg& grad_input, const TensorArg& grad_weight,
                           const TensorArg& grad_bias, const TensorArg& grad_out,
                           const TensorArg& input, const TensorArg& weight,
                           const TensorArg& save_mean, const TensorArg& save_invstd) override;
  bool batch_norm_relu_forward(const TensorArg& out, const TensorArg& save_mean,
                               const TensorArg& save_invstd, const TensorArg& input,
                               const TensorArg& weight, const TensorArg& bias,
                               const TensorArg& running_mean, const TensorArg& running_var,
                               bool training, double momentum, double eps) override;
  bool batch_norm_relu_backward(const TensorArg& grad_input, const TensorArg& grad_weight,
                                const TensorArg& grad_bias, const TensorArg& grad_out,
                                const TensorArg& output, const TensorArg& input,
                                const TensorArg& weight, const TensorArg& save_mean,
                                const TensorArg& save_invstd) override;
  // index.cpp
  void index_select(const TensorArg& out, const TensorArg& in, int dim,
                    const TensorArg& index) override;
  void index_add(const TensorArg& out, int dim, const TensorArg& index,
                 const TensorArg& src) override;
  void gather(const TensorArg& out, const TensorArg& in, int dim, const TensorArg& index) override;
  void scatter_add(const TensorArg& out, int dim, const TensorArg& index,
                   const TensorArg& src) override;
  // loss.cpp
  void cross_entropy_forward(const TensorArg& loss, const TensorArg& lse, const TensorArg& logits,
                             const TensorArg& target, const TensorArg& weight,
                             const CrossEntropyParams& p) override;
  void cross_entropy_backward(const TensorArg& grad_logits, const TensorArg& grad_loss,
                              const TensorArg& logits, const TensorArg& lse,
                              const TensorArg& target, const TensorArg& weight,
                              const CrossEntropyParams& p) override;
  // optim.cpp
  void sgd_update(const TensorArg& param, const TensorArg& grad, const TensorArg& momentum_buf,
                  const SgdParams& p) override;
  void adam_update(const TensorArg& param, const TensorArg& grad, const TensorArg& exp_avg,
                   const TensorArg& exp_avg_sq, const TensorArg& max_exp_avg_sq,
                   const AdamParams& p) override;
  // random.cpp
  void uniform(const TensorArg& out, double low, double high, GeneratorState state) override;
  void normal(const TensorArg& out, double mean, double std, GeneratorState state) override;
  void bernoulli(const TensorArg& out, double p, GeneratorState state) override;
  void randint(const TensorArg& out, int64_t low, int64_t high, GeneratorState state) override;
};

}  // namespace octo::kernels
