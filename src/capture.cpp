#include <loom/capture.hpp>

#include "ir/flags.hpp"
#include "ir/log.hpp"
#include "runtime/buffer.hpp"
#include "runtime/executor.hpp"
#include "src/engine.hpp"
#include "src/step_recording.hpp"

#include <loom/debug.hpp>
#include <loom/error.hpp>

#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

namespace loom {

namespace detail {
namespace {

// What one recorded call ran: each kernel with the BUFFER nodes bound to its
// argument slots, and each tensor node a realize pointed at a buffer.
struct StepRecording {
  struct Kernel {
    std::shared_ptr<const CompiledKernel> kernel;
    std::vector<UOpPtr> args;
    int64_t parallel_extent = 1;
    double work = kUnknownWork;  // as the engine passes it: decides whether TBB shares the run
  };
  struct Binding {
    std::weak_ptr<TensorNode> node;
    UOpPtr buffer;
    UOpPtr previous;  // the buffer an assign in the node wrote past (copy on write), or null
  };
  bool with_kernels = true;  // false: only what the call leaves behind (allocated, bindings)
  std::vector<Kernel> kernels;
  std::unordered_map<const void*, UOpPtr> allocated;  // storage -> BUFFER a plan allocated
  std::vector<Binding> bindings;
};

thread_local StepRecording* t_recording = nullptr;

const UOpPtr& base_buffer(const UOpPtr& u) {
  static const UOpPtr none;
  if (u->op == Op::BUFFER) return u;
  if (u->op == Op::RESHAPE && u->src[0]->op == Op::BUFFER) return u->src[0];
  return none;
}

}  // namespace

void record_plan_run(const Plan& plan, const std::vector<UOpPtr>& table,
                     const std::vector<std::shared_ptr<TensorNode>>& pending, const Flags& flags) {
  StepRecording* rec = t_recording;
  if (!rec) return;
  for (const auto& pk : plan.kernels) {
    if (!rec->with_kernels) break;
    StepRecording::Kernel k{compile_kernel(pk.ast, pk.name, flags), {}, pk.parallel_extent};
    for (uint32_t slot : pk.args) k.args.push_back(table[slot]);
    k.work = kernel_work(k.kernel->flops, kernel_bytes(pk, table));
    rec->kernels.push_back(std::move(k));
  }
  for (size_t j = plan.inputs; j < table.size(); ++j)
    rec->allocated.emplace(table[j]->storage().get(), table[j]);
  for (size_t i = 0; i < pending.size(); ++i) {
    const UOpPtr& before = pending[i]->uop;
    const UOpPtr previous = before->op == Op::ASSIGN ? base_buffer(before->src[0]) : nullptr;
    const UOpPtr result = plan_result(plan, table, i);
    if (const UOpPtr& b = base_buffer(result)) rec->bindings.push_back({pending[i], b, previous});
  }
}

}  // namespace detail

namespace {
using detail::base_buffer;
using detail::StepRecording;
using detail::TensorNode;

// Per argument: its dtype, the first argument sharing its buffer, its rank and extents.
using Signature = std::vector<int64_t>;

// A recording turned into a program over a table of buffers:
// [arguments | outputs, fresh on each replay | kept: persistent buffers, and scratch every replay reuses].
struct Program {
  struct Kernel {
    std::shared_ptr<const CompiledKernel> kernel;  // holds the code even if the cache evicts it
    std::vector<uint32_t> slots;
    int64_t parallel_extent = 1;
    double work = kUnknownWork;
  };
  struct Output {
    uint32_t slot;
    UOpPtr recorded;  // the recorded result: a BUFFER, or a reshape of one
  };
  // A tensor whose assign copied (something else still read its old buffer):
  // each replay reads its current buffer and points it at a fresh one.
  struct State {
    std::weak_ptr<TensorNode> node;
    UOpPtr fallback;  // the recorded buffer, read if the tensor has died
    uint32_t out_slot;
    UOpPtr recorded;  // the node's recorded BUFFER, or reshape of one
  };
  // A tensor the call computed afresh: each replay points it at its new value.
  struct Computed {
    std::weak_ptr<TensorNode> node;
    uint32_t slot;
    UOpPtr recorded;
  };
  size_t inputs = 0;
  std::vector<State> states;  // slots [inputs, first_fresh())
  std::vector<Computed> computed;
  // A slot each replay writes anew: its buffer's dtype and size, and the view
  // the last replay handed out there, which the next one writes again when
  // nothing but the Program still holds it (no allocation, no new node).
  struct Fresh {
    DType dtype;
    int64_t size;
    UOpPtr spare;
  };
  std::vector<Fresh> fresh;
  std::vector<UOpPtr> kept;
  // Kept slots the recorded call allocated and only its kernels use (dead
  // intermediates): loom::empty_cache() drops them, the next replay allocates them.
  struct Scratch {
    size_t kept;
    DType dtype;
    int64_t size;
  };
  std::vector<Scratch> scratch;
  std::vector<Kernel> kernels;
  std::vector<Output> outputs;
  size_t first_fresh() const { return inputs + states.size(); }
  size_t first_kept() const { return first_fresh() + fresh.size(); }
};

// A tensor a call computed afresh (a result, or one outliving the call) and its memory.
struct LeftBehind {
  std::weak_ptr<TensorNode> node;
  std::weak_ptr<void> memory;
};

struct SignatureState {
  int calls = 0;
  std::vector<LeftBehind> left_by_first;  // what the first call computed
  std::optional<Program> program;         // set once recorded and replayable
};

Signature signature_of(const std::vector<Tensor>& args) {
  Signature sig;
  for (size_t i = 0; i < args.size(); ++i) {
    const void* mem = base_buffer(args[i].node()->uop)->storage().get();
    size_t alias = i;
    for (size_t j = 0; j < i; ++j)
      if (base_buffer(args[j].node()->uop)->storage().get() == mem) {
        alias = j;
        break;
      }
    sig.push_back(static_cast<int64_t>(args[i].dtype().scalar));
    sig.push_back(static_cast<int64_t>(alias));
    sig.push_back(args[i].ndim());
    for (int64_t d : args[i].shape()) sig.push_back(d);
  }
  return sig;
}

// Realized, contiguous arguments: each a BUFFER or a reshape of one.
std::vector<Tensor> bindable(const std::vector<Tensor>& args) {
  std::vector<Tensor> out;
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args[i].defined()) throw Error("Capture: argument " + std::to_string(i) + " is an undefined tensor");
    Tensor t = args[i];
    t.realize();
    if (!base_buffer(t.node()->uop)) t = t.contiguous().realize();
    out.push_back(std::move(t));
  }
  return out;
}

// A tensor outliving the call (not one of its results) that the call pointed
// at a buffer it allocated. `previous` is the buffer it held as the call began
// when an assign wrote past it (state the next call reads), or null when the
// call computed the tensor afresh (a gradient, a lazy tensor realized): a
// replay computes it again into a fresh buffer.
struct Rebound {
  std::shared_ptr<TensorNode> node;
  UOpPtr previous, buffer;
};

std::vector<Rebound> rebound_tensors(const StepRecording& rec, const std::vector<Tensor>& results) {
  std::vector<Rebound> out;
  for (const auto& b : rec.bindings) {
    const auto node = b.node.lock();
    if (!node || base_buffer(node->uop) != b.buffer || !rec.allocated.count(b.buffer->storage().get()))
      continue;
    bool is_result = false;
    for (const auto& r : results) is_result |= r.node() == node;
    if (is_result) continue;
    UOpPtr start;  // the node's buffer as the call began: what its first binding wrote past
    for (const auto& first : rec.bindings)
      if (first.node.lock() == node) {
        start = first.previous;
        break;
      }
    if (start && rec.allocated.count(start->storage().get())) start = nullptr;
    out.push_back({node, start, b.buffer});
  }
  return out;
}

std::vector<LeftBehind> left_behind(const StepRecording& rec, const std::vector<Tensor>& results) {
  std::vector<LeftBehind> out;
  for (const auto& r : rebound_tensors(rec, results))
    if (!r.previous) out.push_back({r.node, r.buffer->storage()});
  for (const auto& r : results)
    if (const auto it = rec.allocated.find(base_buffer(r.node()->uop)->storage().get());
        it != rec.allocated.end())
      out.push_back({r.node(), it->second->storage()});
  return out;
}

// Whether a recording reading the buffers `kept` carries state on the host:
// it reads what the call before it computed into a tensor that no longer
// holds it (say `total = (total + x).realize()`: the next call reads the old
// total). A tensor still holding it was initialised once (by the first call).
bool carries_host_state(const std::vector<UOpPtr>& kept, const std::vector<LeftBehind>& before) {
  for (const auto& l : before) {
    const auto memory = l.memory.lock();
    if (!memory) continue;
    const auto node = l.node.lock();
    if (node && base_buffer(node->uop) && base_buffer(node->uop)->storage() == memory) continue;
    for (const auto& b : kept)
      if (b->storage() == memory) return true;
  }
  return false;
}

// The program replaying `rec`, or nullopt when the call keeps state outside
// assign (it reads what the call before it left behind). `arg_memory` is the
// arguments' memory as the call began.
std::optional<Program> compile_program(const StepRecording& rec, const std::vector<const void*>& arg_memory,
                                       const std::vector<Tensor>& results,
                                       const std::vector<LeftBehind>& before) {
  std::vector<Rebound> rebound, computed;
  for (auto& r : rebound_tensors(rec, results)) (r.previous ? rebound : computed).push_back(std::move(r));
  Program p;
  p.inputs = arg_memory.size();
  std::unordered_map<const void*, uint32_t> slot_of;  // storage -> table slot
  for (size_t i = 0; i < arg_memory.size(); ++i) slot_of.emplace(arg_memory[i], static_cast<uint32_t>(i));
  for (const auto& r : rebound) {
    slot_of.emplace(r.previous->storage().get(), static_cast<uint32_t>(p.inputs + p.states.size()));
    p.states.push_back({r.node, r.previous, 0, r.node->uop});
  }
  auto add_fresh = [&](const UOpPtr& b) {
    const auto [it, added] =
        slot_of.emplace(b->storage().get(), static_cast<uint32_t>(p.first_fresh() + p.fresh.size()));
    if (added) p.fresh.push_back({b->dtype, b->get<std::vector<int64_t>>().at(1), nullptr});
    return it->second;
  };
  for (size_t i = 0; i < rebound.size(); ++i) p.states[i].out_slot = add_fresh(rebound[i].buffer);
  for (const auto& r : computed) p.computed.push_back({r.node, add_fresh(r.buffer), r.node->uop});
  for (const auto& r : results) {
    const UOpPtr& b = base_buffer(r.node()->uop);
    if (rec.allocated.count(b->storage().get())) add_fresh(b);
  }
  auto slot = [&](const UOpPtr& buffer) {
    const auto [it, added] =
        slot_of.emplace(buffer->storage().get(), static_cast<uint32_t>(p.first_kept() + p.kept.size()));
    if (added) {
      if (rec.allocated.count(buffer->storage().get()))
        p.scratch.push_back({p.kept.size(), buffer->dtype, buffer->get<std::vector<int64_t>>().at(1)});
      p.kept.push_back(buffer);
    }
    return it->second;
  };
  for (const auto& k : rec.kernels) {
    Program::Kernel pk{k.kernel, {}, k.parallel_extent, k.work};
    for (const auto& b : k.args) pk.slots.push_back(slot(b));
    p.kernels.push_back(std::move(pk));
  }
  for (const auto& r : results) p.outputs.push_back({slot(base_buffer(r.node()->uop)), r.node()->uop});
  if (carries_host_state(p.kept, before)) return std::nullopt;
  return p;
}

// Realizes the step's results, each into a BUFFER or a reshape of one, with
// whatever the step left pending in its arguments (an assign into one).
void realize_results(std::vector<Tensor>& results, const std::vector<Tensor>& args) {
  for (size_t i = 0; i < results.size(); ++i)
    if (!results[i].defined())
      throw Error("Capture: result " + std::to_string(i) + " is an undefined tensor");
  std::vector<Tensor> all = results;
  for (const auto& a : args)
    if (!base_buffer(a.node()->uop)) all.push_back(a);
  realize(all);
  for (auto& r : results)
    if (!base_buffer(r.node()->uop)) r = r.contiguous().realize();
}

}  // namespace

struct Capture::Impl {
  Step step;
  // Guards `states` against loom::empty_cache() on another thread; never held
  // while the step function runs (it may call empty_cache itself).
  mutable std::mutex mu;
  std::map<Signature, SignatureState> states;
  uint64_t spare_holder = add_spare_holder([this] { release_spares(); });

  Impl() = default;
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  ~Impl() { remove_spare_holder(spare_holder); }

  // Drops the spare outputs and scratch buffers that only the programs hold.
  void release_spares();

  // Runs the step with `rec` recording what it runs and leaves behind.
  std::vector<Tensor> run_recorded(const std::vector<Tensor>& args, StepRecording& rec) {
    detail::t_recording = &rec;
    std::vector<Tensor> results;
    try {
      results = step(args);
      realize_results(results, args);
    } catch (...) {
      detail::t_recording = nullptr;
      throw;
    }
    detail::t_recording = nullptr;
    return results;
  }

  std::vector<Tensor> first_call(const std::vector<Tensor>& args, SignatureState& state) {
    StepRecording rec;
    rec.with_kernels = false;
    std::vector<Tensor> results = run_recorded(args, rec);
    state.left_by_first = left_behind(rec, results);
    return results;
  }

  std::vector<Tensor> record(const std::vector<Tensor>& args, SignatureState& state) {
    // Memory, not BUFFER nodes: holding an argument's node would make an assign into it copy.
    std::vector<const void*> arg_memory;
    for (const auto& a : args) arg_memory.push_back(base_buffer(a.node()->uop)->storage().get());
    StepRecording rec;
    std::vector<Tensor> results = run_recorded(args, rec);
    std::optional<Program> program = compile_program(rec, arg_memory, results, state.left_by_first);
    state.left_by_first.clear();
    {
      std::lock_guard lock(mu);
      state.program = std::move(program);
    }
    if (state.program && flags()->debug >= 1)
      log().info(
          "Capture: recorded {} kernels; a replay writes {} fresh slots ({} results, {} copied by assigns, "
          "{} computed tensors), each into its last buffer when nothing else reads it, and reuses {} buffers",
          state.program->kernels.size(), state.program->fresh.size(), state.program->outputs.size(),
          state.program->states.size(), state.program->computed.size(), state.program->kept.size());
    if (!state.program)
      log().warn(
          "Capture: the step reads a tensor the call before it left behind other than by an argument or "
          "an assign (state kept outside assign); it runs uncaptured on every call (docs/api.md, Capture)");
    return results;
  }

  std::vector<Tensor> replay(const std::vector<Tensor>& args, Program& p) const;
  const std::optional<Program>* program_for(const std::vector<Tensor>& args) const;
};

namespace {
// `view`'s buffer in the shape `recorded` had: `view` itself when it has it.
UOpPtr like(const UOpPtr& recorded, const UOpPtr& view) {
  if (recorded->op == view->op && (view->op == Op::BUFFER || view->get<Shape>() == recorded->get<Shape>()))
    return view;
  const UOpPtr& b = base_buffer(view);
  if (recorded->op == Op::BUFFER) return b;
  return UOp::make(Op::RESHAPE, b->dtype, {b}, recorded->get<Shape>());
}

// `view` (a BUFFER or a reshape of one) when nothing but `holders` references
// can read it and its buffer fits the slot: a replay may overwrite it.
bool free_to_overwrite(const UOpPtr& view, long holders, const Program::Fresh& slot) {
  if (!view || view.use_count() != holders) return false;
  const UOpPtr& b = base_buffer(view);
  return b && (view == b || b.use_count() == 1) && b->dtype == slot.dtype &&
         b->get<std::vector<int64_t>>().at(1) == slot.size;
}

// The buffer a rebound tensor holds now (realized first if the host changed it).
UOpPtr current_buffer(const Program::State& s) {
  const auto node = s.node.lock();
  if (!node) return s.fallback;
  if (!base_buffer(node->uop)) Tensor(node).realize();
  const UOpPtr& b = base_buffer(node->uop);
  return b ? b : s.fallback;
}

// Per fresh slot, the view a replay writes: a tensor's own buffer when only
// it can read it (a gradient nobody kept), the slot's spare, else a new buffer.
std::vector<UOpPtr> fresh_views(const Program& p) {
  std::vector<UOpPtr> views(p.fresh.size());
  for (const auto& c : p.computed) {
    const auto node = c.node.lock();
    UOpPtr& v = views[c.slot - p.first_fresh()];
    if (node && !v && free_to_overwrite(node->uop, 1, p.fresh[c.slot - p.first_fresh()])) v = node->uop;
  }
  for (size_t f = 0; f < p.fresh.size(); ++f) {
    const Program::Fresh& slot = p.fresh[f];
    if (!views[f])
      views[f] = free_to_overwrite(slot.spare, 1, slot)
                     ? slot.spare
                     : detail::allocate_buffer(slot.dtype, slot.size, false);
  }
  return views;
}

void run_kernels(const Program& p, const std::vector<void*>& table) {
  std::vector<void*> bufs;
  const std::vector<int64_t> vars;
  const bool timed = flags()->debug >= 2;
  for (const auto& k : p.kernels) {
    bufs.clear();
    for (uint32_t s : k.slots) bufs.push_back(table[s]);
    if (!timed) {
      run_kernel(k.kernel->fn, bufs, vars, k.parallel_extent, {}, k.work);
      continue;
    }
    const auto t0 = std::chrono::steady_clock::now();
    run_kernel(k.kernel->fn, bufs, vars, k.parallel_extent, {}, k.work);
    log().info("  {} {:.3f} ms (replayed)", k.kernel->name,
               std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
}
}  // namespace

void Capture::Impl::release_spares() {
  std::lock_guard lock(mu);
  for (auto& [signature, state] : states) {
    if (!state.program) continue;
    Program& p = *state.program;
    for (auto& slot : p.fresh)
      if (free_to_overwrite(slot.spare, 1, slot)) slot.spare = nullptr;
    for (const auto& s : p.scratch)
      if (p.kept[s.kept].use_count() == 1) p.kept[s.kept] = nullptr;
  }
}

std::vector<Tensor> Capture::Impl::replay(const std::vector<Tensor>& args, Program& p) const {
  for (const auto& s : p.scratch)
    if (!p.kept[s.kept]) p.kept[s.kept] = detail::allocate_buffer(s.dtype, s.size, false);
  const std::vector<UOpPtr> fresh = fresh_views(p);
  std::vector<void*> table;
  table.reserve(p.first_kept() + p.kept.size());
  for (const auto& a : args) table.push_back(detail::buffer_data(base_buffer(a.node()->uop)));
  for (const auto& s : p.states) table.push_back(detail::buffer_data(current_buffer(s)));
  for (const auto& v : fresh) table.push_back(detail::buffer_data(base_buffer(v)));
  for (const auto& b : p.kept) table.push_back(detail::buffer_data(b));
  run_kernels(p, table);
  // Each state's old buffer is its out slot's spare: the next replay writes there.
  for (const auto& s : p.states)
    if (const auto node = s.node.lock()) {
      const size_t f = s.out_slot - p.first_fresh();
      p.fresh[f].spare = std::exchange(node->uop, like(s.recorded, fresh[f]));
    }
  for (const auto& c : p.computed)
    if (const auto node = c.node.lock()) node->uop = like(c.recorded, fresh[c.slot - p.first_fresh()]);
  std::vector<Tensor> out;
  for (const auto& o : p.outputs) {
    UOpPtr view;
    if (o.slot < p.inputs)
      view = like(o.recorded, base_buffer(args[o.slot].node()->uop));
    else if (o.slot < p.first_fresh())
      view = like(o.recorded, current_buffer(p.states[o.slot - p.inputs]));
    else if (o.slot < p.first_kept())
      view = p.fresh[o.slot - p.first_fresh()].spare = like(o.recorded, fresh[o.slot - p.first_fresh()]);
    else
      view = like(o.recorded, p.kept[o.slot - p.first_kept()]);
    out.push_back(Tensor(std::make_shared<TensorNode>(std::move(view))));
  }
  detail::count_capture_replay();
  return out;
}

Capture::Capture(Step step) : impl_(std::make_shared<Impl>()) {
  if (!step) throw Error("Capture: the step function is empty");
  impl_->step = std::move(step);
}

std::vector<Tensor> Capture::operator()(const std::vector<Tensor>& args) {
  const std::vector<Tensor> bound = bindable(args);
  if (detail::t_recording) return impl_->step(bound);  // inside another Capture's recording: just run
  // Under LOOM_CHECK_BOUNDS every call runs the function: a replay binds raw
  // memory, and only realize's kernels check their indices.
  if (!flags()->check_bounds) {
    SignatureState* state = nullptr;
    {
      std::lock_guard lock(impl_->mu);
      state = &impl_->states[signature_of(bound)];  // std::map: the reference stays valid
      ++state->calls;
      if (state->program) return impl_->replay(bound, *state->program);
    }
    if (state->calls == 1) return impl_->first_call(bound, *state);
    if (state->calls == 2) return impl_->record(bound, *state);
  }
  std::vector<Tensor> results = impl_->step(bound);
  realize_results(results, bound);
  return results;
}

const std::optional<Program>* Capture::Impl::program_for(const std::vector<Tensor>& args) const {
  const Signature signature = signature_of(bindable(args));
  std::lock_guard lock(mu);
  const auto it = states.find(signature);
  return it == states.end() ? nullptr : &it->second.program;
}

bool Capture::captured(const std::vector<Tensor>& args) const {
  const auto* p = impl_->program_for(args);
  return p && p->has_value();
}

size_t Capture::captured_kernels(const std::vector<Tensor>& args) const {
  const auto* p = impl_->program_for(args);
  return p && p->has_value() ? (*p)->kernels.size() : 0;
}

}  // namespace loom
