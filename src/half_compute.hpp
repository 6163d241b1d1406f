#pragma once
// The half-precision rule for composite ops (docs/semantics.md, "Half-precision dtypes"): an op
// built from several primitives (softmax, log_softmax, logsumexp, var, std, layer_norm,
// batch_norm, gelu, silu, softplus, erf, the losses, bilinear interpolation, ...) computes a
// BFloat16 or Float16 input in Float32 and rounds its result once, as PyTorch's CPU kernels do
// (they run such ops on float32 "opmath" values), instead of rounding after each primitive.
#include <loom/tensor.hpp>

namespace loom::detail {

inline bool is_half(const Tensor& t) { return t.defined() && t.dtype().is_half(); }

// A half tensor widened to Float32 (exactly); anything else unchanged.
inline Tensor widened_half(const Tensor& t) { return is_half(t) ? t.cast(DType::Float32) : t; }

// f(t) for a tensor that is not half; for a half one, f of its Float32 widening, rounded once to
// t's dtype.
template <class Fn>
Tensor rounded_once(const Tensor& t, Fn&& f) {
  if (!is_half(t)) return f(t);
  return f(t.cast(DType::Float32)).cast(t.dtype());
}

}  // namespace loom::detail
