#pragma once
// multi_output (rangeify's graph, after panel_packing): a column sum that reads what
// a matmul-like sum reads is computed in the product's kernel, over the product's
// output ranges, so both come out of one pass over the shared operand.
//
//   Before:  BUFFERIZE(REDUCE(dY[m, n] * x[m, k], m), n, k),  BUFFERIZE(REDUCE(dY[m2, n2], m2), n2)
//   After:   BUFFERIZE(REDUCE(dY[m, n] * x[m, k], m), n, k),  BUFFERIZE(REDUCE(dY[m2, n], m2), n)
//
// The sum S joins the product P when: S is an ADD REDUCE over one range and P an ADD
// REDUCE of a product over one range of the same extent, a contraction (none of P's
// loads is over all of P's output ranges: a buffer of the product's whole iteration
// space leaves P no register tile to share); S's output ranges map one
// to one onto output ranges of P of equal extents (not P's padded columns) such that,
// with them and P's reduce range put for S's, every load S makes is a load P makes
// (the same buffer at the same index); neither reads the other, through other
// kernels or directly; neither is written in place. kernel_split then makes the two
// BUFFERIZEs, which share RANGE nodes, one kernel of two outputs (docs/kernel-ir.md).
// The bias gradient beside the weight gradient: docs/performance.md.
#include "ir/pattern.hpp"

namespace loom {

const PatternMatcher& multi_output();

}  // namespace loom
