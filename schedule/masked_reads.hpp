#pragma once
// masked_reads (rangeify's graph, after row_padding): a buffer whose value is a constant
// outside a condition on its own coordinates tells the sums that read it so. Each read of
// it inside a sum over a range the condition, taken at the read's coordinates, reads
// selects that constant where the condition fails: the same value, and the bound now
// visible inside the reading kernel.
//
//   Before:  P = BUFFERIZE(WHERE(k <= q, p(q, k), 0.0), q, k)
//            ... REDUCE(LOAD(INDEX(P, i, j)) * v(j, d), j)
//   After:   ... REDUCE(WHERE(j <= i, LOAD(INDEX(P, i, j)), 0.0) * v(j, d), j)
//
// Causal attention's weights are such a buffer (0 above the diagonal), and so are its
// scores (-inf there) and their gradients: with the select in the product's sum, codegen's
// reduce_bounds runs that sum over the keys the condition allows, not all of them. A read
// outside such a sum (an elementwise kernel's) is left alone: there a select, or a masked
// load, costs more than the loads it saves. Only the constants a sum can skip are carried:
// 0.0 (ADD's identity) and -inf (MAX's), and only a condition of index arithmetic
// (compares, logic and casts of the buffer's ranges and constants: no load) that compares
// one coordinate with another: a triangle, not a rectangle's edge (a panel's zero columns
// past n are there so that the product reads whole panels).
#include "ir/pattern.hpp"

namespace loom {

const PatternMatcher& masked_reads();

}  // namespace loom
