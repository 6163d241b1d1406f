#pragma once
// range_flatten (per kernel): nested END and REDUCE chains become one flat
// list of ranges, and a listed expression becomes the ranges in it.
//
//   Before:  END(END(END(comp, r0), r1), r2)      loops r2 { r1 { r0 { comp } } }
//   After:   END(comp, r2, r1, r0)                 the same loops, outermost first
//
// Listed expressions appear after a range is split or merged
// (END(x, r3*4 + r4) -> END(x, r3, r4)). Two REDUCEs of one op nest into one
// REDUCE over both ranges, which adds a float sum in another order.
#include "ir/pattern.hpp"

namespace loom {

const PatternMatcher& range_flatten();

}  // namespace loom
