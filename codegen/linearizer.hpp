#pragma once
// The linearizer: a kernel AST (docs/kernel-ir.md) in, a flat list of
// instructions with explicit loop begin/end markers out. The LLVM emitter walks
// the list in order, keeping a stack of open loops.
//
// Placement (loop-invariant code motion, docs/design.md §6): every value sits in the
// outermost open loop where all the ranges it depends on are defined, so an
// expression of the outer range alone is computed once per outer iteration,
// not once per inner one. Effects a value waits for (AFTER's STORE and END
// sources: lower_reduce's accumulator updates) are placed the same way, so the
// linearizer knows nothing of reductions; a REDUCE must be lowered first.
// Consecutive ENDs of the kernel's SINK share the loops of their common leading
// ranges (a kernel of several outputs, docs/kernel-ir.md).
#include "ir/uop.hpp"

#include <string>
#include <vector>

namespace loom {

enum class LinearKind : uint8_t {
  LoopBegin,  // uop = RANGE: opens its loop; iterates [0, end), or [begin, end) of the ABI if parallel
  LoopEnd,    // uop = RANGE: closes the loop opened last
  Value,      // uop = an ALU/CAST/BITCAST/INDEX/LOAD/AFTER/VECTORIZE/GEP/DEFINE_*: computed from its sources
  Store,      // uop = STORE
};
std::string_view linear_kind_name(LinearKind k);

struct LinearInst {
  LinearKind kind;
  UOpPtr uop;
  int depth;  // number of loops open around this instruction
};

// Sources of a Value are either CONST nodes (the emitter materialises them
// where used; they never appear as instructions), RANGE nodes of open loops,
// or earlier Value instructions of an enclosing loop.
struct LinearKernel {
  UOpPtr kernel;
  std::vector<LinearInst> insts;

  // One instruction a line, indented by loop depth, e.g.
  //   LOOP r0 parallel [begin, end)
  //     %2 = MUL i64 r0, 4
  std::string dump() const;
};

// Throws loom::Error if the kernel is not of the shape docs/kernel-ir.md
// describes, e.g. a value uses a range whose loop is not open around it.
LinearKernel linearize(const UOpPtr& kernel);

}  // namespace loom
