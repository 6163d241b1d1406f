#pragma once
// buffer_removal: decides which BUFFERIZE that rangeify proposed stays a
// buffer, and inlines the rest by substituting the consumer's index.
//
//   Before:  LOAD(INDEX(BUFFERIZE(LOAD(INDEX(BUFFER#1, r0*2)) * 3.0, r0), 5 - r7))
//   After:   LOAD(INDEX(BUFFER#1, (5 - r7)*2)) * 3.0
//
// Keep rules, in order (docs/pipeline.md): a realization point (CONTIGUOUS)
// stays; a value reading more than kMaxInlinedBuffers buffers stays; a value
// whose reduce reads a buffer stays (the reduce would run once per read),
// unless each reduce is over the reader's outermost ranges and read along more
// (a row's max or sum in the kernel over those rows: it runs once per row;
// place_ranges must have filled the context), or LOOM_PCONTIG >
// kPcontigInlineLevel and the buffer is at least kMinOutputToInput times larger
// than what it reads; and, the cost rule, a value whose recomputation where its
// reads would compute it (its value_ops times the evaluations beyond one per
// element: the reader's loops around the read that it does not depend on) costs
// more than writing and reading back its bytes at StageContext::costs.ops_per_byte
// stays, unless it costs at most kCheapOps an element. A value that reads no buffer
// (index math) is inlined. Everything else is inlined. Folds beside them: BUFFERIZE(CONST) and INDEX(CONST)
// read the constant, and a buffer read at exactly its own ranges is its value.
#include "ir/pattern.hpp"
#include "schedule/stage.hpp"

namespace loom {

const PatternMatcher& buffer_removal();

// Records where each BUFFERIZE of `root` has its ranges (StageContext::range_places)
// and how many reads each has (StageContext::buffer_reads), which buffer_removal's
// row-reduce rule and cost rule read: call it on the graph before the stage.
void place_ranges(const UOpPtr& root, StageContext& ctx);

}  // namespace loom
