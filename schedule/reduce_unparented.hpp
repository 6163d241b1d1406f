#pragma once
// reduce_unparented: a reduce range its body does not use.
//
//   Before:  REDUCE[ADD](LOAD(INDEX(BUFFER#1, r0)), r0, r1)    r1 = RANGE(8), unused
//   After:   REDUCE[ADD](LOAD(INDEX(BUFFER#1, r0)), r0) * 8.0
//
// ADD multiplies by the range's size, MUL raises to its power (floats only:
// POW is a float op), MAX drops the range. A float sum times N rounds once
// where N additions round N times (docs/semantics.md). A reduce over a range
// of size 0 is its op's identity.
#include "ir/pattern.hpp"

namespace loom {

const PatternMatcher& reduce_unparented();

}  // namespace loom
