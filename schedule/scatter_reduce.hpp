#pragma once
// scatter_reduce (per kernel): a sum over lookups i that picks output row r by
// an index becomes a zero fill plus a scatter-add of the picked rows, so the
// work is rows*width + lookups*width instead of rows*width*lookups.
//
//   Before:  out[r, c] = REDUCE[ADD](WHERE(idx[i] == r, v[i, c], 0), i)         loops r, c; reduce i
//   After:   out[r', c'] = 0;  then out[idx[i], c] += v[i, c] where 0 <= idx[i] < R    loops i, c
//
// This is the gradient of a one-hot lookup, gather or index_select with respect
// to its table. The fill is the effect the scatter's accesses wait for (AFTER).
// The loop over i stays sequential (the optimiser puts no range along which a
// store scatters in lanes or on threads), so repeated indices add up in the
// order of i, as the sum did.
// `v * cast(bool)` is read as `where(bool, v, 0)` (docs/semantics.md: inf * 0).
#include "ir/pattern.hpp"

namespace loom {

const PatternMatcher& scatter_reduce();

}  // namespace loom
