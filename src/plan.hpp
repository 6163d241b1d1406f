#pragma once
// A plan: the schedule of a realize made over placeholder buffers, so it can be
// cached and run again over other buffers of the same shapes. Every buffer is
// named by its index in the run's buffer table: the graph's input BUFFERs by
// position (src/graph_key.hpp) first, then the buffers the plan allocates. The
// engine binds real buffers to the table and runs the kernels in order.
#include "src/graph_key.hpp"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace loom::detail {

struct PlanKernel {
  UOpPtr ast;                   // the kernel as scheduled: the kernel cache's key
  std::string name;             // unique within the plan (ir/kernel_name.hpp)
  std::vector<uint32_t> args;   // argument slot -> buffer table index
  size_t outputs = 1;           // args[0, outputs) are the buffers the kernel stores
  int64_t parallel_extent = 1;  // set once the kernel is compiled; runs reuse it
  // The values of the AST's variables (its offsets, src/offset_vars.hpp), by name,
  // and in the order of the compiled kernel's `vars` (set with parallel_extent).
  std::vector<std::pair<std::string, int64_t>> bindings;
  std::vector<int64_t> vars;
};

struct PlanBuffer {  // a buffer the plan allocates on each run
  DType dtype;
  int64_t size = 0;
};

struct PlanMemory {    // src/memory_plan.hpp
  uint32_t owner = 0;  // the allocation whose block this one uses (itself: a block of its own)
  int64_t bytes = 0;   // for an owner: the block's bytes, the most any sharer needs
};

struct PlanResult {
  uint32_t buffer = 0;        // buffer table index
  std::optional<Shape> view;  // the target's shape, when it differs from the flat buffer's
};

struct Plan {
  size_t inputs = 0;                    // table[0, inputs): the graph's buffers by position
  std::vector<PlanBuffer> allocations;  // table[inputs + j]
  std::vector<PlanKernel> kernels;      // in dependency order
  std::vector<PlanResult> results;      // one per target
  std::vector<PlanMemory> memory;       // per allocation: dead intermediates' memory reused
};

// Schedules `targets` (whose graph `sig` describes) with each input BUFFER
// replaced by a placeholder. `into[i]` is the position of the input buffer that
// target i may be written into (an in-place assign), or -1.
Plan plan_schedule(const std::vector<UOpPtr>& targets, const GraphSignature& sig,
                   const std::vector<int64_t>& into);

}  // namespace loom::detail
