#pragma once
// loom::Autocast: mixed precision in a scope, as torch.autocast (docs/api.md, "Autocast";
// docs/semantics.md, "Autocast"):
//
//   {
//     loom::Autocast ac(loom::DType::BFloat16);
//     loss = loom::nn::cross_entropy(model.forward(x), y);  // matmuls in bf16, the loss in Float32
//   }
//   loss.backward();  // gradients reach the Float32 parameters in Float32
//
// In the scope, matmul, Linear, the convolutions and scaled_dot_product_attention round their
// floating operands (not Float64) to the autocast dtype, multiply them and accumulate in
// Float32, and round the result once to the autocast dtype, as torch.autocast: the result is
// half, so its gradient is too, and the backward's products take half operands. The roundings
// are casts inside the kernels, no pass of their own. Reductions, norms, softmax and the
// losses take half inputs in Float32. The state
// belongs to the thread that builds the graph; scopes nest, and `enabled = false` turns
// autocast off inside an enabled scope. The state is part of Capture's signature: a step
// recorded in a scope never replays outside it.
#include <loom/dtype.hpp>

#include <optional>

namespace loom {

class Autocast {
 public:
  // `dtype` must be BFloat16 or Float16 (anything else is a loom::Error).
  explicit Autocast(DType dtype, bool enabled = true);
  ~Autocast();
  Autocast(const Autocast&) = delete;
  Autocast& operator=(const Autocast&) = delete;

 private:
  std::optional<DType> previous_;
};

// The autocast dtype in effect on this thread, or nullopt outside any enabled scope.
std::optional<DType> autocast_dtype();

}  // namespace loom
