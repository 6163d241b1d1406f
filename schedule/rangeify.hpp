#pragma once
// Rangeify: every tensor becomes index arithmetic over RANGEs.
//
//   Before:  PERMUTE[1 0](RESHAPE[(4 6)](BUFFER f32 [24]))            shape (6 4)
//   After:   BUFFERIZE[(6 4)](LOAD(INDEX(BUFFER, r1*6 + r0)), r0, r1)   r0 < 6, r1 < 4
//
// Movement ops become index math (reshape by divmod of the linear index,
// permute by reordering, expand drops the index, pad adds a validity condition,
// shrink an offset, flip n-1-i); REDUCE_AXIS becomes REDUCE over fresh reduce
// ranges; each realization point becomes a BUFFERIZE over its own ranges, and
// its users read it through INDEX(BUFFERIZE, idx...). The rewrite stages (docs/design.md §5) then
// decide which BUFFERIZEs stay; kernel_split turns the survivors into kernels.
#include "ir/uop.hpp"

#include <vector>

namespace loom {

// Which tensor-level nodes get a buffer: the targets, CONTIGUOUS, and every
// REDUCE_AXIS whose result is broadcast (EXPAND) before its next buffer, since
// fusing it there would recompute the reduce per broadcast element (docs/design.md §4);
// and, past the kernel-size cap (kMaxKernelOps in rangeify.cpp), an
// intermediate of a huge fused region, so LLVM never sees a giant function.
std::vector<UOpPtr> realization_points(const std::vector<UOpPtr>& targets);

// SINK of one BUFFERIZE per target (same order). BUFFERIZE: src = (value,
// index per axis: a RANGE, or CONST 0 for an axis of size 1), arg = the shape.
UOpPtr rangeify(const std::vector<UOpPtr>& targets);

}  // namespace loom
