#pragma once
// online_softmax: a sum weighted by a softmax row (attention's p @ v) reads the
// row's exponentials where it sums them, and divides by the row's sum once.
//
//   Before:  s  = BUFFERIZE(REDUCE[ADD](q(i, e) * k(j0, e), e), i, j0)          [L, S] scores
//            p  = BUFFERIZE(CONTIGUOUS(x(i, j1) * RECIP(REDUCE[ADD](x(i, j2), j2))), i, j1)
//                 x(i, j) = EXP(LOAD(s, i, j) - REDUCE[MAX](LOAD(s, i, j3), j3))
//            o  = REDUCE[ADD](LOAD(p, i, j) * v(j, d), j)
//   After:   o  = REDUCE[ADD](x'(i, j) * v(j, d), j) * RECIP(REDUCE[ADD](x'(i, j), j))
//                 x'(i, j) = EXP(s'(i, j) - REDUCE[MAX](s'(i, j), j)), s' the scores' value
//
// No buffer of [.., L, S] elements is left to write: the scores, the exponentials
// and the weights are computed where the sums read them. Both sums run over the one
// range j; each value is exp(s - max) times a weight, the max a REDUCE over that very
// range: the max of the whole row (docs/kernel-ir.md), which codegen/lower_reduce.cpp
// folds into the sums' one loop as a running max that rescales them whenever it grows
// (online softmax: one pass over k and v, each score computed once, never stored).
// A read of a buffer indexed by the row and the softmax's axis only (the scores, a
// mask computed as [L, S]) is inlined; others (q, k, v, a projection) stay reads.
#include "ir/pattern.hpp"

namespace loom {

struct StageContext;

const PatternMatcher& online_softmax();
// Counts the reads of each buffer of `root` into ctx.buffer_readers: the stage rewrites
// a sum whose weights no other read needs.
void count_buffer_readers(const UOpPtr& root, StageContext& ctx);

}  // namespace loom
