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

}  // namespace loom
