// Embedding: a lookup table of num_embeddings vectors of size embedding_dim.
#pragma once

#include <optional>

#include "nn/module.h"

namespace octo::nn {

struct EmbeddingOptions {
  /// This row starts at zero and never receives a gradient (negative counts from the end).
  std::optional<int64_t> padding_idx = std::nullopt;
};

/// weight[indices] for int64 indices of any shape -> indices.shape + [embedding_dim]. The weight
/// [num_embeddings, embedding_dim] is initialised N(0, 1), as torch.nn.Embedding.
///   auto emb = std::make_shared<nn::Embedding>(10000, 256, nn::EmbeddingOptions{.padding_idx =
///   0});
class Embedding : public Cloneable<Embedding> {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim, EmbeddingOptions options = {});
  /// An Embedding holding a copy of `embeddings` [n, d]; freeze: the weight does not require grad.
  static std::shared_ptr<Embedding> from_pretrained(const Tensor& embeddings, bool freeze = true,
                                                    EmbeddingOptions options = {});
  void reset() override;
  Tensor forward(const Tensor& indices) override;
  /// "10, 3" or "10, 3, padding_idx=0" (as PyTorch).
  std::string extra_repr() const override;

  int64_t num_embeddings, embedding_dim;
  /// Normalised to [0, num_embeddings).
  std::optional<int64_t> padding_idx = std::nullopt;
  Tensor weight;
};

}  // namespace octo::nn
