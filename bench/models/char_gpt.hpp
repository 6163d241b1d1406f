#pragma once
// The character GPT of examples/gpt.hpp at the example's size, one training step
// as examples/gpt.cpp takes it: 4 pre-LayerNorm blocks of d 256 with 4 heads of
// causal nn::scaled_dot_product_attention and an MLP of hidden 1024 with the exact
// GELU, token and position embeddings, the head tied to the token embedding, 114
// characters (the fortunes corpus's); batch 8 of 256 characters, cross-entropy
// over every position; the gradients clipped to norm 1, then AdamW (betas 0.9,
// 0.99) with weight decay 0.1 on the matrices and another without on the rest
// (loom has no parameter groups). Dropout is left out (p = 0): the twin's masks
// would come from another generator, and its losses could not equal loom's.
#include "transformer_block.hpp"

#include <optional>
#include <vector>

namespace models {

struct CharGpt {
  static constexpr const char* name = "gpt_step";
  static constexpr int64_t batch_size = 8, seq = 256, dim = 256, heads = 4, hidden = 4 * dim, layers = 4,
                           vocab = 114;
  static constexpr double max_grad_norm = 1.0;
  using Block = TransformerBlock<dim, hidden>;
  Layout c;
  loom::nn::Embedding wte{vocab, dim}, wpe{seq, dim};
  std::vector<Block> blocks;
  loom::nn::LayerNorm ln_f{dim};
  loom::Tensor positions = loom::Tensor::arange(seq).realize();
  std::optional<loom::optim::AdamW> opt;

  explicit CharGpt(Layout layout) : c(layout), blocks(layers) {
    init_parameters(named_parameters());
    std::vector<loom::Tensor> matrices, rest;
    for (const auto& [name, p] : named_parameters()) (p.ndim() >= 2 ? matrices : rest).push_back(p);
    opt.emplace(std::vector<loom::optim::ParamGroup>{{.params = matrices, .weight_decay = 0.1},
                                                     {.params = rest, .weight_decay = 0.0}},
                1e-3, 0.9, 0.99, 1e-8);
  }

  // The head has no parameter of its own: it is wte.weight.
  loom::NamedTensors named_parameters() const { return trunk_parameters(*this); }
  // Characters [8, 256] and the character expected after each, [8 * 256].
  std::vector<loom::Tensor> batch() const { return character_batch(batch_size, seq, vocab); }

  // x [B, T, d] -> [B, T, d]
  loom::Tensor attention(const Block& b, const loom::Tensor& x) const {
    const loom::Tensor qkv = c(b.attn(x));  // [B, T, 3d]
    const auto part = [&](int64_t i) { return c(Block::heads_first(qkv, i, heads)); };
    const loom::Tensor mixed = c(loom::nn::scaled_dot_product_attention(part(0), part(1), part(2), {},
                                                                        std::nullopt, /*is_causal=*/true));
    return c(b.proj(c(mixed.permute({0, 2, 1, 3}).reshape({batch_size, seq, dim}))));
  }

  loom::Tensor logits(const loom::Tensor& tokens) const {
    loom::Tensor x = c(c(wte(tokens)) + c(wpe(positions)));
    for (const Block& b : blocks) {
      x = c(x + attention(b, c(b.ln1(x))));
      x = c(x + c(b.fc2(c(c(b.fc1(c(b.ln2(x)))).gelu()))));
    }
    return c(c(ln_f(x)).matmul(wte.weight.transpose()));  // the tied head
  }
  loom::Tensor loss(const std::vector<loom::Tensor>& b) const {
    return c(loom::nn::cross_entropy(c(logits(b[0]).reshape({batch_size * seq, vocab})), b[1]));
  }

  // bench_models' Session runs this instead of its own zero_grad, backward and
  // step when a model defines it.
  loom::Tensor train_step(const std::vector<loom::Tensor>& b) {
    opt->zero_grad();
    loom::Tensor l = loss(b);
    l.backward();
    loom::optim::clip_grad_norm_(tensors(named_parameters()), max_grad_norm);
    opt->step();  // decay on the matrices only: two parameter groups, one schedule
    return l;
  }
};

}  // namespace models
