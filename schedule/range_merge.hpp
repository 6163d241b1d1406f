#pragma once
// range_merge (per kernel): two adjacent ranges of one kind, in the same
// REDUCE scopes, become one, when that adds no division or modulo.
//
//   Before:  END(STORE(INDEX(out, r0*1024 + r1), ...), r0, r1)   r0, r1 < 1024
//   After:   END(STORE(INDEX(out, r0), ...), r0)                 r0 < 1048576
//
// The merged range R replaces r0 by R / n1 and r1 by R % n1; the result is
// simplified and kept only if its count of IDIV and MOD nodes did not grow.
// END merges adjacent pairs (its order is the loop nest); REDUCE may merge
// any pair of its ranges, as the loops of one reduce commute.
#include "ir/pattern.hpp"

namespace loom {

const PatternMatcher& range_merge();

}  // namespace loom
