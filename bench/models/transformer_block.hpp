#pragma once
// The pre-norm block of the character models (char_transformer.hpp, char_gpt.hpp):
// LayerNorm, one linear layer making the queries, keys and values, the attention's
// output projection, LayerNorm, and an MLP of two linear layers. The parameters are
// named and ordered as the PyTorch twins' (bench/peers/model_twins.py, CharBlock).
#include "model.hpp"

#include <string>
#include <vector>

namespace models {

template <int64_t dim, int64_t hidden>
struct TransformerBlock {
  loom::nn::LayerNorm ln1{dim};
  loom::nn::Linear attn{dim, 3 * dim}, proj{dim, dim};
  loom::nn::LayerNorm ln2{dim};
  loom::nn::Linear fc1{dim, hidden}, fc2{hidden, dim};

  // attn's output [B, T, 3 dim] -> the queries (part 0), keys (1) or values (2), [B, heads, T, dim / heads].
  static loom::Tensor heads_first(const loom::Tensor& qkv, int64_t part, int64_t heads) {
    const int64_t b = qkv.shape()[0], t = qkv.shape()[1];
    return qkv.slice(2, part * dim, (part + 1) * dim)
        .reshape({b, t, heads, dim / heads})
        .permute({0, 2, 1, 3});
  }
};

// Every block's parameters, "blocks.i.ln1.weight" and so on, in the twins' order.
template <class Block>
void append_blocks(loom::NamedTensors& all, const std::vector<Block>& blocks) {
  for (size_t i = 0; i < blocks.size(); ++i) {
    const std::string at = "blocks." + std::to_string(i) + ".";
    const Block& b = blocks[i];
    append(all, b.ln1.named_parameters(at + "ln1"));
    append(all, b.attn.named_parameters(at + "attn"));
    append(all, b.proj.named_parameters(at + "proj"));
    append(all, b.ln2.named_parameters(at + "ln2"));
    append(all, b.fc1.named_parameters(at + "fc1"));
    append(all, b.fc2.named_parameters(at + "fc2"));
  }
}

// The character models' trunk, in the twins' order: wte, wpe, the blocks, ln_f.
template <class Model>
loom::NamedTensors trunk_parameters(const Model& m) {
  loom::NamedTensors all;
  append(all, m.wte.named_parameters("wte"));
  append(all, m.wpe.named_parameters("wpe"));
  append_blocks(all, m.blocks);
  append(all, m.ln_f.named_parameters("ln_f"));
  return all;
}

// Characters [batch, seq] and the character expected after each, [batch * seq].
inline std::vector<loom::Tensor> character_batch(int64_t batch, int64_t seq, int64_t vocab) {
  return {label_tensor({batch, seq}, 1002, vocab), label_tensor({batch * seq}, 1003, vocab)};
}

}  // namespace models
