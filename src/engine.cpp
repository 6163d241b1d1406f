#include "src/engine.hpp"

#include "src/in_place.hpp"

#include "codegen/codegen.hpp"
#include "codegen/linearizer.hpp"
#include "ir/flags.hpp"
#include "ir/kernel_cost.hpp"
#include "ir/log.hpp"
#include "ir/profile.hpp"
#include "ir/text.hpp"
#include "runtime/buffer.hpp"
#include "runtime/disk_cache.hpp"
#include "runtime/executor.hpp"
#include "runtime/kernel_cache.hpp"
#include "schedule/schedule.hpp"
#include "schedule/stages.hpp"
#include "src/autograd.hpp"
#include "src/beam.hpp"
#include "src/dump_files.hpp"
#include "src/graph_key.hpp"
#include "src/in_flight.hpp"
#include "src/llvm_backend.hpp"
#include "src/offset_vars.hpp"
#include "src/plan.hpp"
#include "src/schedule_cache.hpp"
#include "src/stage_observers.hpp"
#include "src/step_recording.hpp"
#include "src/tensor_views.hpp"
#include "src/unbind.hpp"

#include <loom/debug.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <mutex>
#include <set>
#include <unordered_map>
#include <unordered_set>

namespace loom::detail {

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Does LOOM_BEAM search the optimiser's Opts? Not when the optimiser is off, nor for
// bounds-checked code (LOOM_CHECK_BOUNDS is for finding bugs, not speed).
bool beam_on(const Flags& flags) {
  return flags.beam > 0 && flags.beam_budget > 0 && !flags.noopt && !flags.disabled("optimizer") &&
         !flags.check_bounds;
}

// The flags that change what codegen makes of a kernel: the kernel cache's key has them.
std::string codegen_options(const Flags& flags) {
  std::string out = flags.noopt ? "noopt" : "";
  for (std::string_view pass : kernel_pass_names())
    if (flags.disabled(pass)) out += fmt::format(" -{}", pass);
  if (flags.check_bounds) out += " check_bounds";
  if (flags.vector_bits) out += fmt::format(" vector_bits={}", flags.vector_bits);
  // A searched kernel's Opts are not the heuristic's: the two never alias in a cache.
  if (beam_on(flags)) out += fmt::format(" beam={}", flags.beam);
  // The machine: its ISA and caches change the code (and the objects on disk).
  return out + " " + target_named(flags.target).key();
}

// The flags that change what the scheduler makes of a graph, and the codegen
// ones (a plan stores each kernel's parallel extent, which the optimiser
// chooses): the schedule cache's key has them.
std::string schedule_options(const Flags& flags) {
  std::string out = "pcontig=" + std::to_string(flags.pcontig) + ";disable=";
  for (const auto& name : flags.disable) out += name + ",";
  return out + ";" + codegen_options(flags);
}

// codegen_options and schedule_options of one flags snapshot.
struct OptionTexts {
  std::string codegen, schedule;
};

// The option texts of the snapshot in force, kept per thread beside the snapshot
// (immutable, and held, so its address is not reused): every realize keys its plan
// and every kernel run looks its kernel up by them, and the Target's key alone is
// a dozen formats.
const OptionTexts& current_options(const Flags& flags) {
  thread_local std::shared_ptr<const Flags> snapshot;
  thread_local OptionTexts texts;
  if (snapshot.get() != &flags) {
    std::shared_ptr<const Flags> current = loom::flags();
    texts = {codegen_options(flags), schedule_options(flags)};
    snapshot = current.get() == &flags ? std::move(current) : nullptr;
  }
  return texts;
}
const std::string& current_codegen_options(const Flags& flags) { return current_options(flags).codegen; }

// A LOOM_DISABLE name that no stage or kernel pass has, or a LOOM_ENABLE name that no
// stage off by default has, is a misspelling: warned once per name (the set is the only state, guarded by its
// mutex), with the names.
void warn_unknown_disabled(const Flags& flags) {
  static std::mutex mu;
  static auto* warned = new std::set<std::string>();  // never destroyed: realizes may run at exit
  for (const std::string& name : flags.disable) {
    const auto& stages = rewrite_stage_names();
    const auto& passes = optional_kernel_pass_names();
    if (std::find(stages.begin(), stages.end(), name) != stages.end() ||
        std::find(passes.begin(), passes.end(), name) != passes.end() || name == kOffsetVarsPass)
      continue;
    const std::lock_guard lock(mu);
    if (!warned->insert(name).second) continue;
    log().warn(
        "LOOM_DISABLE names '{}', which is no stage or pass; ignored. The stages are {}; the kernel "
        "passes are {}; the plan pass is {}",
        name, fmt::join(stages, ", "), fmt::join(passes, ", "), kOffsetVarsPass);
  }
  for (const std::string& name : flags.enable) {
    const auto& off = off_by_default_stage_names();
    if (std::find(off.begin(), off.end(), name) != off.end()) continue;
    const std::lock_guard lock(mu);
    if (!warned->insert("enable " + name).second) continue;
    log().warn(
        "LOOM_ENABLE names '{}', which is no stage that is off by default; ignored. Those stages are {}",
        name, fmt::join(off, ", "));
  }
}

// A text stage of a kernel (its AST, loops, LLVM IR, assembly): logged from
// LOOM_DEBUG `level` on and written to LOOM_DUMP_DIR.
void show_stage(const Flags& flags, int level, const std::string& kernel, std::string_view stage,
                std::string_view ext, const std::string& text) {
  if (flags.debug >= level) log().info("kernel {} at stage {}:\n{}", kernel, stage, text);
  if (!flags.dump_dir.empty()) dump_stage_file(flags.dump_dir, kernel, stage, ext, text);
}

// Where one kernel's compile time went, for LOOM_DEBUG=2.
struct CompileTimes {
  double optimizer = 0, emit = 0;  // loom's kernel passes; linearizer and the backend's render
  CompileTimings compile;
};

void log_compile(const CompiledKernel& k, const std::string& source, const std::string& effort,
                 const CompileTimes& t) {
  const CompileTimings& c = t.compile;
  const double total = t.optimizer + t.emit + c.parse + c.optimize + c.codegen + c.link;
  log().info(
      "  {} compiled in {:.3f} ms ({}): optimiser {:.2f}, emit {:.2f}, LLVM parse {:.2f}, passes {:.2f}, "
      "codegen {:.2f}, link {:.2f}; {} lines of IR, {} bytes of code",
      k.name, total, effort, t.optimizer, t.emit, c.parse, c.optimize, c.codegen, c.link,
      std::count(source.begin(), source.end(), '\n'), k.code->code_bytes());
}

// Schedules the graph over placeholders and compiles every kernel before any
// runs, so a kernel that fails to compile leaves nothing half done.
std::shared_ptr<const Plan> build_plan(const std::vector<UOpPtr>& targets, const GraphSignature& sig,
                                       const std::vector<int64_t>& into, const std::vector<UOpPtr>& variables,
                                       const Flags& flags) {
  auto plan = std::make_shared<Plan>(schedule_plan(targets, sig, into, flags));
  plan->variables = variables;
  // Each distinct kernel compiles once, all of them at once on the arena's
  // threads; the loop after them then hits the kernel cache.
  std::vector<PlanKernel*> distinct;
  std::unordered_set<const UOp*> seen;
  for (auto& k : plan->kernels)
    if (seen.insert(k.ast.get()).second) distinct.push_back(&k);
  // A search times its candidates: one kernel at a time, on the calling thread.
  if (beam_on(flags))
    for (PlanKernel* k : distinct) compile_planned_kernel(*k, flags, false, variables);
  else
    run_tasks(distinct.size(),
              [&](size_t i) { compile_planned_kernel(*distinct[i], flags, false, variables); });
  for (auto& k : plan->kernels) compile_planned_kernel(k, flags, false, variables);
  return plan;
}

// A schedule whose new buffers together exceed physical memory is refused
// before any is allocated: the process goes on, and nothing is half written.
// `sizes`: per allocation, its elements in this run.
void check_fits_in_memory(const Plan& plan, const std::vector<int64_t>& sizes) {
  int64_t total = 0, largest = 0;
  size_t big = 0;
  for (size_t j = 0; j < sizes.size(); ++j) {
    int64_t bytes = 0;
    if (__builtin_mul_overflow(sizes[j], int64_t{plan.allocations[j].dtype.itemsize()}, &bytes) ||
        __builtin_add_overflow(total, bytes, &total))
      total = std::numeric_limits<int64_t>::max();
    if (bytes >= largest) largest = bytes, big = j;
  }
  const auto limit = static_cast<int64_t>(physical_memory_bytes());
  if (total > limit)
    throw Error(
        fmt::format("realize: the result needs {} bytes of new buffers (the largest {} elements of {}), "
                    "more than the machine's {} bytes of physical memory",
                    total, sizes[big], to_string(plan.allocations[big].dtype), limit));
}

// An assign whose result went to a fresh buffer leaves its target's memory to
// the old readers: marked retired (runtime/buffer.hpp), as loom::Capture checks.
void retire_if_written_past(const UOpPtr& pending, const UOpPtr& result) {
  if (pending->op != Op::ASSIGN || !is_buffer_view(pending->src[0])) return;
  const UOpPtr& target = pending->src[0]->op == Op::BUFFER ? pending->src[0] : pending->src[0]->src[0];
  const UOpPtr& written = result->op == Op::BUFFER ? result : result->src[0];
  if (written->storage() != target->storage() && target->storage())
    static_cast<Buffer*>(target->storage().get())->retire();
}

// Runs the plan over a table bound to it and points each pending node at its result.
void run_plan(const Plan& plan, const std::vector<UOpPtr>& table, const RunValues& values,
              const std::vector<std::shared_ptr<TensorNode>>& pending, const Flags& flags) {
  InFlight travelling;
  for_each_item(
      plan,
      [&](const PlanKernel& k) {
        travelling.progress();
        run_planned_kernel(k, table, flags, values);
      },
      [&](const PlanCollective& c) {
        std::vector<const void*> pieces;
        for (const BucketPiece& p : c.pieces) pieces.push_back(buffer_data(table[p.buffer]));
        travelling.start(c, buffer_data(table[c.input]), buffer_data(table[c.output]), pieces, flags.debug);
      },
      [&](const PlanCollective& c) { travelling.wait(c); });
  record_plan_run(plan, table, values, pending, flags);  // before the nodes change: it reads their assigns
  for (size_t i = 0; i < pending.size(); ++i) {
    UOpPtr result = plan_result(plan, table, i, values);
    retire_if_written_past(pending[i]->uop, result);
    point_at(*pending[i], std::move(result), NewUOp::realized);
  }
}

}  // namespace

std::unique_ptr<const Backend> kernel_backend(const Flags& flags) {
  return std::make_unique<LlvmBackend>(flags.target);
}

UOpPtr allocate_buffer(DType dtype, int64_t size, bool zeroed) {
  auto mem = Buffer::allocate(static_cast<size_t>(size) * dtype.itemsize(),
                              zeroed ? Buffer::Fill::Zeros : Buffer::Fill::Uninitialized);
  return UOp::make_buffer(dtype, UOp::next_buffer_id(), size, std::move(mem));
}

void* buffer_data(const UOpPtr& buffer) {
  if (buffer->op != Op::BUFFER || !buffer->storage())
    throw Error("engine: " + std::string(op_name(buffer->op)) + " node has no device memory");
  return static_cast<Buffer*>(buffer->storage().get())->data();
}

Plan schedule_plan(const std::vector<UOpPtr>& targets, const GraphSignature& sig,
                   const std::vector<int64_t>& into, const Flags& flags) {
  ProfileSpan span("schedule", "schedule");
  if (!flags.dump_dir.empty()) dump_stage_file(flags.dump_dir, "graph", "tensor", "uop", to_text(targets));
  Plan plan = plan_schedule(targets, sig, into);
  count_schedule_built();
  if (flags.debug >= 1) {
    const PlanCost c = plan_cost(plan, sig, targets);
    log().info(
        "schedule: {} kernel{}, cost {:.4g} ({:.4g} of it arithmetic) against {:.4g} ({:.4g}) with "
        "every op realized: recompute ratio {:.3f}",
        plan.kernels.size(), plan.kernels.size() == 1 ? "" : "s", c.scheduled, c.scheduled_ops,
        c.materialised, c.materialised_ops, c.recompute_ratio());
  }
  span.arg("kernels", static_cast<double>(plan.kernels.size()));
  return plan;
}

namespace {
// The kernel's code from the disk cache, if it holds it: no rendering, no compiler.
bool load_from_disk(CompiledKernel& k, const Backend& backend, const DiskCache& disk,
                    const std::string& key) {
  auto entry = disk.find(key);
  if (!entry) return false;
  try {
    k.code = backend.load(entry->object, entry->symbol);
  } catch (const Error& e) {  // it passed the checksum but does not link: compile instead
    log().debug("disk cache: {}", e.what());
    return false;
  }
  k.name = entry->symbol;
  k.fn = k.code->fn();
  count_kernel_loaded();
  return true;
}

// Renders, compiles and loads the kernel's code, and stores the object on disk.
// The texts stay in the cache entry only when a dump asked for them.
void compile_fresh(CompiledKernel& k, const UOpPtr& optimized, const Flags& flags, bool keep_text,
                   CompileTimes& times, const Backend& backend, const DiskCache& disk,
                   const std::string& disk_key) {
  const bool texts = keep_text || flags.debug >= 3 || !flags.dump_dir.empty();
  if (texts) {
    k.linear = linearize(optimized).dump();
    show_stage(flags, 3, k.name, "linear", "txt", k.linear);
  }
  auto t0 = Clock::now();
  std::string source = backend.render(optimized, k.name, RenderOptions{k.checks_bounds});
  times.emit = ms_since(t0);
  if (texts) show_stage(flags, 4, k.name, backend.source_stage(), backend.source_extension(), source);
  CompileOptions options;
  options.keep_assembly = keep_text || flags.debug >= 6 || !flags.dump_dir.empty();
  CompiledObject object = backend.compile(optimized, source, k.name, options);
  k.code = backend.load(object.bytes, k.name, &object.timings);
  k.fn = k.code->fn();
  k.assembly = std::move(object.assembly);
  times.compile = object.timings;
  if (options.keep_assembly) show_stage(flags, 6, k.name, "asm", "s", k.assembly);
  disk.store(disk_key, {k.name, std::move(object.bytes)});
  count_kernel_compiled();
  if (flags.debug >= 2) log_compile(k, source, object.effort, times);
  if (texts) k.source = std::move(source);
}
}  // namespace

// A kernel comes from the in-memory cache, else from the disk cache, else it is
// compiled. LOOM_DEBUG >= 3 and LOOM_DUMP_DIR compile it afresh, so that every
// stage shows; the disk copy is then rewritten, never read.
std::shared_ptr<const CompiledKernel> compile_kernel(const UOpPtr& ast, const std::string& name,
                                                     const Flags& flags, bool keep_text) {
  if (auto hit = kernel_cache().find(ast, current_codegen_options(flags))) return hit;
  const std::string options = current_codegen_options(flags);
  ProfileSpan span("compile", name);
  const bool texts = keep_text || flags.debug >= 3 || !flags.dump_dir.empty();
  CompiledKernel k;
  k.ast = ast;
  k.name = name;
  k.options = options;
  k.checks_bounds = flags.check_bounds;
  k.flops = kernel_flops(ast);
  if (texts) show_stage(flags, 3, name, "kernel", "uop", to_text(ast));
  CompileTimes times;
  std::optional<std::vector<Opt>> searched;
  if (beam_on(flags)) searched = beam_opts(ast, name, flags, options).best;
  const auto t0 = Clock::now();
  const UOpPtr optimized =
      lower_kernel(ast, name, flags, KernelLowering{&k.opts, searched ? &*searched : nullptr});
  k.extent = parallel_extent_graph(optimized);
  times.optimizer = ms_since(t0);
  if (texts) show_stage(flags, 3, name, "opts", "txt", to_string(k.opts));
  const std::unique_ptr<const Backend> backend = kernel_backend(flags);
  const DiskCache disk(disk_cache_dir(flags), backend->cache_identity(), flags.cache_bytes);
  // Keyed by the Opts applied and the kernel as the kernel passes left it: an object
  // file compiled by a loom whose optimiser chose otherwise (another parallel range,
  // other lanes, another search's winner) never loads.
  const std::string disk_key =
      disk.enabled() ? fmt::format("options {}\nopts {}\n{}", options, to_string(k.opts), to_text(optimized))
                     : std::string();
  if (texts || !load_from_disk(k, *backend, disk, disk_key))
    compile_fresh(k, optimized, flags, keep_text, times, *backend, disk, disk_key);
  if (kernel_cache().limit() != flags.jit_cache_bytes) kernel_cache().set_limit(flags.jit_cache_bytes);
  return kernel_cache().insert(std::move(k));
}

CandidateKernel compile_candidate(const UOpPtr& ast, const std::string& name, const Flags& flags,
                                  const std::vector<Opt>& opts) {
  const UOpPtr optimized = lower_kernel(ast, name, flags, KernelLowering{nullptr, &opts, false});
  const std::unique_ptr<const Backend> backend = kernel_backend(flags);
  const std::string source = backend->render(optimized, name, RenderOptions{});
  const CompiledObject object = backend->compile(optimized, source, name, CompileOptions{});
  CandidateKernel c;
  c.code = backend->load(object.bytes, name);
  c.fn = c.code->fn();
  c.extent = parallel_extent_graph(optimized);
  return c;
}

std::shared_ptr<const CompiledKernel> compile_planned_kernel(PlanKernel& k, const Flags& flags,
                                                             bool keep_text,
                                                             const std::vector<UOpPtr>& variables) {
  auto compiled = compile_kernel(k.ast, k.name, flags, keep_text);
  // The values in the order of the compiled kernel's variables (sorted by name; the
  // optimiser may have dropped one the kernel no longer reads). A variable of the
  // graph's sizes takes each run's value.
  k.vars.clear();
  k.run_vars.clear();
  for (const UOpPtr& var : kernel_vars(compiled->extent)) {
    const std::string& name = var->get<VarArg>().name;
    const auto it =
        std::find_if(k.bindings.begin(), k.bindings.end(), [&](const auto& b) { return b.first == name; });
    const auto size_var = std::find_if(variables.begin(), variables.end(),
                                       [&](const UOpPtr& v) { return v->get<VarArg>().name == name; });
    if (it != k.bindings.end()) {
      k.vars.push_back(it->second);
    } else if (size_var != variables.end()) {
      k.run_vars.emplace_back(k.vars.size(), size_var - variables.begin());
      k.vars.push_back(var->get<VarArg>().min);  // a placeholder: each run passes its value
    } else {
      throw Error(fmt::format("kernel '{}' reads variable '{}', which the plan does not bind", k.name, name));
    }
  }
  k.parallel_extent = parallel_extent(compiled->extent, k.vars);
  return compiled;
}

UOpPtr plan_result(const Plan& plan, const std::vector<UOpPtr>& table, size_t i, const RunValues& values) {
  const PlanResult& r = plan.results.at(i);
  const UOpPtr& buf = table[r.buffer];
  if (!r.view) return buf;
  // A symbolic shape takes the run's numbers: the buffer holds this run's elements
  // (docs/symbolic.md, "Results of symbolic shape").
  Shape view = *r.view;
  for (Dim& d : view) d = bind_values(d, plan.variables, values).value();
  return UOp::make(Op::RESHAPE, buf->dtype, {buf}, std::move(view));
}

std::vector<UOpPtr> bind_plan(const Plan& plan, const GraphSignature& sig, const RunValues& values) {
  std::vector<UOpPtr> table;
  table.reserve(plan.inputs + plan.allocations.size());
  for (size_t p = 0; p < plan.inputs; ++p) table.push_back(sig.buffer(p));
  // Each allocation's elements in this run: a symbolic count at the run's values.
  std::vector<int64_t> sizes;
  for (const PlanBuffer& a : plan.allocations)
    sizes.push_back(a.count.is_symbolic() ? bind_values(a.count, plan.variables, values).value() : a.size);
  // Every kernel stores each element of its output (no masked stores), so outputs need no zeroing.
  check_fits_in_memory(plan, sizes);
  // Dead intermediates' blocks are shared (src/memory_plan.hpp): one block per owner,
  // as large as the most any sharer needs in this run.
  std::vector<int64_t> block_bytes(plan.allocations.size(), 0);
  for (size_t j = 0; j < sizes.size(); ++j) {
    int64_t& block = block_bytes[plan.memory.at(j).owner];
    block = std::max(block, sizes[j] * static_cast<int64_t>(plan.allocations[j].dtype.itemsize()));
  }
  std::vector<std::shared_ptr<void>> blocks(plan.allocations.size());
  for (size_t j = 0; j < blocks.size(); ++j)
    if (plan.memory[j].owner == j)
      blocks[j] = Buffer::allocate(static_cast<size_t>(block_bytes[j]), Buffer::Fill::Uninitialized);
  for (size_t j = 0; j < blocks.size(); ++j) {
    const PlanBuffer& a = plan.allocations[j];
    table.push_back(UOp::make_buffer(a.dtype, UOp::next_buffer_id(), sizes[j], blocks[plan.memory[j].owner]));
  }
  return table;
}

namespace {
// A kernel compiled with LOOM_CHECK_BOUNDS reads each slot's element count after
// the variables, and reports the first buffer it would have overrun.
void run_bounds_checked(const CompiledKernel& k, const PlanKernel& pk, const std::vector<UOpPtr>& table,
                        const std::vector<void*>& bufs, std::vector<int64_t>& vars, int64_t extent,
                        const std::string& profile_name, const RunWork& work) {
  for (uint32_t slot : pk.args) vars.push_back(table[slot]->get<std::vector<int64_t>>().at(1));
  const int32_t status = run_checked_kernel(as_checked(k.fn), bufs, vars, extent, profile_name, work);
  if (status == 0) return;
  const size_t slot = static_cast<size_t>(status - 1);
  if (slot >= pk.args.size())
    throw Error(fmt::format("kernel '{}' returned status {}, not a buffer slot", pk.name, status));
  const UOpPtr& b = table[pk.args[slot]];
  const auto& arg = b->get<std::vector<int64_t>>();
  throw Error(
      fmt::format("kernel '{}' indexed buffer slot {} (buffer {}: {} {} elements) out of bounds; "
                  "LOOM_CHECK_BOUNDS stopped it before the access (a loom bug: please report it)",
                  pk.name, slot, arg.at(0), arg.at(1), to_string(b->dtype)));
}
}  // namespace

double kernel_bytes(const PlanKernel& k, const std::vector<UOpPtr>& table) {
  double bytes = 0;
  for (uint32_t slot : k.args) {
    const UOpPtr& b = table[slot];
    bytes += static_cast<double>(b->get<std::vector<int64_t>>().at(1) * b->dtype.itemsize());
  }
  return bytes;
}

KernelTiming run_planned_kernel(const PlanKernel& pk, const std::vector<UOpPtr>& table, const Flags& flags,
                                const RunValues& values) {
  ProfileSpan span("run", pk.name);
  auto k = compile_kernel(pk.ast, pk.name, flags);  // a kernel cache hit unless the kernel was evicted
  std::vector<void*> bufs;
  KernelTiming t;
  t.flops = k->flops;
  for (uint32_t slot : pk.args) bufs.push_back(buffer_data(table[slot]));
  t.bytes = kernel_bytes(pk, table);
  std::vector<int64_t> vars = pk.vars;  // the bounds check appends the slots' sizes
  for (const auto& [position, variable] : pk.run_vars) vars[position] = values.at(variable);
  const int64_t extent = pk.run_vars.empty() ? pk.parallel_extent : parallel_extent(k->extent, vars);
  const std::string profile_name = span.active() ? pk.name : std::string();
  const RunWork work = run_work(kernel_work(t.flops, t.bytes), target_of(flags));
  const auto t0 = Clock::now();
  if (k->checks_bounds)
    run_bounds_checked(*k, pk, table, bufs, vars, extent, profile_name, work);
  else
    run_kernel(k->fn, bufs, vars, extent, profile_name, work);
  t.ms = ms_since(t0);
  if (span.active()) {
    span.arg("GFLOP/s", t.gflops());
    span.arg("GB/s", t.gbps());
  }
  if (flags.debug >= 2)
    log().info("  {} {:.3f} ms, {:.3g} GFLOP/s, {:.3g} GB/s ({} buffers)", pk.name, t.ms, t.gflops(),
               t.gbps(), bufs.size());
  return t;
}

namespace {
void realize_targets(const std::vector<std::shared_ptr<TensorNode>>& pending,
                     const std::vector<UOpPtr>& targets, const GraphSignature& sig,
                     const std::vector<UOpPtr>& into_buffers) {
  const auto t0 = Clock::now();
  const std::shared_ptr<const Flags> flags = loom::flags();  // one snapshot for the whole realize
  const StageObservers observers(*flags);
  const ProfileSpan span("realize", "realize");
  const size_t pool_limit = flags->pool_bytes ? flags->pool_bytes : default_buffer_pool_limit();
  if (buffer_pool_limit() != pool_limit) set_buffer_pool_limit(pool_limit);
  std::vector<int64_t> into;  // per target: the position of the buffer it is assigned into, or -1
  for (const auto& b : into_buffers) into.push_back(b ? sig.position_of(b.get()) : -1);
  KeyHasher key(sig.key);
  key.text(current_options(*flags).schedule);
  for (int64_t p : into) key.word(static_cast<uint64_t>(p + 1));
  // Over symbolic sizes the plan is made for the variables, not for this run's
  // values (the key already counts a binding as its variable), and the run passes
  // them: only a miss rebuilds the graph without its bindings.
  std::shared_ptr<const Plan> plan = schedule_cache().find(key.key());
  const bool hit = plan != nullptr;
  count_schedule_cache(hit);
  std::vector<VariableValue> bindings;
  if (!hit) {
    warn_unknown_disabled(*flags);
    UnboundGraph unbound =
        sig.symbolic ? unbind_graph(sig.nodes, targets, "realize") : UnboundGraph{targets, {}};
    bindings = std::move(unbound.values);
    plan = schedule_cache().insert(key.key(),
                                   build_plan(unbound.targets, sig, into, variables_of(bindings), *flags));
  } else if (sig.symbolic) {
    bindings = graph_values(sig.nodes, "realize");
  }
  const RunValues values = numbers_of(bindings);
  run_plan(*plan, bind_plan(*plan, sig, values), values, pending, *flags);
  if (flags->debug >= 1)
    log().info("realize: {} kernel{}{} in {:.3f} ms (schedule cache {})", plan->kernels.size(),
               plan->kernels.size() == 1 ? "" : "s",
               plan->collectives.empty() ? ""
                                         : fmt::format(" and {} collective{}", plan->collectives.size(),
                                                       plan->collectives.size() == 1 ? "" : "s"),
               ms_since(t0), hit ? "hit" : "miss");
}
}  // namespace

void realize_nodes(const std::vector<std::shared_ptr<TensorNode>>& requested) {
  std::vector<std::shared_ptr<TensorNode>> nodes = requested;
  for (auto& d : take_deferred())  // module state updates join whatever this thread realizes next
    if (std::find(nodes.begin(), nodes.end(), d) == nodes.end()) nodes.push_back(std::move(d));
  const GraphsToKeep kept = prepare_realize(nodes);
  std::vector<UOpPtr> targets;
  std::vector<std::shared_ptr<TensorNode>> pending;
  for (const auto& n : nodes)
    if (!is_buffer_view(n->uop) && std::find(pending.begin(), pending.end(), n) == pending.end()) {
      targets.push_back(n->uop);
      pending.push_back(n);
    }
  if (targets.empty()) return;
  GraphSignature sig = sign_graph(targets);  // the one toposort of the graph
  const size_t asked = targets.size();
  for (auto& holder : assigns_reached(sig, pending)) {  // realized with the graph that reads them
    targets.push_back(holder->uop);
    pending.push_back(std::move(holder));
  }
  if (targets.size() != asked) sig.key = sig.key_of(targets);  // same nodes: the assigns were in the graph
  const ViewsSetAside views(pending);
  const std::vector<UOpPtr> into = in_place_buffers(targets, sig);
  realize_targets(pending, targets, sig, into);
  keep_graphs(kept);
  profile_flush();  // after the realize's span has ended
}

}  // namespace loom::detail

namespace loom {

std::vector<ScheduledKernelInfo> schedule_of(const std::vector<Tensor>& tensors) {
  std::vector<UOpPtr> targets;
  for (const auto& t : tensors) {
    if (!t.defined()) throw Error("schedule_of: a tensor is undefined (default-constructed)");
    if (!is_buffer_view(t.node()->uop)) targets.push_back(t.node()->uop);
  }
  if (targets.empty()) return {};
  const detail::GraphSignature sig = detail::sign_graph(targets);
  // Over symbolic sizes, the schedule a realize makes: for the variables, not this binding.
  if (sig.symbolic) targets = detail::unbind_graph(sig.nodes, targets, "schedule_of").targets;
  const detail::Plan plan = detail::plan_schedule(targets, sig, std::vector<int64_t>(targets.size(), -1));
  std::vector<ScheduledKernelInfo> out;
  for (const auto& k : plan.kernels) {
    ScheduledKernelInfo info{k.name, {}, k.outputs};
    for (uint32_t slot : k.args) {
      if (slot < plan.inputs) {
        const UOpPtr& b = sig.buffer(slot);
        info.buffers.push_back({b->dtype.base(), b->get<std::vector<int64_t>>().at(1)});
      } else {
        const detail::PlanBuffer& a = plan.allocations[slot - plan.inputs];
        info.buffers.push_back({a.dtype, a.size});
      }
    }
    out.push_back(std::move(info));
  }
  return out;
}

}  // namespace loom
