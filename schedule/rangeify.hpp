#pragma once
// Rangeify: every tensor becomes index arithmetic over RANGEs.
//
//   Before:  PERMUTE[1 0](RESHAPE[(4 6)](BUFFER f32 [24]))                shape (6 4)
//   After:   BUFFERIZE[(6 4)](CONTIGUOUS(LOAD(INDEX(BUFFER, r1*6 + r0))), r0, r1)   r0 < 6, r1 < 4
//
// Movement ops become index math (schedule/movement_index.hpp); REDUCE_AXIS
// becomes REDUCE over fresh reduce ranges. Ranges flow from consumers to
// sources: a node all of whose consumers read it at one index is computed
// there, inside its consumers' loops. Everything else gets a BUFFERIZE over
// ranges of its own, read by each consumer through INDEX(BUFFERIZE, idx...):
//  - a realization point (a target, CONTIGUOUS, ASSIGN, COPY, or where the
//    kernel-size cap ends a huge fused region) always: its value
//    is wrapped in CONTIGUOUS, which no stage removes;
//  - a candidate: a node its consumers read at different indices, or a reduce
//    whose result is broadcast (an EXPAND lies between it and its next buffer),
//    so fusing it would compute it more than once. Rangeify only proposes these;
//    the buffer_removal stage decides which stay (docs/pipeline.md).
// A broadcast (an EXPAND that grows) is never buffered as such: read at different
// indices, each consumer reads its source through it and the source is the
// candidate; and the kernel-size cap ends a region below a broadcast, not at it.
// A buffer at a broadcast would hold each element as often as it is broadcast: a
// matmul's operand read by its product and by its weight's gradient, as a buffer
// of the product's whole iteration space.
#include "ir/uop.hpp"

#include <vector>

namespace loom {

// The nodes that always get a buffer: the targets, CONTIGUOUS, ASSIGN and COPY;
// and, past the kernel-size cap (kMaxKernelOps in rangeify.cpp), an
// intermediate of a huge fused region, so LLVM never sees a giant function.
std::vector<UOpPtr> realization_points(const std::vector<UOpPtr>& targets);

// SINK of one BUFFERIZE per target (same order). BUFFERIZE: src = (value, index
// per axis: a RANGE, or CONST 0 for an axis of size 1), arg = the shape.
UOpPtr rangeify(const std::vector<UOpPtr>& targets);

}  // namespace loom
