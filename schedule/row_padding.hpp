#pragma once
// row_padding (rangeify's graph, last of the buffer stages): an intermediate buffer
// whose rows are a whole number of L1 set strides long (sets x line: 4 KiB, 1024
// floats, on this machine) is laid out with one line of padding after each row, so
// consecutive rows start in different sets of L1.
//
//   Before:  P = BUFFERIZE(p(q, k), q, k) [1024, 1024]      rows 4 KiB apart: one set
//   After:   P = BUFFERIZE(p(q, k), q, k) [1024, 1040]      rows 4160 B apart: the next set
//
// A product that reads such a buffer down its columns (attention's dV = Pᵀ dO: each step
// of k a few floats of the next row) otherwise finds every line of a tile's block of k in
// one set of L1, and reads them all from L2 again for the next tile. The ranges and every
// reader's coordinates are unchanged: only the shape, from which kernel_split lays the
// buffer out, gains the padding, which is never written or read. A root of the graph (a
// result, or a buffer written in place) keeps its layout, and so does a buffer with a
// guarded store, a symbolic size, or a single row. docs/performance.md, "Rows a line
// apart in L1", gives the figures.
#include "ir/pattern.hpp"

namespace loom {

const PatternMatcher& row_padding();

}  // namespace loom
