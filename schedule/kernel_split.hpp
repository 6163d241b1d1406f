#pragma once
// Kernel split: every surviving BUFFERIZE becomes a BUFFER and a kernel that
// STOREs into it; reads of buffers become loads from argument slots.
//
//   Before:  BUFFERIZE[(6 4)](LOAD(INDEX(BUFFER#7, r1*6 + r0)), r0, r1)
//   After:   SINK(END(STORE(INDEX(DEFINE_GLOBAL[0], r0*4 + r1), LOAD(INDEX(DEFINE_GLOBAL[1], r1*6 + r0))),
//   r0, r1))
//            with slot 0 -> a new BUFFER, slot 1 -> BUFFER#7
// BUFFERIZEs that share a RANGE (schedule/multi_output.hpp) become one kernel, an
// END per output, their buffers the first slots.
#include "schedule/schedule.hpp"

#include <functional>
#include <string>

namespace loom {

// One pass run on one kernel, announced to pass observers once kernels are named.
struct KernelPassRun {
  std::string pass;
  UOpPtr before, after;
};
// Passes applied to each kernel after its simplify and before the kernels are
// named (the per-kernel stages): returns the new AST, appending what ran to `ran`.
using KernelPasses = std::function<UOpPtr(const UOpPtr& ast, std::vector<KernelPassRun>& ran)>;

// `sink` is rangeify's output. Kernels come out in dependency order; results
// hold one BUFFER view per BUFFERIZE root of `sink`, in order.
// `into` as in create_schedule, per root of `sink`.
Schedule split_kernels(const UOpPtr& sink, const BufferFactory& make_buffer,
                       const std::vector<UOpPtr>& into = {}, const KernelPasses& passes = {});

// True if every load from an output slot reads the element the kernel stores
// there, and, in a kernel of several outputs, feeds that slot's own store (so it
// runs before the store: the linearizer computes a value at its first use, and a
// load only a later output needs would read the new value). The output may then be
// the same buffer as that input.
bool reads_output_only_in_place(const UOpPtr& kernel);

// Range ids renumbered 0, 1, ... in toposort order, so equal computations give
// equal (hash-consed) kernels whatever ids rangeify handed out.
UOpPtr renumber_ranges(const UOpPtr& kernel);

}  // namespace loom
