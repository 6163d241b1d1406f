#pragma once
// The numeric rules of docs/kernel-ir.md ("ALU semantics") that a machine's plain
// instructions do not keep, written as UOps: integer division by 0 and INT_MIN / -1,
// shifts by a count outside [0, bits), float-to-integer casts out of range or of
// NaN, and float MAX's NaN and signed zeros. After lower_numerics every such op
// is one whose plain instruction (sdiv, shl, fptosi) is defined on every value
// it can see, so a backend emits it plainly and the rules live here, once.
#include "ir/uop.hpp"

#include <string>

namespace loom {

// The last kernel pass (codegen/pipeline.cpp); never switched off, the emitter
// refuses what it leaves unlowered.
// With `float_max_instruction` (Target::exact_float_max) a Float32 MAX is left to the emitter.
UOpPtr lower_numerics(const UOpPtr& kernel, bool float_max_instruction = false);

// Why `u` still needs lower_numerics (e.g. "the divisor may be 0"), or "" when its
// plain instruction is defined on every value it can see: by range analysis
// (an IDIV by the constant 16) or because its operand is the guard lower_numerics
// builds. The emitter refuses an op for which this is not "".
std::string unlowered_numerics(const UOp& u, bool float_max_instruction = false);

}  // namespace loom
