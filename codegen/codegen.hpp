#pragma once
// codegen/'s interface to the engine: kernel AST in, optimised kernel AST and
// LLVM IR text out. No LLVM types here; docs/kernel-ir.md is the contract.
#include "ir/flags.hpp"
#include "ir/opt.hpp"
#include "ir/target.hpp"
#include "ir/uop.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace loom {

struct OptimizerOptions {
  bool enabled = true;  // LOOM_NOOPT=1 turns the optimiser off
  // The machine to plan for: its vector width and registers (lanes, register
  // tiles), its caches (blocks, chunks); target_of(flags) in lower_kernel.
  Target target = current_target();
  // These Opts instead of the heuristic's (a recorded list replayed, a search's candidate).
  std::optional<std::vector<Opt>> opts;
};

// Chooses per kernel which range goes to SIMD lanes (kind `upcast`), which is
// unrolled for several accumulators (`unroll`), how float sums are blocked, and
// which output range runs across threads (`parallel`): the heuristic's Opts
// (codegen/heuristic.hpp), applied by codegen/opt.hpp with range splitting, so they
// show as RANGE kinds; docs/performance.md explains them. `applied`, when given,
// receives the Opts applied (ir/opt.hpp).
UOpPtr optimize_kernel(const UOpPtr& kernel, const OptimizerOptions& options = {},
                       std::vector<Opt>* applied = nullptr);

// BFloat16 and Float16 ops compute in Float32 and round once (codegen/half_widening.cpp):
// afterwards a half is only loaded, stored, selected or CAST to and from Float32.
UOpPtr widen_halves(const UOpPtr& kernel);

// A sum whose terms are its identity outside a bound on its loop variable (a select
// against 0, a guarded load) runs over the bound only (codegen/reduce_bounds.cpp).
UOpPtr bound_reduces(const UOpPtr& kernel);

// WHERE(c, LOAD(INDEX(buf, i, g)), 0) becomes LOAD(INDEX(buf, i, g AND c)) (codegen/gated_select.cpp):
// one masked load where there were a masked load and a masked move. A STORE of WHERE(c, x, the
// element's own LOAD) becomes a STORE guarded by c: an in-place update writes only what it changes.
UOpPtr fold_gated_selects(const UOpPtr& kernel);

// Float32 EXP2 becomes range reduction and a polynomial from UOps
// (codegen/transcendental.cpp), so it vectorises instead of calling libm per lane.
UOpPtr lower_transcendental(const UOpPtr& kernel);

// Upcast and unroll ranges become SIMD lanes (VECTORIZE, GEP, vector loads and
// stores, a REDUCE over lane ranges folded by halves after its loop).
UOpPtr expand_lanes(const UOpPtr& kernel);

// Every REDUCE becomes accumulator registers (DEFINE_REG) with their updates
// ordered by AFTER, so the linearizer only places what it is given. A vector
// accumulator wider than `vector_bytes` (a Target's) becomes several of that
// width, each its own register.
UOpPtr lower_reduce(const UOpPtr& kernel, int vector_bytes = current_target().vector_bytes);

// A value wider than `vector_bytes` (a Target's) is computed slice
// by slice where GEPs take its slices, and a per-lane validity that is one bool
// in every lane becomes that bool (codegen/split_vectors.cpp).
UOpPtr split_vectors(const UOpPtr& kernel, int vector_bytes = current_target().vector_bytes);

// The kernel passes in order (docs/pipeline.md): optimizer, gated_select, transcendental,
// expander, lower_reduce, split_vectors, numeric_lowering (codegen/numeric_lowering.hpp). Each is reported to
// the pass observers (ir/pass_observer.hpp) under its name; LOOM_DISABLE may switch off the optional ones
// (`optimizer` as LOOM_NOOPT does). The result is what the linearizer and the emitter take. `applied`, when
// given, receives the optimizer's Opts (none when it is off).
UOpPtr lower_kernel(const UOpPtr& kernel, std::string_view name, const Flags& flags,
                    std::vector<Opt>* applied = nullptr);
// How lower_kernel lowers: the optimizer's Opts given (a search's candidate or winner)
// or the heuristic's, and whether the pass observers see the passes (a search's
// candidates are not the kernel a dump or the kernel checker should see).
struct KernelLowering {
  std::vector<Opt>* applied = nullptr;     // receives the optimizer's Opts (none when it is off)
  const std::vector<Opt>* opts = nullptr;  // these instead of the heuristic's; null: the heuristic's
  bool observed = true;
};
UOpPtr lower_kernel(const UOpPtr& kernel, std::string_view name, const Flags& flags,
                    const KernelLowering& how);
// The names of the passes lower_kernel runs, in order.
const std::vector<std::string_view>& kernel_pass_names();
// The names of those LOOM_DISABLE may switch off, in order.
const std::vector<std::string_view>& optional_kernel_pass_names();
// The width in bytes of the column panel a matmul's register tile reads per k
// step under `flags` (codegen/register_tile.hpp), which the scheduler packs b
// into; 0 when the optimiser is off (no tiles: the plain loop nest).
int64_t matmul_panel_bytes(const Flags& flags);
// The rows of that tile: the height of the row panels a is packed into (0: none).
int64_t matmul_panel_rows(const Flags& flags);
// The rows of k that tile sums per block of a panel (kc), which sizes the share of
// L1 the panel takes (0 when the optimiser is off).
int64_t matmul_panel_depth(const Flags& flags);

// Iterations of the kernel's parallel range for these variable values, 1 if none.
int64_t parallel_extent(const UOpPtr& kernel, const std::vector<int64_t>& vars);
// What parallel_extent reads of a kernel: a SINK of its parallel range (if
// any) and its DEFINE_VARs. parallel_extent gives the same for it as for the
// kernel, so a compiled kernel keeps this instead of the whole optimised kernel.
UOpPtr parallel_extent_graph(const UOpPtr& kernel);

// The kernel's DEFINE_VARs, sorted by name: `vars[i]` of the ABI is the i-th.
std::vector<UOpPtr> kernel_vars(const UOpPtr& kernel);

struct EmitOptions {
  // LOOM_CHECK_BOUNDS: every load and store checks its index against the
  // buffer's size and the function returns a status (docs/kernel-ir.md).
  bool check_bounds = false;
  // A contiguous vector store to a buffer that writes at least this many bytes
  // in all is non-temporal (see llvm_emit.cpp); -1: the target's l3_complex_bytes.
  int64_t streaming_store_bytes = -1;
  // The machine the code is for (its ISA's register width splits masked accesses;
  // its L3 sets streaming_store_bytes): LOOM_TARGET's preset, not LOOM_VECTOR_WIDTH's plan.
  Target target = target_named(flags()->target);
};

// LLVM IR text of one verified function `name` with the ABI of docs/kernel-ir.md.
// Throws loom::Error naming the kernel if LLVM rejects what was emitted.
std::string emit_llvm_ir(const UOpPtr& kernel, const std::string& name, const EmitOptions& options = {});

// Testing only: the next emit_llvm_ir call (on any thread) emits a function
// without its final terminator, so verification fails and the error path can
// be exercised. Thread-safe; affects exactly one call.
void codegen_testing_break_next_kernel();

}  // namespace loom
