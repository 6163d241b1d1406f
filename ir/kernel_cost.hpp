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

// The arithmetic one element of a value costs (buffer_removal's decision): its ALU
// ops as kernel_flops counts them, those under a REDUCE once per iteration of the
// reduce's ranges; the buffers it reads (BUFFER, BUFFERIZE) are loads, not entered,
// each costing its bytes at `ops_per_byte` (0: loads are free).
double value_ops(const UOpPtr& value, double ops_per_byte = 0);

// The arithmetic one run of `kernel` performs where the linearizer places it: each
// op once per iteration of every loop open around it (the loops down to the
// innermost one it needs), not only those it needs, so a value recomputed inside a
// reduce's loop counts once per iteration of the loops outside that reduce. One
// exception is the register tile's: inside a reduce, an op that does not need the
// kernel's innermost loop is computed once per `tile_columns` iterations of it (the
// tile broadcasts it over its columns; 1: no tile). A LOAD or STORE of an element
// costs its bytes at `ops_per_byte` (codegen/target.hpp's ratio), so that storing a
// value and loading it back is not free. The recompute check's measure
// (docs/pipeline.md).
double kernel_cost(const UOpPtr& kernel, int64_t tile_columns = 1, double ops_per_byte = 0);

}  // namespace loom
