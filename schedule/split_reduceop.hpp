#pragma once
// split_reduceop (tensor level, before rangeify): a reduce of many inputs into
// few outputs runs as two reduces through a contiguous buffer, so the first,
// with d outputs per output, runs across threads.
//
//   Before:  REDUCE_AXIS[ADD (0)](x)                                   [16777216] -> [1]
//   After:   RESHAPE[(1)](REDUCE_AXIS[ADD (0)](CONTIGUOUS(
//              REDUCE_AXIS[ADD (1)](RESHAPE[(256 65536)](x)))))       -> [256 1] -> [1 1]
//
// Applies when inputs / outputs >= kSplitRatio and there are fewer than
// kSplitOutputsBelow outputs. The divisor d is the first of min(256,
// 2^22 / outputs) down to 8 that divides a reduced axis not made by an EXPAND
// (splitting a broadcast axis reads the same elements again). Each of the d
// parts of the first reduce sums a contiguous run of the input, which suits a
// CPU's caches better than the strided split a GPU wants.
//
// Its second rule splits a reduce over an outer axis of long rows (a page or
// more: sum(0) of [4096,4096]) into blocks of kStridedRows (8) rows, so each column
// tile of the first reduce walks 8 rows instead of 4096; a float sum into blocks of
// 64 rows, which the optimiser's column-sum tiles read 8 rows at a time
// (docs/pipeline.md):
//   REDUCE_AXIS[ADD (0)](x) [4096 4096] -> RESHAPE(REDUCE_AXIS[ADD (0)](CONTIGUOUS(
//     REDUCE_AXIS[ADD (1)](RESHAPE[(64 64 4096)](x)))))
//
// Its third rule splits a GEMV ([1, K] @ [K, N] with b's rows a page or more, 2 MB or
// more of b) into parts of 64 rows of b, the parts axis moved in front, so each part is
// a run of whole rows of b that one thread streams and its partial row is a contiguous
// row of the buffer (docs/performance.md, GEMV):
//   REDUCE_AXIS[ADD (2)](m) [1 4096 4096] -> RESHAPE(REDUCE_AXIS[ADD (0)](CONTIGUOUS(
//     REDUCE_AXIS[ADD (3)](PERMUTE[(2 0 1 3)](RESHAPE[(1 4096 64 64)](m))))))
#include "ir/pattern.hpp"

namespace loom {

const PatternMatcher& split_reduceop();

}  // namespace loom
