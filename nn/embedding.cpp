// Embedding: N(0, 1) initialisation, padding_idx handling, from_pretrained.
#include "nn/embedding.h"

#include "autograd/grad_mode.h"
#include "autograd/ops/elementwise.h"
#include "autograd/ops/indexing.h"
#include "nn/init.h"
#include "tensor/factories.h"

namespace octo::nn {

Embedding::Embedding(int64_t n, int64_t d, EmbeddingOptions options)
    : Cloneable("Embedding"), num_embeddings(n), embedding_dim(d) {
  OCTO_CHECK_VALUE(n > 0 && d > 0,
                   "Embedding: num_embeddings and embedding_dim must be positive, got ", n, " and ",
                   d);
  if (options.padding_idx) {
    const int64_t p = *options.padding_idx;
    OCTO_CHECK_INDEX(p >= -n && p < n, "Embedding: padding_idx must be within num_embeddings (", n,
                     "), got ", p);
    padding_idx = p < 0 ? p + n : p;
  }
  reset();
}

std::shared_ptr<Embedding> Embedding::from_pretrained(const Tensor& embeddings, bool freeze,
                                                      EmbeddingOptions options) {
  OCTO_CHECK_VALUE(
      embeddings.defined() && embeddings.dim() == 2,
      "Embedding::from_pretrained: expected a 2-d tensor [num_embeddings, embedding_dim], got ",
      embeddings.defined() ? embeddings.sizes() : Shape{});
  auto emb = std::make_shared<Embedding>(embeddings.size(0), embeddings.size(1), options);
  NoGradGuard no_grad;
  octo::detail::set_data(emb->weight, embeddings.detach().clone());
  emb->weight.requires_grad_(!freeze);
  return emb;
}

void Embedding::reset() {
  Tensor w = empty({num_embeddings, embedding_dim});
  init::normal_(w, 0.0, 1.0);
  if (padding_idx) {
    NoGradGuard no_grad;
    w.select(0, *padding_idx).zero_();
  }
  weight = register_parameter("weight", w);
}

Tensor Embedding::forward(const Tensor& indices) {
  Tensor out = embedding(weight, indices);
  if (padding_idx && out.requires_grad()) {
    // The padding row keeps its value but gets no gradient: route those outputs through a
    // detached copy.
    Tensor keep =
        ne(indices, scalar_tensor(*padding_idx, {.dtype = kInt64, .device = indices.device()}));
    out = where(keep.unsqueeze(-1), out, out.detach());
  }
  return out;
}

std::string Embedding::extra_repr() const {
  std::string s = std::to_string(num_embeddings) + ", " + std::to_string(embedding_dim);
  if (padding_idx) s += ", padding_idx=" + std::to_string(*padding_idx);
  return s;
}

}  // namespace octo::nn
