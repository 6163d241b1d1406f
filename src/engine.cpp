#include "src/engine.hpp"

#include "src/in_place.hpp"

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

void realize_nodes(const std::vector<std::shared_ptr<TensorNode>>& nodes) {
  std::vector<UOpPtr> targets;
  std::vector<std::shared_ptr<TensorNode>> pending;
  for (const auto& n : nodes)
    if (!is_buffer_view(n->uop) && std::find(pending.begin(), pending.end(), n) == pending.end()) {
      targets.push_back(n->uop);
      pending.push_back(n);
    }
  if (targets.empty()) return;
  const std::vector<UOpPtr> into = in_place_buffers(targets);
  realize_targets(pending, targets, into);
}

}  // namespace loom::detail
