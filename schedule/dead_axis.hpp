#pragma once
// dead_axis: axes of a proposed buffer that carry nothing leave it, and the
// reads drop their index there (the reshape + expand of the smaller buffer).
//
//   Before:  INDEX(BUFFERIZE[(4 1 8)](v(r0), r0, 0, r2), i, 0, j)     v does not use r2
//   After:   INDEX(BUFFERIZE[(4)](v(r0), r0), i)
//
// Dead: an axis of size 1 (indexed by a constant) and an axis whose range the
// value never uses, unless its size is 0 (it keeps the buffer empty: nothing
// to compute, nothing of its empty inputs to read). A buffer with no live axis keeps a BUFFERIZE with no
// ranges (a scalar): removing it would leave no kernel to compute it. Realization points keep their shape: it
// is the shape the user asked for.
#include "ir/pattern.hpp"

namespace loom {

const PatternMatcher& dead_axis();

}  // namespace loom
