#pragma once
// reduce_collapse: a sum over a range replaced by its closed form, so a whole
// loop disappears (one_hot, gather, index_select and embedding lookups become
// direct loads; arange counts become arithmetic).
//
//   Before:  REDUCE[ADD](WHERE(CMPEQ(idx, CAST(r)), LOAD(INDEX(table, r*64 + j)), 0), r)   r < 65536
//   After:   WHERE(0 <= idx < 65536, LOAD(INDEX(table, idx*64 + j, 0 <= idx < 65536)), 0)
//
// For each range of a REDUCE[ADD], the sum over that range alone is rewritten
// with reduce_closed_forms() plus the gather rules and the simplifier; it is
// accepted only when the range is gone, so a failed attempt (say a split into
// two sums that do not both vanish) costs nothing. docs/pipeline.md lists the
// rules; docs/semantics.md what they may change (inf * 0, float sum order).
#include "ir/pattern.hpp"

namespace loom {

// The stage: REDUCE[ADD] nodes whose ranges can be summed away.
const PatternMatcher& reduce_collapse();

// The algebra of a sum over one range r, used inside an attempt (here and by
// load_collapse): the bound patterns (a condition that holds on an interval of
// r counts that interval), lifting (x + y < c -> x < c - y for y, c free of
// the reduce's ranges; likewise == and !=), the distributive split
// sum(x + y) -> sum(x) + sum(y), factoring out what does not depend on r, and
// conditions free of r moved out of the sum.
const PatternMatcher& reduce_closed_forms();

// Does `u` contain the range `r`, open or closed? (A failed attempt leaves a REDUCE over r.)
// Within u's kernel: the buffers (BUFFERIZE) it reads are other kernels, not looked into.
bool mentions_range(const UOpPtr& u, const UOpPtr& r);

}  // namespace loom
