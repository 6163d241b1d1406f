#pragma once
// Op classes for the fuzzer's tolerances (docs/fuzzing.md). A value is
// approximate when an op upstream of it may round differently in loom and in
// the reference: the transcendental primitives (EXP2 LOG2 SIN COS POW), float sums
// and products over an axis (their order is the compiler's to choose), and a
// float MULACC (may fuse). Every other op is exactly rounded (IEEE + - * / sqrt,
// casts, movement, comparisons) and must agree to the bit.
#include "ir/uop.hpp"

#include <loom/tensor.hpp>

#include <vector>

namespace loom::fuzz {

bool is_approximate(const UOpPtr& root);
bool graph_is_approximate(const std::vector<Tensor>& tensors);

// The dtype whose tolerance an approximate value gets: the least precise float
// dtype anywhere upstream, since a last-bit difference of an approximate
// Float32 op survives a cast to Float64 (Float64 when no Float32 is upstream).
DType tolerance_dtype(const UOpPtr& root);

}  // namespace loom::fuzz
