#pragma once
// load_collapse (per kernel): a REDUCE[ADD] whose body, with every
// subexpression that does not depend on the reduce range stood in for by a
// variable, simplifies to an expression without that range is replaced by it.
//
//   Before:  REDUCE[ADD](WHERE(CMPLT(r, length), 0, 1), r)     r < 64: sum(1 for r if r >= length)
//   After:   max(min(64 - max(length, 0), 64), 0)               clamp(64 - length, 0, 64)
//
// The variables keep the subexpressions' bounds (vmin/vmax), so the
// simplifier reasons about them, and it never walks into them. The algebra is
// reduce_collapse's closed forms (bounds, lifting, distributive, factoring).
#include "ir/pattern.hpp"

namespace loom {

const PatternMatcher& load_collapse();

}  // namespace loom
