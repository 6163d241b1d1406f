// The parameterless nn modules: activations, Flatten and Dropout.
#include "src/nn_common.hpp"

#include <loom/nn.hpp>

namespace loom::nn {

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
  return functional::dropout(x, p, is_training());
}

}  // namespace loom::nn
