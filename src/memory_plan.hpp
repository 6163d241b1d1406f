#pragma once
// The memory planner: inside one plan, a buffer the plan allocates may take
// over the memory of an earlier one that no later kernel reads. Results are
// never given away (they outlive the run). Before/after, for kernels k0..k2:
//   k0 writes t0; k1 reads t0, writes t1; k2 reads t1, writes t2 (the result)
//   -> t2 shares t0's memory: two blocks instead of three.
#include "src/plan.hpp"

namespace loom::detail {

// Fills plan.memory: per allocation, the allocation whose block it uses
// (itself when it gets its own) and, for a block's owner, the block's bytes.
void share_dead_buffers(Plan& plan);

}  // namespace loom::detail
