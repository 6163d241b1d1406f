// The parameterless nn modules: activations, Flatten and Dropout.
#include "src/nn_common.hpp"

#include <loom/nn.hpp>

namespace loom::nn {

namespace {

// Training-mode dropout: each element kept with probability 1 - p and scaled
// by 1 / (1 - p), as PyTorch's bernoulli mask. One small function, so the
// module can call nn::functional::dropout instead once that exists.
Tensor dropout_in_training(const Tensor& x, double p) {
  if (p == 0) return x;
  const Tensor keep = Tensor::rand(x.shape(), x.dtype()) >= p;  // rand is uniform on [0, 1)
  const Tensor scale = Tensor::scalar(1 / (1 - p), x.dtype());
  return x * keep.where(scale, Tensor::scalar(0, x.dtype()));
}

}  // namespace

Tensor ReLU::forward(const Tensor& x) const { return x.relu(); }
Tensor SiLU::forward(const Tensor& x) const { return x.silu(); }

GELU::GELU(std::string approximate_) : Module("GELU"), approximate(std::move(approximate_)) {
  if (approximate != "none" && approximate != "tanh")
    throw Error(fmt::format("GELU: approximate must be \"none\" or \"tanh\", got \"{}\"", approximate));
}
Tensor GELU::forward(const Tensor& x) const { return x.gelu(approximate); }

Flatten::Flatten(int start_dim_, int end_dim_)
    : Module("Flatten"), start_dim(start_dim_), end_dim(end_dim_) {}
Tensor Flatten::forward(const Tensor& x) const { return x.flatten(start_dim, end_dim); }

Dropout::Dropout(double p_) : Module("Dropout"), p(p_) {
  if (!(p >= 0 && p < 1)) throw Error(fmt::format("Dropout: p must lie in [0, 1), got {}", p));
}
Tensor Dropout::forward(const Tensor& x) const {
  detail_nn::check_float(x, "Dropout");
  return is_training() ? dropout_in_training(x, p) : x;
}

}  // namespace loom::nn
