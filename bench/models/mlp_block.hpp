#pragma once
// The transformer's MLP block alone: fc2(gelu_tanh(fc1(x))), x [32, 64, 128],
// hidden 512, mean squared error against a fixed target, AdamW.
#include "model.hpp"

#include <memory>

namespace models {

struct MlpBlock {
  static constexpr const char* name = "mlp_block_step";
  static constexpr int64_t batch_size = 32, seq = 64, dim = 128, hidden = 512;
  Layout c;
  loom::nn::Linear fc1{dim, hidden}, fc2{hidden, dim};

  explicit MlpBlock(Layout layout) : c(layout) { init_parameters(named_parameters()); }

  loom::NamedTensors named_parameters() const {
    loom::NamedTensors all;
    append(all, fc1.named_parameters("fc1"));
    append(all, fc2.named_parameters("fc2"));
    return all;
  }
  std::vector<loom::Tensor> batch() const {
    return {uniform_tensor({batch_size, seq, dim}, 1000, 1), uniform_tensor({batch_size, seq, dim}, 1001, 1)};
  }
  loom::Tensor loss(const std::vector<loom::Tensor>& b) const {
    const loom::Tensor y = c(fc2(c(gelu_tanh(c(fc1(b[0]))))));
    return c(loom::nn::mse(y, b[1]));
  }
  std::unique_ptr<loom::optim::Optimizer> optimizer() const {
    return std::make_unique<loom::optim::AdamW>(tensors(named_parameters()), 1e-3);
  }
};

}  // namespace models
