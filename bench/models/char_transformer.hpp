#pragma once
// A 2-layer character transformer (GPT-style, pre-norm): token and position
// embeddings, d 128, 4 heads, causal self-attention written as
// softmax(q k^T * s + mask) v, an MLP of hidden 512 with the tanh GELU written
// by hand, LayerNorm, a linear head to 65 characters; batch 32 of 64
// characters, cross-entropy over every position, AdamW.
#include "transformer_block.hpp"

#include <cmath>
#include <limits>
#include <memory>

namespace models {

struct CharTransformer {
  static constexpr const char* name = "char_transformer_step";
  static constexpr int64_t batch_size = 32, seq = 64, dim = 128, heads = 4, head_dim = dim / heads,
                           hidden = 4 * dim, layers = 2, vocab = 65;
  using Block = TransformerBlock<dim, hidden>;
  Layout c;
  loom::nn::Embedding wte{vocab, dim}, wpe{seq, dim};
  std::vector<Block> blocks;
  loom::nn::LayerNorm ln_f{dim};
  loom::nn::Linear head{dim, vocab};
  loom::Tensor positions = loom::Tensor::arange(seq).realize();
  loom::Tensor mask = causal_mask();  // [seq, seq]: 0 where a query may see a key, -inf after it

  explicit CharTransformer(Layout layout) : c(layout), blocks(layers) { init_parameters(named_parameters()); }

  static loom::Tensor causal_mask() {
    std::vector<float> m(static_cast<size_t>(seq * seq), 0);
    for (int64_t q = 0; q < seq; ++q)
      for (int64_t k = q + 1; k < seq; ++k)
        m[static_cast<size_t>(q * seq + k)] = -std::numeric_limits<float>::infinity();
    return loom::Tensor::from_vector(m, {seq, seq}).realize();
  }

  loom::NamedTensors named_parameters() const {
    loom::NamedTensors all = trunk_parameters(*this);
    append(all, head.named_parameters("head"));
    return all;
  }
  // Characters [32, 64] and the character expected after each, [32 * 64].
  std::vector<loom::Tensor> batch() const { return character_batch(batch_size, seq, vocab); }

  // x [B, T, d] -> [B, T, d]
  loom::Tensor attention(const Block& b, const loom::Tensor& x) const {
    const loom::Tensor qkv = c(b.attn(x));  // [B, T, 3d]
    const auto part = [&](int64_t i) { return c(Block::heads_first(qkv, i, heads)); };
    const loom::Tensor q = part(0), k = part(1), v = part(2);
    const double scale = 1 / std::sqrt(static_cast<double>(head_dim));
    const loom::Tensor scores = c(q.matmul(c(k.transpose(-2, -1))) * scale + mask);
    const loom::Tensor weights = c(scores.softmax(-1));
    const loom::Tensor mixed = c(c(weights.matmul(v)).permute({0, 2, 1, 3}).reshape({batch_size, seq, dim}));
    return c(b.proj(mixed));
  }

  loom::Tensor logits(const loom::Tensor& tokens) const {
    loom::Tensor x = c(c(wte(tokens)) + c(wpe(positions)));
    for (const Block& b : blocks) {
      x = c(x + attention(b, c(b.ln1(x))));
      x = c(x + c(b.fc2(c(gelu_tanh(c(b.fc1(c(b.ln2(x)))))))));
    }
    return c(head(c(ln_f(x))));
  }
  loom::Tensor loss(const std::vector<loom::Tensor>& b) const {
    return c(loom::nn::cross_entropy(c(logits(b[0]).reshape({batch_size * seq, vocab})), b[1]));
  }
  std::unique_ptr<loom::optim::Optimizer> optimizer() const {
    return std::make_unique<loom::optim::AdamW>(tensors(named_parameters()), 1e-3);
  }
};

}  // namespace models
