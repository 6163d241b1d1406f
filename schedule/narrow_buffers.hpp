#pragma once
// narrow_buffers: a proposed buffer of a value widened from a narrower float (a
// bfloat16 or float16 value cast to float32, as Autocast's operands are) stores the
// narrow value, and its reads widen it.
//
//   Before:  LOAD(INDEX(BUFFERIZE(CAST f32 (y: bf16), r...), i...))
//   After:   CAST f32 (LOAD(INDEX(BUFFERIZE(y, r...), i...)))          the buffer is bf16
//
// The widening is exact, so every read sees the same value from half the bytes, and a
// product reading it keeps the bfloat16 operand that panel_packing pairs for the
// dot-product unit (a bfloat16 k shared by attention's forward and backward). Realization
// points keep their dtype: it is the one the user asked for.
#include "ir/pattern.hpp"

namespace loom {

const PatternMatcher& narrow_buffers();

}  // namespace loom
