#pragma once
// How ops apply loom::Autocast (include/loom/autocast.hpp): the two lists of
// torch.autocast, as casts of an op's inputs.
#include <loom/autocast.hpp>
#include <loom/tensor.hpp>

namespace loom::detail {

// A tensor autocast rounds: defined, floating and not Float64 (torch.autocast leaves
// float64 alone).
inline bool autocast_eligible(const Tensor& t) {
  return t.defined() && t.dtype().is_float() && t.dtype() != DType::Float64;
}

// Whether a lower-precision op (matmul, linear, conv) autocasts these operands: in a scope,
// every defined operand eligible.
inline bool autocasts(std::initializer_list<const Tensor*> operands) {
  if (!autocast_dtype()) return false;
  for (const Tensor* t : operands)
    if (t->defined() && !autocast_eligible(*t)) return false;
  return true;
}

// A lower-precision op's operand: rounded to the autocast dtype. The op then runs on half
// operands as it does outside a scope (products and sums in Float32, the result rounded once to
// the half dtype), so its gradient is half too and the backward's products take half operands,
// as torch.autocast's. The cast is elementwise, so it fuses into the consumer.
inline Tensor autocast_operand(const Tensor& t) { return t.defined() ? t.cast(*autocast_dtype()) : t; }

// A Float32-list op's input (reductions, norms, softmax, losses): a half tensor in a scope
// becomes Float32 (exactly); anything else is unchanged.
inline Tensor autocast_float32(const Tensor& t) {
  return t.defined() && t.dtype().is_half() && autocast_dtype() ? t.cast(DType::Float32) : t;
}

}  // namespace loom::detail
