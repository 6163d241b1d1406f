#pragma once
// range_split (per kernel): a range used modulo a constant that divides it
// becomes two ranges, so neither needs the modulo.
//
//   Before:  RANGE(12) % 4, RANGE(12) / 4        one loop, divmod in its body
//   After:   r2, r1                              r = r1*4 + r2, r1 = RANGE(3), r2 = RANGE(4)
//
// The rule only records each RANGE(end) % c with end % c == 0; the
// substitution waits for the SINK and splits them all at once (split_ranges,
// fresh axis ids), so no partial rewrite sees half-split loops. A range whose
// end the constant does not divide is left alone.
#include "ir/pattern.hpp"

namespace loom {

const PatternMatcher& range_split();

}  // namespace loom
