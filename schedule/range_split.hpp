#pragma once
// range_split (per kernel): a range used modulo or divided by a constant that
// divides it becomes two ranges, so neither needs the divmod. A quotient alone
// counts too: attention's output written in [B, T, H*D] reads its weights at head
// c / D and v at column c, and only split does the product show its batch (the
// head), rows and columns to the contraction analysis (docs/pipeline.md).
//
//   Before:  RANGE(12) % 4, RANGE(12) / 4        one loop, divmod in its body
//   After:   r2, r1                              r = r1*4 + r2, r1 = RANGE(3), r2 = RANGE(4)
//
// The rules only record each RANGE(end) % c or / c with end % c == 0; the
// substitution waits for the SINK and splits them all at once (split_ranges,
// fresh axis ids), so no partial rewrite sees half-split loops. A range whose
// end the constant does not divide is left alone.
#include "ir/pattern.hpp"

namespace loom {

const PatternMatcher& range_split();

}  // namespace loom
