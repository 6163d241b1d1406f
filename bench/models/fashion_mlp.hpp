#pragma once
// The Fashion-MNIST-shaped MLP 784-256-128-10 with ReLU, batch 128 of random
// images (the shape is what matters for timing), cross-entropy, Adam.
#include "model.hpp"

#include <memory>

namespace models {

struct FashionMlp {
  static constexpr const char* name = "fashion_mlp_step";
  static constexpr int64_t batch_size = 128, pixels = 784, classes = 10;
  Layout c;
  loom::nn::Linear fc1{pixels, 256}, fc2{256, 128}, fc3{128, classes};

  explicit FashionMlp(Layout layout) : c(layout) { init_parameters(named_parameters()); }

  loom::NamedTensors named_parameters() const {
    loom::NamedTensors all;
    append(all, fc1.named_parameters("fc1"));
    append(all, fc2.named_parameters("fc2"));
    append(all, fc3.named_parameters("fc3"));
    return all;
  }
  std::vector<loom::Tensor> batch() const {
    return {uniform_tensor({batch_size, pixels}, 1000, 1), label_tensor({batch_size}, 1002, classes)};
  }
  loom::Tensor loss(const std::vector<loom::Tensor>& b) const {
    const loom::Tensor h1 = c(c(fc1(b[0])).relu());
    const loom::Tensor h2 = c(c(fc2(h1)).relu());
    return c(loom::nn::cross_entropy(c(fc3(h2)), b[1]));
  }
  std::unique_ptr<loom::optim::Optimizer> optimizer() const {
    return std::make_unique<loom::optim::Adam>(tensors(named_parameters()), 1e-3);
  }
};

}  // namespace models
