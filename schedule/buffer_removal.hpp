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
// unless LOOM_PCONTIG > kPcontigInlineLevel and the buffer is at least
// kMinOutputToInput times larger than what it reads; a unary op read inside a
// reduce's loop stays. Everything else is inlined. Folds beside them:
// BUFFERIZE(CONST) and INDEX(CONST) read the constant, and a buffer read at
// exactly its own ranges is its value.
#include "ir/pattern.hpp"

namespace loom {

const PatternMatcher& buffer_removal();

}  // namespace loom
