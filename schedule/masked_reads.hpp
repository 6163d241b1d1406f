#pragma once
// masked_reads (rangeify's graph, after row_padding): a buffer whose value is a constant
// outside a condition on its own coordinates tells its readers so. Each read of it
// selects that constant where the condition, taken at the read's coordinates, fails, and
// loads only where it holds: the same value, now visible inside the reading kernel.
//
//   Before:  P = BUFFERIZE(WHERE(k <= q, p(q, k), 0.0), q, k)
//            ... REDUCE(LOAD(INDEX(P, i, j)) * v(j, d), j)
//   After:   ... REDUCE(WHERE(j <= i, LOAD(INDEX(P, i, j, j <= i)), 0.0) * v(j, d), j)
//
// Causal attention's weights are such a buffer (0 above the diagonal), and so are its
// scores (-inf there) and their gradients: their readers load half of each [T, T] buffer,
// and with the select in the product's sum codegen's reduce_bounds runs that sum over the
// keys the condition allows, not all of them. The buffer itself is still stored whole: a
// guarded store is a masked one, which cannot stream past the cache (docs/performance.md). Only the constants
// a sum can skip are carried: 0.0 (ADD's identity) and -inf (MAX's), and only a condition of index arithmetic
// (compares, logic and casts of the buffer's ranges and constants: no load) that compares one coordinate with
// another: a triangle, not a rectangle's edge (a panel's zero columns past n are there so that the product
// reads whole panels).
#include "ir/pattern.hpp"

namespace loom {

const PatternMatcher& masked_reads();

}  // namespace loom
