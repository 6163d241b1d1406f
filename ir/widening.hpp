#pragma once
// Exact widenings: casts that lose nothing, so a value may be stored or multiplied in
// its narrow form and widened where it is used (narrow_buffers, panel_packing's pairs,
// the pair_dot Opt).
#include "ir/uop.hpp"

namespace loom {

// Every value of float `narrow` is one of float `wide` (bfloat16 or float16 to float32,
// float32 to float64), both scalar dtypes.
inline bool widens_exactly(DType narrow, DType wide) {
  return narrow.is_float() && wide.is_float() && narrow.lanes == 1 && wide.lanes == 1 &&
         narrow.itemsize() < wide.itemsize();
}

// A CAST that widens its source exactly (widens_exactly).
inline bool is_exact_widening(const UOp& u) {
  return u.op == Op::CAST && widens_exactly(u.src.at(0)->dtype, u.dtype);
}

// A bfloat16 value widened to float32: a factor the bfloat16 dot-product unit takes.
inline bool is_widened_bf16(const UOpPtr& x) {
  return x->op == Op::CAST && x->dtype == DType::Float32 && x->src.at(0)->dtype == DType::BFloat16;
}

}  // namespace loom
