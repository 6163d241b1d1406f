#pragma once
// PairDot (ir/opt.hpp): a float sum of products of bfloat16 values, run two terms a step
// on the Target's pair-dot instruction (AVX512_BF16's vdpbf16ps: 16 lanes of
// c + a.odd * b.odd + a.even * b.even). Private to the optimiser.
//
//   Before:  REDUCE(CAST<f32>(a[k]) * CAST<f32>(b[k, j]), k)                 k: 2K iterations
//   After:   REDUCE(CAST<f32>(a[2q + 1 - t]) * CAST<f32>(b[2q + 1 - t, j]), q, t)  t: a pair range
//
// The pair range t becomes the fastest lanes (the expander), and lower_reduce folds each
// pair per step as DOT2 (docs/kernel-ir.md), whose odd lane, t = 1, is k = 2q: the sum
// still adds its terms in the order of k, so a float32 tile over the same values gives
// the same bits (the products of bfloat16s are exact in float32). The schedule lays both
// factors out as such pairs (schedule/panel_packing.cpp), each pair's later k first, so a
// step reads each factor's pairs as one contiguous vector.
#include "ir/target.hpp"
#include "ir/uop.hpp"

namespace loom::kopt {

// `red` is a float32 sum of CAST<f32>(x) * CAST<f32>(y) with x and y bfloat16.
bool is_bf16_product_sum(const UOpPtr& red);
// The sum's range `range` (even, constant) split as above. Throws loom::Error (through
// the caller's misfit) when it does not fit: returns null then.
UOpPtr pair_sum(const UOpPtr& kernel, const UOpPtr& range);
// The range a PairDot would take in `kernel` on `target`: the one range of its main
// END's bfloat16 product sum, even and constant, where after the split every load of
// both factors steps by one element along the pair (the schedule's pair layout). Null if none.
UOpPtr pair_dot_candidate(const UOpPtr& kernel, const Target& target);

}  // namespace loom::kopt
