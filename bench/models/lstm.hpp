#pragma once
// An LSTM unrolled over 32 steps from matmuls, sigmoid, tanh and elementwise
// ops (torch.nn.LSTM's gates i, f, g, o and its two biases), x [32, 16, 64]
// (time, batch, features), hidden 128, then a linear layer from the last
// hidden state to 10 classes, cross-entropy, AdamW.
#include "model.hpp"

#include <memory>

namespace models {

struct Lstm {
  static constexpr const char* name = "lstm_step";
  static constexpr int64_t steps = 32, batch_size = 16, features = 64, hidden = 128, classes = 10;
  Layout c;
  loom::nn::Linear ih{features, 4 * hidden}, hh{hidden, 4 * hidden}, head{hidden, classes};

  explicit Lstm(Layout layout) : c(layout) { init_parameters(named_parameters()); }

  // torch.nn.LSTM's order: weight_ih, weight_hh, bias_ih, bias_hh.
  loom::NamedTensors named_parameters() const {
    loom::NamedTensors all{
        {"ih.weight", ih.weight}, {"hh.weight", hh.weight}, {"ih.bias", ih.bias}, {"hh.bias", hh.bias}};
    append(all, head.named_parameters("head"));
    return all;
  }
  std::vector<loom::Tensor> batch() const {
    return {uniform_tensor({steps, batch_size, features}, 1000, 1),
            label_tensor({batch_size}, 1002, classes)};
  }
  loom::Tensor loss(const std::vector<loom::Tensor>& b) const {
    loom::Tensor h = loom::Tensor::zeros({batch_size, hidden}),
                 cell = loom::Tensor::zeros({batch_size, hidden});
    for (int64_t t = 0; t < steps; ++t) {
      const loom::Tensor x = b[0].slice(0, t, t + 1).reshape({batch_size, features});
      const loom::Tensor gates = c(c(ih(x)) + c(hh(h)));
      const loom::Tensor i = c(gates.slice(1, 0, hidden).sigmoid());
      const loom::Tensor f = c(gates.slice(1, hidden, 2 * hidden).sigmoid());
      const loom::Tensor g = c(gates.slice(1, 2 * hidden, 3 * hidden).tanh());
      const loom::Tensor o = c(gates.slice(1, 3 * hidden, 4 * hidden).sigmoid());
      cell = c(f * cell + i * g);
      h = c(o * c(cell.tanh()));
    }
    return c(loom::nn::cross_entropy(c(head(h)), b[1]));
  }
  std::unique_ptr<loom::optim::Optimizer> optimizer() const {
    return std::make_unique<loom::optim::AdamW>(tensors(named_parameters()), 1e-3);
  }
};

}  // namespace models
