#pragma once
// The realize engine: schedule -> optimise -> compile (cached) -> run. The one
// place that ties schedule/, codegen/ and runtime/ together.
#include "ir/flags.hpp"
#include "runtime/backend.hpp"
#include "runtime/kernel_cache.hpp"
#include "src/plan.hpp"
#include "src/tensor_node.hpp"

#include <memory>
#include <vector>

namespace loom::detail {

// Realizes the nodes' graphs in one schedule and points each node at its buffer.
// A node holding ASSIGN(view, value) gets `value` written into the view's own
// buffer unless something outliving the realize can still read the old value
// there (src/in_place.hpp; copy on write then), so graphs built before an
// assign keep seeing the old value.
void realize_nodes(const std::vector<std::shared_ptr<TensorNode>>& nodes);

// A fresh BUFFER node owning memory of `size` elements of `dtype`: zeroed, or
// left as it is for a kernel output that the kernel writes whole.
UOpPtr allocate_buffer(DType dtype, int64_t size, bool zeroed = true);

// Base address of a BUFFER node's memory.
void* buffer_data(const UOpPtr& buffer);

// The backend that renders, compiles and loads kernels under `flags` (for the
// LOOM_TARGET they name): the one place the engine names it (src/llvm_backend.hpp).
std::unique_ptr<const Backend> kernel_backend(const Flags& flags);

// The steps of a realize, one by one, for loom-dump.

// Schedules `targets` (whose graph `sig` describes) into a plan, as a realize
// does on a schedule cache miss; `into` as in plan_schedule.
Plan schedule_plan(const std::vector<UOpPtr>& targets, const GraphSignature& sig,
                   const std::vector<int64_t>& into, const Flags& flags);

// The compiled kernel for `ast` under `flags`, from the kernel cache or compiled
// now under `name`. `keep_text` keeps the loops and the assembly in the entry.
std::shared_ptr<const CompiledKernel> compile_kernel(const UOpPtr& ast, const std::string& name,
                                                     const Flags& flags, bool keep_text = false);

// One candidate of a BEAM search (src/beam.hpp): `ast` lowered with exactly `opts`
// unobserved (no dump or kernel checker sees it), compiled and loaded; cached nowhere
// and counted in no counter.
struct CandidateKernel {
  std::shared_ptr<const KernelCode> code;  // owns fn's machine code
  KernelFn fn = nullptr;
  UOpPtr extent;  // the optimised kernel's parallel_extent_graph
};
CandidateKernel compile_candidate(const UOpPtr& ast, const std::string& name, const Flags& flags,
                                  const std::vector<Opt>& opts);
// compile_kernel for a kernel of a plan, which also records the kernel's
// parallel extent in the plan (the optimiser chooses it). `variables` are the
// plan's (Plan::variables): a kernel variable named like one takes the run's value.
std::shared_ptr<const CompiledKernel> compile_planned_kernel(PlanKernel& k, const Flags& flags,
                                                             bool keep_text = false,
                                                             const std::vector<UOpPtr>& variables = {});

// The values of a run of a plan: one per Plan::variables, in order.
using RunValues = std::vector<int64_t>;

// The plan's buffer table: the graph's inputs, then fresh buffers for the rest,
// sized for the run's values.
std::vector<UOpPtr> bind_plan(const Plan& plan, const GraphSignature& sig, const RunValues& values = {});

// Target i's result in a table the plan ran on: its buffer, or a view of it
// (its symbolic sizes the run's values).
UOpPtr plan_result(const Plan& plan, const std::vector<UOpPtr>& table, size_t i,
                   const RunValues& values = {});

struct KernelTiming {
  double ms = 0;     // wall time of the run
  double flops = 0;  // arithmetic (ir/kernel_cost.hpp)
  double bytes = 0;  // bytes of the buffers it is bound to: each read or written once
  double gflops() const { return ms > 0 ? flops / ms / 1e6 : 0; }
  double gbps() const { return ms > 0 ? bytes / ms / 1e6 : 0; }
};

// The bytes of the buffers a kernel of a plan is bound to (each read or written once).
double kernel_bytes(const PlanKernel& k, const std::vector<UOpPtr>& table);
// The work that decides whether a run is shared across threads (runtime/executor.hpp):
// the arithmetic and one operation per element moved.
inline double kernel_work(double flops, double bytes) { return flops + bytes / 4; }

// Runs one compiled kernel of a plan on `table` and times it (LOOM_DEBUG=2 logs the line).
KernelTiming run_planned_kernel(const PlanKernel& k, const std::vector<UOpPtr>& table, const Flags& flags,
                                const RunValues& values = {});

}  // namespace loom::detail
