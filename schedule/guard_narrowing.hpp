#pragma once
// guard_narrowing (per kernel): a loop whose store changes memory only at the iterations
// lo <= r < hi runs over those only, r = r' + lo with r' < hi - lo. Such a store writes
// back what it loaded from the same address wherever its condition fails
// (`out[i] = where(g, x, out[i])`); the bounds are conjuncts `r < hi` and `lo - 1 < r` of
// g that read no loop (numbers and variables).
//
//   Before:  END(STORE(out[r*8 + l], WHERE((r < P + 1) & (P - 1 < r), x(r), out[r*8 + l])), r < 16, l < 8)
//   After:   END(STORE(out[(r' + P)*8 + l], WHERE(..., x(r' + P), out[(r' + P)*8 + l])), r' < 1, l < 8)
//
// An assign into a slice (`cache.slice(2, P, P + 1).assign(row)`, a write through a view)
// is such a store into the cache's own buffer: narrowed, the kernel visits the rows it
// writes instead of all of them. Only kernels of one store; the new extent is
// max(0, min(hi, end) - max(lo, 0)).
#include "ir/pattern.hpp"

namespace loom {

const PatternMatcher& guard_narrowing();

}  // namespace loom
