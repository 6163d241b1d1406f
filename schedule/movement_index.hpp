#pragma once
// The index math of the movement ops: where a movement op's source is read for
// one element of its output. Rangeify builds every load from it, and
// split_reduceop asks it which axes of a view come from an EXPAND.
//
//   PERMUTE (1 0) of a [4 6] source, output index (i, j)  ->  source index (j, i)
//   PAD (1 1) of a [4] source, output index (i)           ->  (i - 1), read where 0 < i < 5
#include "ir/uop.hpp"

#include <vector>

namespace loom {

struct SourceIndex {
  std::vector<UOpPtr> idx;  // one i64 expression per source axis
  UOpPtr inside;            // PAD: where the source is read (Bool); null: everywhere
};

// `op` is a RESHAPE, PERMUTE, EXPAND, PAD, SHRINK or FLIP with a shaped source;
// `out_idx` holds one i64 expression per output axis (CONST 0 on size-1 axes).
SourceIndex movement_source_index(const UOpPtr& op, const std::vector<UOpPtr>& out_idx);

// The row-major linear index of `idx` in `shape` (size-1 axes contribute nothing).
UOpPtr linear_index(const std::vector<UOpPtr>& idx, const Shape& shape);

}  // namespace loom
