#include "src/engine.hpp"

#include "codegen/codegen.hpp"
#include "codegen/linearizer.hpp"
#include "ir/flags.hpp"
#include "ir/log.hpp"
#include "ir/text.hpp"
#include "runtime/buffer.hpp"
#include "runtime/executor.hpp"
#include "runtime/kernel_cache.hpp"
#include "schedule/schedule.hpp"

#include <loom/debug.hpp>

#include <algorithm>
#include <chrono>

namespace loom::detail {

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// The flags that change what codegen makes of a kernel: the kernel cache's key has them.
std::string codegen_options(const Flags& flags) { return flags.noopt ? "noopt" : ""; }

std::shared_ptr<const CompiledKernel> compile(const UOpPtr& ast, const Flags& flags) {
  const std::string options = codegen_options(flags);
  if (auto hit = kernel_cache().find(ast, options)) return hit;
  const int debug = flags.debug;
  CompiledKernel k;
  k.ast = ast;
  k.options = options;
  k.optimized_ast = optimize_kernel(ast, OptimizerOptions{!flags.noopt});
  k.name = kernel_name(ast);
  if (debug >= 3)
    log().info("kernel {} after rangeify:\n{}\nloops:\n{}", k.name, to_text(ast),
               linearize(k.optimized_ast).dump());
  k.llvm_ir = emit_llvm_ir(k.optimized_ast, k.name);
  if (debug >= 4) log().info("kernel {} LLVM IR:\n{}", k.name, k.llvm_ir);
  JitResult jit = Jit::instance().compile(k.llvm_ir, k.name);
  k.fn = jit.fn;
  k.optimized_ir = std::move(jit.optimized_ir);
  count_kernel_compiled();
  return kernel_cache().insert(std::move(k));
}

void run(const ScheduledKernel& sk, const Flags& flags) {
  const auto t0 = Clock::now();
  auto k = compile(sk.ast, flags);
  std::vector<void*> bufs;
  for (const auto& b : sk.buffers) bufs.push_back(buffer_data(b));
  const std::vector<int64_t> vars;  // symbolic shapes arrive with DEFINE_VAR in the API
  run_kernel(k->fn, bufs, vars, parallel_extent(k->optimized_ast, vars));
  if (flags.debug >= 2) log().info("  {} {:.3f} ms ({} buffers)", k->name, ms_since(t0), bufs.size());
}

}  // namespace

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

namespace {
void realize_targets(const std::vector<std::shared_ptr<TensorNode>>& pending,
                     const std::vector<UOpPtr>& targets, const std::vector<UOpPtr>& into) {
  const auto t0 = Clock::now();
  const std::shared_ptr<const Flags> flags = loom::flags();  // one snapshot for the whole realize
  // Every kernel stores each element of its output (no masked stores), so outputs need no zeroing.
  auto output = [](DType dt, int64_t size) { return allocate_buffer(dt, size, false); };
  Schedule schedule = create_schedule(targets, output, into);
  count_schedule_built();
  for (const auto& k : schedule.kernels) run(k, *flags);
  for (size_t i = 0; i < pending.size(); ++i) pending[i]->uop = schedule.results[i];
  if (flags->debug >= 1)
    log().info("realize: {} kernel{} in {:.3f} ms", schedule.kernels.size(),
               schedule.kernels.size() == 1 ? "" : "s", ms_since(t0));
}
}  // namespace

namespace {
// Is `u` referenced only from within `nodes` (a toposort, which itself holds one
// reference to each node) and by `extra` more holders? use_count counts every
// shared_ptr, so any graph or tensor outside `nodes` shows up.
bool held_only_by(const UOpPtr& u, const std::vector<UOpPtr>& nodes, long extra) {
  long refs = extra;
  for (const auto& n : nodes) {
    refs += n == u;
    for (const auto& s : n->src) refs += s == u;
  }
  return u.use_count() == refs;
}

// The buffer an ASSIGN target may be written into in place, or null.
UOpPtr in_place_buffer(const UOpPtr& assign, const std::vector<UOpPtr>& nodes) {
  const UOpPtr& view = assign->src[0];
  if (!is_buffer_view(view) || !held_only_by(view, nodes, 0)) return nullptr;
  if (view->op == Op::BUFFER) return view;
  const UOpPtr& buf = view->src[0];
  return held_only_by(buf, nodes, 0) ? buf : nullptr;
}
}  // namespace

void realize_nodes(const std::vector<std::shared_ptr<TensorNode>>& nodes) {
  std::vector<UOpPtr> targets;
  std::vector<std::shared_ptr<TensorNode>> pending;
  for (const auto& n : nodes)
    if (!is_buffer_view(n->uop)) {
      targets.push_back(n->uop);
      pending.push_back(n);
    }
  if (targets.empty()) return;
  std::vector<UOpPtr> into(targets.size());
  const bool assigns =
      std::any_of(targets.begin(), targets.end(), [](const UOpPtr& t) { return t->op == Op::ASSIGN; });
  if (assigns) {  // the walk counts who holds each target's buffer; skipped when nothing is assigned
    const std::vector<UOpPtr> graph = toposort(targets);
    for (size_t i = 0; i < targets.size(); ++i)
      if (targets[i]->op == Op::ASSIGN) into[i] = in_place_buffer(targets[i], graph);
  }
  realize_targets(pending, targets, into);
}

}  // namespace loom::detail
