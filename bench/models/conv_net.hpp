#pragma once
// A CNN with its convolution built by hand: 3x3 patches of a [64, 28, 28]
// single-channel batch as 9 shifted slices stacked on a last axis, a matmul to
// 32 channels (nn::Linear(9, 32)), ReLU, 2x2 max-pool as a reshape and max,
// then a linear layer from 13 * 13 * 32 features to 10 classes, cross-entropy,
// SGD with momentum. Channels are last (NHWC); the PyTorch twin is
// nn.Conv2d(1, 32, 3) and F.max_pool2d on NCHW with the same weights.
#include "model.hpp"

#include <memory>

namespace models {

struct ConvNet {
  static constexpr const char* name = "conv_net_step";
  static constexpr int64_t batch_size = 64, side = 28, kernel = 3, out = side - kernel + 1, channels = 32,
                           pooled = out / 2, classes = 10;
  Layout c;
  loom::nn::Linear conv{kernel * kernel, channels}, fc{pooled * pooled * channels, classes};

  explicit ConvNet(Layout layout) : c(layout) { init_parameters(named_parameters()); }

  loom::NamedTensors named_parameters() const {
    loom::NamedTensors all;
    append(all, conv.named_parameters("conv"));
    append(all, fc.named_parameters("fc"));
    return all;
  }
  std::vector<loom::Tensor> batch() const {
    return {uniform_tensor({batch_size, 1, side, side}, 1000, 1), label_tensor({batch_size}, 1002, classes)};
  }
  loom::Tensor loss(const std::vector<loom::Tensor>& b) const {
    const loom::Tensor x = b[0].reshape({batch_size, side, side});
    std::vector<loom::Tensor> shifted;  // patch element (i, j) of every output pixel
    for (int64_t i = 0; i < kernel; ++i)
      for (int64_t j = 0; j < kernel; ++j) shifted.push_back(x.slice(1, i, i + out).slice(2, j, j + out));
    const loom::Tensor patches = c(loom::stack(shifted, -1));  // [N, 26, 26, 9]
    const loom::Tensor h = c(c(conv(patches)).relu());         // [N, 26, 26, 32]
    const loom::Tensor p = c(h.reshape({batch_size, pooled, 2, pooled, 2, channels}).max({2, 4}));
    const loom::Tensor logits = c(fc(p.reshape({batch_size, pooled * pooled * channels})));
    return c(loom::nn::cross_entropy(logits, b[1]));
  }
  std::unique_ptr<loom::optim::Optimizer> optimizer() const {
    return std::make_unique<loom::optim::SGD>(tensors(named_parameters()), 0.01, 0.9);
  }
};

}  // namespace models
