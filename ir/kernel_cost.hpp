#pragma once
// How much arithmetic a kernel does, for the GFLOP/s that LOOM_DEBUG=2,
// loom-dump --run and the profile report. An estimate in the roofline sense:
// each ALU op of the kernel's values counts once per iteration of the ranges it
// depends on (where the linearizer places it), a REDUCE's fold once per
// iteration of its ranges, MULACC twice; index arithmetic (what only feeds
// INDEX) and casts count nothing. SIMD lanes count each.
#include "ir/uop.hpp"

#include <cstdint>

namespace loom {

// Floating-point and integer operations one run of `kernel` performs. A range
// with a symbolic size counts at its upper bound.
double kernel_flops(const UOpPtr& kernel);

// The arithmetic one run of `kernel` does, for the recompute bound
// (docs/pipeline.md, "What fusion may recompute"), counted where its loops nest
// (END and REDUCE list them outermost first): a value runs once per iteration of
// every loop around the innermost one it reads, and a value inside a reduce's loop
// once per iteration of the loops around that reduce too (a GELU fused into a
// matmul's reduce runs once per output column, though it reads no column). Only arithmetic on data counts,
// with kernel_flops' weights: an op with a loaded value among its sources. Index arithmetic, a pad's validity
// and the select it guards, an arange and what is computed from it alone are addressing, which moves no
// value.
double kernel_arithmetic(const UOpPtr& kernel);

// The operations one element of `u` costs as codegen emits it, with kernel_flops' weights (a
// Float32 transcendental its lowered form's, ir/float_math.hpp).
double op_cost(const UOp& u);

// What running a kernel costs beyond its work, in operations: the executor's dispatch, its
// argument table and the call. A replayed kernel's launch takes the time of thousands of
// SIMD-lane operations (docs/performance.md, "What a kernel's launch costs"); this is a
// floor. A schedule that recomputes a little to save a kernel saves at least this.
inline constexpr double kKernelLaunchOps = 1024;

}  // namespace loom
