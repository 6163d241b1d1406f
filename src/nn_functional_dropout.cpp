// dropout: a uniform draw from loom's generator (src/random.cpp, Philox inside the kernel) keeps
// each element with probability 1 - p; kept elements are scaled by 1 / (1 - p), as PyTorch's.
#include "src/tensor_ops.hpp"

#include <loom/nn_functional.hpp>

#include <cmath>

namespace loom::nn::functional {

Tensor dropout(const Tensor& x, double p, bool training) {
  detail::uop(x, "dropout");
  if (!(p >= 0 && p < 1))
    throw Error(
        fmt::format("dropout: probability p = {} is outside [0, 1) (input {})", p, detail::str(x.shape())));
  if (!x.dtype().is_float())
    throw Error(fmt::format("dropout: expected a float input, got {}", scalar_name(x.dtype().scalar)));
  if (!training || p == 0) return x;
  const Tensor keep = Tensor::rand(x.shape(), x.dtype()) >= p;
  // x times the scaled mask, as PyTorch's input * noise: a dropped inf or NaN gives NaN.
  return x * keep.where(Tensor::scalar(1 / (1 - p), x.dtype()), Tensor::scalar(0, x.dtype()));
}

}  // namespace loom::nn::functional
