#pragma once
// Symbolic gradients of lazy tensors: the functional form of backward(), and
// the guard that turns gradient tracking off. docs/api.md, "Autodiff".
#include <loom/tensor.hpp>

#include <vector>

namespace loom {

// d(target)/d(w) for each w in `wrt`, as lazy tensors (scheduled together with
// whatever realizes them, forward graph included). `target` must be a float
// tensor of one element; each w a float tensor. A w the target does not depend
// on gets zeros of its shape. The results are themselves differentiable.
std::vector<Tensor> gradient(const Tensor& target, const std::vector<Tensor>& wrt);

// While a NoGrad lives, the tensors the calling thread makes do not require
// gradients: no gradient flows through them into the leaves they were made
// from (evaluation code, optimizer updates). Guards nest.
class NoGrad {
 public:
  NoGrad();
  ~NoGrad();
  NoGrad(const NoGrad&) = delete;
  NoGrad& operator=(const NoGrad&) = delete;
};

// Is gradient tracking on for the calling thread (no NoGrad alive)?
bool grad_enabled();

}  // namespace loom
