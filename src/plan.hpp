#pragma once
// A plan: the schedule of a realize made over placeholder buffers, so it can be
// cached and run again over other buffers of the same shapes. Every buffer is
// named by its index in the run's buffer table: the graph's input BUFFERs by
// position (src/graph_key.hpp) first, then the buffers the plan allocates. The
// engine binds real buffers to the table and runs the plan's items in order:
// its kernels, and between them its collectives (docs/distributed.md).
#include "ir/collective.hpp"
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
  // The kernel's variables that are the graph's sizes (Plan::variables): each
  // run passes their values. (position in `vars`, index in Plan::variables).
  // With any, parallel_extent is worked out per run.
  std::vector<std::pair<uint32_t, uint32_t>> run_vars;
};

struct BucketPiece {
  uint32_t buffer = 0;  // buffer table index
  int64_t offset = 0;   // elements
  int64_t size = 0;
};

// A collective item: the buffers of a COLLECTIVE node's input and result. It
// starts (non-blocking) after the plan's first `after` kernels, as soon as its
// input is written, and the executor waits for it before kernel `wait`, the
// first that touches its buffers (kernels.size(): at the end of the run), so
// the kernels in between (the rest of a backward pass) run while it travels.
// `input == output` runs it in place (the input was a buffer only this item reads).
struct PlanCollective {
  CollectiveArg arg;
  uint32_t input = 0;  // buffer table indices
  uint32_t output = 0;
  DType dtype;
  int64_t size = 0;  // the output's elements (all_gather's input has size / ranks)
  size_t after = 0;
  size_t wait = 0;   // >= after; == after: it ends before kernel `after` runs
  std::string name;  // unique within the plan: "all_reduce(sum) #0"
  // A bucket (ir/collective.hpp): buffers the start copies into `output` at their
  // element offsets, before it runs in place (input == output). Empty otherwise.
  std::vector<BucketPiece> pieces;
};

struct PlanBuffer {  // a buffer the plan allocates on each run
  DType dtype;
  int64_t size = 0;  // elements; for a symbolic count, its upper bound
  // The elements over the plan's variables, when they depend on them: each run
  // allocates what its values need (`size` is what the memory plan budgets).
  Dim count;
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
  size_t inputs = 0;  // table[0, inputs): the graph's buffers by position
  // The variables of the graph's symbolic sizes, sorted by name (src/unbind.hpp):
  // the plan serves every binding, and a run passes one value for each, in order.
  std::vector<UOpPtr> variables;
  std::vector<PlanBuffer> allocations;      // table[inputs + j]
  std::vector<PlanKernel> kernels;          // in dependency order
  std::vector<PlanCollective> collectives;  // in start order (their `after` never decreases)
  std::vector<PlanResult> results;          // one per target
  std::vector<PlanMemory> memory;           // per allocation: dead intermediates' memory reused
};

// What a plan's kernels cost against the same graph scheduled with every op
// realized (each computed once, in a kernel of its own): their ratio is what
// fusion adds by computing values again where they are read (docs/pipeline.md,
// "What fusion may recompute"). A kernel costs its arithmetic (ir/kernel_cost.hpp's
// kernel_arithmetic), one operation per element it moves (the engine's
// kernel_work) and its launch: recomputing a cheap value where it is read costs
// less than a buffer's store and load and a kernel more, which the materialised
// plan pays.
struct PlanCost {
  double scheduled = 0, materialised = 0;          // kernel_work
  double scheduled_ops = 0, materialised_ops = 0;  // arithmetic alone
  double recompute_ratio() const;                  // scheduled / materialised; 1 when both are 0
};
PlanCost plan_cost(const Plan& plan, const GraphSignature& sig, const std::vector<UOpPtr>& targets);

// Calls `kernel(k)`, `start(c)` and `wait(c)` for the plan's items in the order
// they run. Before kernel k (and at the end, k = kernels.size()): the waits of
// collectives started earlier whose `wait` is k, then the starts of those whose
// `after` is k, each waited for at once when its `wait` is k too.
template <class KernelFn, class StartFn, class WaitFn>
void for_each_item(const Plan& plan, KernelFn&& kernel, StartFn&& start, WaitFn&& wait) {
  size_t c = 0;
  for (size_t k = 0; k <= plan.kernels.size(); ++k) {
    for (size_t w = 0; w < c; ++w)
      if (plan.collectives[w].wait == k && plan.collectives[w].after < k) wait(plan.collectives[w]);
    for (; c < plan.collectives.size() && plan.collectives[c].after == k; ++c) {
      start(plan.collectives[c]);
      if (plan.collectives[c].wait == k) wait(plan.collectives[c]);
    }
    if (k < plan.kernels.size()) kernel(plan.kernels[k]);
  }
}

// Schedules `targets` (whose graph `sig` describes) with each input BUFFER
// replaced by a placeholder. `into[i]` is the position of the input buffer that
// target i may be written into (an in-place assign), or -1. COLLECTIVE nodes
// split the graph: the kernels computing their inputs, each collective, then
// the kernels reading their results, each part scheduled on its own. Within a
// part, the kernels of the collective input needing the fewest come first
// (src/plan_overlap.hpp), so its collective starts early.
Plan plan_schedule(const std::vector<UOpPtr>& targets, const GraphSignature& sig,
                   const std::vector<int64_t>& into);

}  // namespace loom::detail
