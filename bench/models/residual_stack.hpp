#pragma once
// Ten pre-norm residual blocks x + fc2(relu(fc1(LayerNorm(x)))), x [64, 256],
// hidden 1024, mean squared error against a fixed target, AdamW.
#include "model.hpp"

#include <memory>
#include <string>

namespace models {

struct ResidualStack {
  static constexpr const char* name = "residual_stack_step";
  static constexpr int64_t batch_size = 64, dim = 256, hidden = 1024, depth = 10;
  struct Block {
    loom::nn::LayerNorm ln{dim};
    loom::nn::Linear fc1{dim, hidden}, fc2{hidden, dim};
  };
  Layout c;
  std::vector<Block> blocks;

  explicit ResidualStack(Layout layout) : c(layout), blocks(depth) { init_parameters(named_parameters()); }

  loom::NamedTensors named_parameters() const {
    loom::NamedTensors all;
    for (size_t i = 0; i < blocks.size(); ++i) {
      const std::string at = "blocks." + std::to_string(i) + ".";
      append(all, blocks[i].ln.named_parameters(at + "ln"));
      append(all, blocks[i].fc1.named_parameters(at + "fc1"));
      append(all, blocks[i].fc2.named_parameters(at + "fc2"));
    }
    return all;
  }
  std::vector<loom::Tensor> batch() const {
    return {uniform_tensor({batch_size, dim}, 1000, 1), uniform_tensor({batch_size, dim}, 1001, 1)};
  }
  loom::Tensor loss(const std::vector<loom::Tensor>& b) const {
    loom::Tensor x = b[0];
    for (const Block& blk : blocks) x = c(x + c(blk.fc2(c(c(blk.fc1(c(blk.ln(x)))).relu()))));
    return c(loom::nn::mse(x, b[1]));
  }
  std::unique_ptr<loom::optim::Optimizer> optimizer() const {
    return std::make_unique<loom::optim::AdamW>(tensors(named_parameters()), 1e-3);
  }
};

}  // namespace models
