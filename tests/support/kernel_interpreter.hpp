#pragma once
// The kernel-IR interpreter: evaluates a kernel AST (docs/kernel-ir.md) directly,
// with plain nested loops and no memory of codegen. It is the oracle that codegen
// and the schedule stages are checked against. Tests-only; stands on ir/ alone.
#include "ir/uop.hpp"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace loom {

// Runs `kernel` (a SINK of END(STORE)/STORE effects) on the buffers `bufs`
// (indexed by DEFINE_GLOBAL slot) with `vars` (the kernel's DEFINE_VARs sorted by
// name). When end >= 0, the parallel range runs only [begin, end), as one slice
// of the executor would. Every stage of the kernel IR: vectors (VECTORIZE, GEP,
// vector loads and stores), REDUCE, and accumulators (DEFINE_REG with AFTER).
// Throws loom::Error naming the node on IR the contract does not allow.
void interpret_kernel(const UOpPtr& kernel, void* const* bufs, const std::vector<int64_t>& vars,
                      int64_t begin = 0, int64_t end = -1);

// The same, with each slot's size in elements: a load or store outside its
// buffer is a loom::Error naming the slot and the index, never a stray access.
// Returns what the kernel checker needs to judge a pass that reorders floats.
struct KernelRunFacts {
  // The largest finite magnitude of any operand of a float sum (ADD, SUB, an ADD
  // reduce) the kernel computed, 0 if none: the scale that rounding errors of its
  // sums, and of any reordering of them, are relative to.
  double largest_sum_operand = 0;
  // Whether a float op made an infinity from finite operands (an overflow, a
  // division by 0, as of a sum that cancelled to 0 in this order).
  bool made_infinity = false;
  // The least finite, non-zero magnitude a float RECIP or FDIV divided by (infinity if
  // none): a divisor near 0 beside largest_sum_operand is a sum's rounding amplified.
  double smallest_divisor = std::numeric_limits<double>::infinity();
  // The first op whose plain machine instruction (sdiv, shl, fptosi: what the
  // emitter makes of it) would be undefined on values it saw, e.g. "IDIV i32
  // divides by 0", or "". numeric_lowering (codegen/) guards every such op, so
  // the kernel checker holds the kernel after it to "" (the values here follow
  // docs/kernel-ir.md either way).
  std::string plain_undefined;
};
// With `float_max_instruction` (Target::exact_float_max) a Float32 MAX is plain: the
// emitter has instructions for it.
KernelRunFacts interpret_kernel_checked(const UOpPtr& kernel, void* const* bufs,
                                        const std::vector<int64_t>& sizes, const std::vector<int64_t>& vars,
                                        bool float_max_instruction = false);

}  // namespace loom
