#include <loom/capture.hpp>

#include "codegen/codegen.hpp"
#include "ir/flags.hpp"
#include "ir/log.hpp"
#include "runtime/buffer.hpp"
#include "runtime/executor.hpp"
#include "src/engine.hpp"
#include "src/graph_key.hpp"
#include "src/in_flight.hpp"
#include "src/in_place.hpp"
#include "src/random.hpp"
#include "src/step_recording.hpp"
#include "src/tensor_views.hpp"
#include "src/unbind.hpp"

#include <loom/autocast.hpp>
#include <loom/debug.hpp>
#include <loom/error.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

namespace loom {

namespace detail {
namespace {

// What one recorded call ran: each item of its plans (a kernel, or a collective)
// with the BUFFER nodes bound to its argument slots, and each tensor node a
// realize pointed at a buffer.
struct StepRecording {
  struct Kernel {
    std::shared_ptr<const CompiledKernel> kernel;  // null for a collective
    std::vector<UOpPtr> args;                      // a collective's: {input, output, pieces...}
    std::optional<PlanCollective> collective;
    bool wait = false;  // for a collective: the wait for it (else its start)
    int64_t parallel_extent = 1;
    RunWork work;               // as the engine passes it: decides whether TBB shares the run
    std::vector<int64_t> vars;  // the kernel's variables (its offsets, src/offset_vars.hpp)
    // The positions in `vars` of the graph's size variables, each with its DEFINE_VAR: every
    // run passes the value of its binding.
    std::vector<std::pair<uint32_t, UOpPtr>> run_vars;
  };
  struct Binding {
    std::weak_ptr<TensorNode> node;
    UOpPtr buffer;
    UOpPtr previous;  // the buffer an assign in the node wrote past (copy on write), or null
  };
  bool with_kernels = true;       // false: only what the call leaves behind (allocated, bindings)
  std::vector<UOpPtr> variables;  // the variables of symbolic sizes the call's plans took
  std::vector<Kernel> kernels;
  std::unordered_map<const void*, UOpPtr> allocated;  // storage -> BUFFER a plan allocated
  // Storage a plan allocated -> the most bytes any buffer it holds needs, at every value of
  // the variables (blocks are shared between dead intermediates, src/memory_plan.hpp).
  std::unordered_map<const void*, int64_t> most_bytes;
  // A BUFFER a plan allocated whose elements depend on the variables -> that count, and a
  // result buffer whose view does -> that view (both over the unbound variables).
  std::unordered_map<const UOp*, Dim> counts;
  std::unordered_map<const UOp*, Shape> views;
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

void record_plan_run(const Plan& plan, const std::vector<UOpPtr>& table, const RunValues& values,
                     const std::vector<std::shared_ptr<TensorNode>>& pending, const Flags& flags) {
  StepRecording* rec = t_recording;
  if (!rec) return;
  for (const UOpPtr& v : plan.variables)
    if (std::find(rec->variables.begin(), rec->variables.end(), v) == rec->variables.end())
      rec->variables.push_back(v);
  if (rec->with_kernels)
    for_each_item(
        plan,
        [&](const PlanKernel& pk) {
          StepRecording::Kernel k{
              compile_kernel(pk.ast, pk.name, flags), {}, {}, false, pk.parallel_extent, {}, pk.vars, {}};
          for (const auto& [position, variable] : pk.run_vars)
            k.run_vars.emplace_back(position, plan.variables.at(variable));
          for (uint32_t slot : pk.args) k.args.push_back(table[slot]);
          k.work = run_work(kernel_work(k.kernel->flops, kernel_bytes(pk, table)), target_of(flags));
          rec->kernels.push_back(std::move(k));
        },
        [&](const PlanCollective& c) {
          std::vector<UOpPtr> args{table[c.input], table[c.output]};  // then a bucket's pieces
          for (const BucketPiece& p : c.pieces) args.push_back(table[p.buffer]);
          rec->kernels.push_back({nullptr, std::move(args), c, false, 1, {}, {}, {}});
        },
        [&](const PlanCollective& c) {
          rec->kernels.push_back({nullptr, {table[c.input], table[c.output]}, c, true, 1, {}, {}, {}});
        });
  for (size_t j = plan.inputs; j < table.size(); ++j) {
    const void* storage = table[j]->storage().get();
    rec->allocated.emplace(storage, table[j]);
    const PlanBuffer& a = plan.allocations.at(j - plan.inputs);
    int64_t& most = rec->most_bytes[storage];
    most = std::max(most, a.size * a.dtype.itemsize());  // a symbolic count's upper bound
    if (a.count.is_symbolic()) rec->counts.emplace(table[j].get(), a.count);
  }
  for (size_t i = 0; i < pending.size(); ++i) {
    const UOpPtr& before = pending[i]->uop;
    const UOpPtr previous = before->op == Op::ASSIGN ? base_buffer(before->src[0]) : nullptr;
    const UOpPtr result = plan_result(plan, table, i, values);
    const UOpPtr& b = base_buffer(result);
    if (!b) continue;
    rec->bindings.push_back({pending[i], b, previous});
    if (const auto& view = plan.results.at(i).view; view && is_symbolic(*view))
      rec->views.emplace(b.get(), *view);
  }
}

}  // namespace detail

namespace {
using detail::base_buffer;
using detail::RunValues;
using detail::StepRecording;
using detail::TensorNode;

// Per argument: its dtype, the first argument sharing its buffer, its rank and extents
// (for an argument of symbolic shape, its view's structure with each binding as its
// variable: one signature for every value).
using Signature = std::vector<int64_t>;

// An argument's buffer: a BUFFER, a reshape of one, or a symbolic shrink of either (a
// DataLoader's batch of B rows, a cache's first T rows), which the kernels index.
const UOpPtr& arg_buffer(const UOpPtr& u) {
  const UOpPtr& view = u->op == Op::DETACH ? u->src[0] : u;  // sliced under NoGrad
  return view->op == Op::SHRINK && is_symbolic(*view->shape()) ? base_buffer(view->src[0]) : base_buffer(u);
}

// The arguments' symbolic sizes, from one signing of their views per call: each symbolic
// argument's structure with a binding counted as its variable (for the signature), and
// the variables, sorted by name, with this call's values (for a replay).
struct ArgValues {
  std::vector<UOpPtr> variables;
  RunValues values;
  std::vector<detail::GraphKey> keys;  // per argument; unset for one of numeric shape
};

ArgValues arg_values(const std::vector<Tensor>& args) {
  std::vector<UOpPtr> views;
  for (const auto& a : args)
    if (is_symbolic(a.shape())) views.push_back(a.node()->uop);
  if (views.empty()) return {};
  const detail::GraphSignature signed_views = detail::sign_graph(views);
  const std::vector<detail::VariableValue> found = detail::graph_values(signed_views.nodes, "Capture");
  ArgValues at{detail::variables_of(found), detail::numbers_of(found), {}};
  for (const auto& a : args)
    at.keys.push_back(is_symbolic(a.shape())
                          ? signed_views.node_keys[signed_views.index.find(a.node()->uop.get())]
                          : detail::GraphKey{});
  return at;
}

// Sizes over the variables, bound to a replay's values.
Dim bound(const Dim& d, const ArgValues& at) {
  return d.is_symbolic() ? Dim(detail::bind_values(d, at.variables, at.values).value()) : d;
}

// How a recorded tensor viewed its buffer: the BUFFER itself, or a reshape of
// it to `reshape`, whose sizes may be over the variables (a batch of B rows),
// bound to each replay's values. Shapes only: a Program holds no buffer it does not own.
struct ViewShape {
  std::optional<Shape> reshape;
  ViewShape(const UOpPtr& view, const StepRecording& rec) {
    if (view->op == Op::BUFFER) return;
    const auto over_variables = rec.views.find(base_buffer(view).get());
    reshape = over_variables != rec.views.end() ? over_variables->second : view->get<Shape>();
  }
  std::optional<Shape> at(const ArgValues& values) const {
    if (!reshape || !is_symbolic(*reshape)) return reshape;
    Shape s = *reshape;
    for (Dim& d : s) d = bound(d, values);
    return s;
  }
};

// A recording turned into a program over a table of buffers:
// [arguments | states | fresh: outputs each replay writes anew | kept: memory the call made, scratch every
// replay reuses, and memory of tensors the call only read].
struct Program {
  struct Kernel {
    std::shared_ptr<const CompiledKernel>
        kernel;  // holds the code even if the cache evicts it; null: a collective
    std::vector<uint32_t> slots;
    std::optional<detail::PlanCollective> collective;
    bool wait = false;
    int64_t parallel_extent = 1;
    RunWork work;
    std::vector<int64_t> vars;
    std::vector<std::pair<uint32_t, uint32_t>> run_vars;  // (position in vars, index in `variables`)
  };
  struct Output {
    uint32_t slot;
    ViewShape recorded;  // the recorded result's
  };
  // A tensor the call assigned (a parameter, an optimiser's moment, a running
  // mean), bound by identity: each replay reads the buffer the tensor holds
  // then, wherever other calls moved it. In place (out_slot is its own slot):
  // the kernels write that buffer, as the recorded assign did, after copying it
  // to a new one when something else still reads it (as the assign would).
  // Otherwise the assign copied: the kernels write the out slot, a fresh
  // buffer the tensor then points at.
  struct State {
    std::weak_ptr<TensorNode> node;
    ViewShape recorded;  // the node's after the recorded call
    uint32_t out_slot;
    DType dtype;  // the recorded buffer's dtype and size: a buffer bound later must have them
    int64_t size;
    // An argument the call assigned into and copied: the tensor bound is the
    // one passed at that position, not the recorded one. -1 for none.
    int64_t argument = -1;
  };
  // A tensor the call computed afresh: each replay points it at its new value.
  // When it was the gradient of a state (a parameter) and a call of another
  // signature has since given that parameter another gradient, the replay
  // gives it a new one instead, as backward() does after zero_grad().
  struct Computed {
    std::weak_ptr<TensorNode> node;
    uint32_t slot;
    ViewShape recorded;
    std::weak_ptr<TensorNode> grad_of;
  };
  size_t inputs = 0;
  std::vector<UOpPtr> variables;  // the arguments' size variables (ArgValues's order)
  std::vector<State> states;      // slots [inputs, first_fresh())
  std::vector<Computed> computed;
  // A slot each replay writes anew: its buffer's dtype and size, and the view
  // the last replay handed out there, which the next one writes again when
  // nothing but the Program still holds it (no allocation, no new node).
  struct Fresh {
    DType dtype;
    Dim count;  // elements, over the variables when they depend on them
    UOpPtr spare;
  };
  std::vector<Fresh> fresh;
  // `held`: memory the recorded call made (scratch it allocated, data it
  // uploaded), which the replays own. Else `borrowed`: a buffer of a tensor
  // the call only read, held weakly so that it never makes an assign copy; a
  // replay reads it while it lives and no assign has written past it since.
  struct Kept {
    UOpPtr held;  // null for a scratch buffer loom::empty_cache() released
    std::weak_ptr<const UOp> borrowed;
    bool borrows = false;
    bool retired_at_record = false;
  };
  std::vector<Kept> kept;
  // Kept slots the recorded call allocated and only its kernels use (dead
  // intermediates): loom::empty_cache() drops them, the next replay allocates them,
  // as large as the most any buffer sharing them needs at any value of the variables.
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
  int dropped = 0;                        // recordings found stale at a replay
};

// A signature whose recordings went stale this often runs uncaptured from then on.
constexpr int kMaxDropped = 3;

// The arguments' dtypes, shapes and aliasing, after the thread's autocast dtype: a step
// recorded under loom::Autocast ran other kernels than the same step outside it.
Signature signature_of(const std::vector<Tensor>& args, const ArgValues& at) {
  const std::optional<DType> autocast = autocast_dtype();
  Signature sig{autocast ? static_cast<int64_t>(autocast->scalar) : -1};
  for (size_t i = 0; i < args.size(); ++i) {
    const void* mem = arg_buffer(args[i].node()->uop)->storage().get();
    size_t alias = i;
    for (size_t j = 0; j < i; ++j)
      if (arg_buffer(args[j].node()->uop)->storage().get() == mem) {
        alias = j;
        break;
      }
    sig.push_back(static_cast<int64_t>(args[i].dtype().scalar));
    sig.push_back(static_cast<int64_t>(alias));
    sig.push_back(args[i].ndim());
    if (is_symbolic(args[i].shape())) {  // the view's key counts a binding as its variable
      const detail::GraphKey& key = at.keys[i];
      sig.push_back(-1);
      sig.push_back(static_cast<int64_t>(key.a));
      sig.push_back(static_cast<int64_t>(key.b));
      continue;
    }
    for (int64_t d : args[i].shape()) sig.push_back(d);
  }
  return sig;
}

// Realized, contiguous arguments: each a BUFFER or a reshape of one, or a symbolic shrink
// of either, kept as it is: the replays take their sizes from its bindings.
std::vector<Tensor> bindable(const std::vector<Tensor>& args) {
  std::vector<Tensor> out;
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args[i].defined()) throw Error("Capture: argument " + std::to_string(i) + " is an undefined tensor");
    Tensor t = args[i];
    if (arg_buffer(t.node()->uop)) {
      out.push_back(std::move(t));
      continue;
    }
    t.realize();
    if (!base_buffer(t.node()->uop)) t = t.contiguous().realize();
    out.push_back(std::move(t));
  }
  return out;
}

// A tensor outliving the call that the call pointed at a buffer: `buffer`,
// the one it holds as the call ends. `previous` is the buffer it held as the
// call began when an assign wrote it (state the next call reads; `buffer`
// itself when the assign wrote in place), or null when the call computed the
// tensor afresh (a gradient, a lazy tensor realized; not one of the results):
// a replay computes it again into a fresh buffer.
struct Rebound {
  std::shared_ptr<TensorNode> node;
  UOpPtr previous, buffer;
};

std::vector<Rebound> rebound_tensors(const StepRecording& rec, const std::vector<Tensor>& results) {
  std::vector<Rebound> out;
  for (const auto& b : rec.bindings) {
    const auto node = b.node.lock();
    if (!node || base_buffer(node->uop) != b.buffer) continue;
    bool seen = false;
    for (const auto& r : out) seen |= r.node == node;
    if (seen) continue;
    UOpPtr start;  // the node's buffer as the call began: what its first binding wrote past
    for (const auto& first : rec.bindings)
      if (first.node.lock() == node) {
        start = first.previous;
        break;
      }
    if (start && rec.allocated.count(start->storage().get())) start = nullptr;
    const bool made = rec.allocated.count(b.buffer->storage().get()) > 0;
    if (!made && start != b.buffer) continue;  // not written by the call: a view of memory it read
    bool is_result = false;
    for (const auto& r : results) is_result |= r.node() == node;
    if (is_result && !start) continue;
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
                                       const ArgValues& at, const std::vector<Tensor>& results,
                                       const std::vector<LeftBehind>& before, int64_t first_buffer_id) {
  std::vector<Rebound> rebound, computed;
  std::vector<int64_t> argument_of;  // per rebound tensor: the argument it is, or -1
  for (auto& r : rebound_tensors(rec, results)) {
    const auto arg = r.previous ? std::find(arg_memory.begin(), arg_memory.end(), r.previous->storage().get())
                                : arg_memory.end();
    if (arg != arg_memory.end() && r.previous == r.buffer) continue;  // assigned in place: bound by position
    if (r.previous) argument_of.push_back(arg == arg_memory.end() ? -1 : arg - arg_memory.begin());
    (r.previous ? rebound : computed).push_back(std::move(r));
  }
  Program p;
  p.inputs = arg_memory.size();
  p.variables = at.variables;
  std::unordered_map<const void*, uint32_t> slot_of;  // storage -> table slot
  for (size_t i = 0; i < arg_memory.size(); ++i) slot_of.emplace(arg_memory[i], static_cast<uint32_t>(i));
  for (size_t i = 0; i < rebound.size(); ++i) {
    const Rebound& r = rebound[i];
    const auto own = static_cast<uint32_t>(p.inputs + p.states.size());
    slot_of.emplace(r.previous->storage().get(), own);
    p.states.push_back({r.node, ViewShape(r.node->uop, rec), own, r.previous->dtype,
                        r.previous->get<std::vector<int64_t>>().at(1), argument_of[i]});
  }
  auto add_fresh = [&](const UOpPtr& b) {
    const auto [it, added] =
        slot_of.emplace(b->storage().get(), static_cast<uint32_t>(p.first_fresh() + p.fresh.size()));
    if (!added) return it->second;
    const auto count = rec.counts.find(b.get());
    p.fresh.push_back({b->dtype,
                       count != rec.counts.end() ? count->second : Dim(b->get<std::vector<int64_t>>().at(1)),
                       nullptr});
    return it->second;
  };
  for (size_t i = 0; i < rebound.size(); ++i)
    if (rebound[i].buffer != rebound[i].previous) p.states[i].out_slot = add_fresh(rebound[i].buffer);
  for (const auto& r : computed) {
    std::shared_ptr<TensorNode> grad_of;
    for (const auto& s : rebound)
      if (s.node->grad.defined() && s.node->grad.node() == r.node) grad_of = s.node;
    p.computed.push_back({r.node, add_fresh(r.buffer), ViewShape(r.node->uop, rec), grad_of});
  }
  for (const auto& r : results) {
    const UOpPtr& b = base_buffer(r.node()->uop);
    if (rec.allocated.count(b->storage().get())) add_fresh(b);
  }
  std::vector<UOpPtr> kept;
  auto slot = [&](const UOpPtr& buffer) {
    const auto [it, added] =
        slot_of.emplace(buffer->storage().get(), static_cast<uint32_t>(p.first_kept() + kept.size()));
    if (added) kept.push_back(buffer);
    return it->second;
  };
  for (const auto& k : rec.kernels) {
    Program::Kernel pk{k.kernel, {}, k.collective, k.wait, k.parallel_extent, k.work, k.vars, {}};
    for (const auto& [position, variable] : k.run_vars) {  // record() checked the arguments bind each
      const auto index = std::find(p.variables.begin(), p.variables.end(), variable) - p.variables.begin();
      pk.run_vars.emplace_back(position, static_cast<uint32_t>(index));
    }
    for (const auto& b : k.args) pk.slots.push_back(slot(b));
    p.kernels.push_back(std::move(pk));
  }
  for (const auto& r : results)
    p.outputs.push_back({slot(base_buffer(r.node()->uop)), ViewShape(r.node()->uop, rec)});
  if (carries_host_state(kept, before)) return std::nullopt;
  for (const auto& b : kept) {
    const int64_t id = b->get<std::vector<int64_t>>().at(0);
    if (rec.allocated.count(b->storage().get())) {
      const int64_t bytes = rec.most_bytes.at(b->storage().get()), item = b->dtype.itemsize();
      p.scratch.push_back({p.kept.size(), b->dtype, (bytes + item - 1) / item});
      // Allocated for the recorded values: a replay of larger ones allocates it anew.
      const bool fits = static_cast<const Buffer*>(b->storage().get())->bytes() >= static_cast<size_t>(bytes);
      p.kept.push_back({fits ? b : nullptr, {}, false, false});
    } else if (id >= first_buffer_id) {  // data the call uploaded: the same on every call
      p.kept.push_back({b, {}, false, false});
    } else {
      p.kept.push_back({nullptr, b, true, static_cast<const Buffer*>(b->storage().get())->retired()});
    }
  }
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
    if (!arg_buffer(a.node()->uop)) all.push_back(a);
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

  std::vector<Tensor> record(const std::vector<Tensor>& args, const ArgValues& at, SignatureState& state) {
    // Memory, not BUFFER nodes: holding an argument's node would make an assign into it copy.
    std::vector<const void*> arg_memory;
    for (const auto& a : args) arg_memory.push_back(arg_buffer(a.node()->uop)->storage().get());
    const int64_t first_buffer_id = UOp::next_buffer_id();  // buffers made from here on are the call's
    StepRecording rec;
    const uint64_t draws_before = detail::thread_random_draws();
    std::vector<Tensor> results = run_recorded(args, rec);
    // A draw's seed and counter are data the call uploaded: a replay would repeat its numbers.
    const bool drew = detail::thread_random_draws() != draws_before;
    // A replay takes the values of symbolic sizes from the arguments' bindings (docs/symbolic.md):
    // a variable the step binds itself would keep its recorded value.
    std::string unbound;
    for (const UOpPtr& v : rec.variables)
      if (unbound.empty() && std::find(at.variables.begin(), at.variables.end(), v) == at.variables.end())
        unbound = v->get<VarArg>().name;
    const bool symbolic = !unbound.empty();
    std::optional<Program> program = drew || symbolic ? std::nullopt
                                                      : compile_program(rec, arg_memory, at, results,
                                                                        state.left_by_first, first_buffer_id);
    state.left_by_first.clear();
    {
      std::lock_guard lock(mu);
      state.program = std::move(program);
    }
    if (state.program && flags()->debug >= 1)
      log().info(
          "Capture: recorded {} kernels; a replay binds {} assigned tensors by identity, writes {} fresh "
          "slots ({} results, {} computed tensors), each into its last buffer when nothing else reads it, "
          "and reuses {} buffers",
          state.program->kernels.size(), state.program->states.size(), state.program->fresh.size(),
          state.program->outputs.size(), state.program->computed.size(), state.program->kept.size());
    if (symbolic)
      log().warn(
          "Capture: the step binds variable '{}' itself, not through an argument's shape: a replay would run "
          "the recorded value; it runs uncaptured on every call, its kernels compiled once "
          "(docs/symbolic.md)",
          unbound);
    else if (drew)
      log().warn(
          "Capture: the step draws random numbers (rand, randn, randint, dropout in training): a replay "
          "would repeat the recorded ones; it runs uncaptured on every call (docs/api.md, Capture)");
    else if (!state.program)
      log().warn(
          "Capture: the step reads a tensor the call before it left behind other than by an argument or "
          "an assign (state kept outside assign); it runs uncaptured on every call (docs/api.md, Capture)");
    return results;
  }

  // The replay's results, or nullopt with `why` when the recording went stale
  // (a tensor it binds is gone or changed): nothing has run then.
  std::optional<std::vector<Tensor>> replay(const std::vector<Tensor>& args, const ArgValues& at, Program& p,
                                            std::string& why) const;
  const std::optional<Program>* program_for(const std::vector<Tensor>& args) const;
};

namespace {
// `view`'s buffer in the shape `recorded` had: `view` itself when it has it.
// Symbolic sizes in `recorded` take the replay's values `at`.
UOpPtr like(const ViewShape& recorded, const UOpPtr& view, const ArgValues& at = {}) {
  const UOpPtr& b = base_buffer(view);
  const std::optional<Shape> shape = recorded.at(at);
  if (!shape) return b;
  if (view->op == Op::RESHAPE && view->get<Shape>() == *shape) return view;
  return UOp::make(Op::RESHAPE, b->dtype, {b}, *shape);
}

// `view` (a BUFFER or a reshape of one) when nothing but `holders` references can read it.
bool held_only_by(const UOpPtr& view, long holders) {
  if (!view || view.use_count() != holders) return false;
  const UOpPtr& b = base_buffer(view);
  return b && (view == b || b.use_count() == 1);
}

// held_only_by, and its buffer fits the slot (`size`: its elements in this replay): a
// replay may overwrite it.
bool free_to_overwrite(const UOpPtr& view, long holders, const Program::Fresh& slot, int64_t size) {
  return held_only_by(view, holders) && base_buffer(view)->dtype == slot.dtype &&
         base_buffer(view)->get<std::vector<int64_t>>().at(1) == size;
}

// The node a state binds, holding a buffer that fits it (realized first if the
// host changed it lazily), or null with `why`.
std::shared_ptr<TensorNode> bound_node(const Program::State& s, const std::vector<Tensor>& args,
                                       std::string& why) {
  auto node = s.argument >= 0 ? args[static_cast<size_t>(s.argument)].node() : s.node.lock();
  if (!node) {
    why = "a tensor it assigns is gone";
    return nullptr;
  }
  if (!base_buffer(node->uop)) Tensor(node).realize();
  const UOpPtr& b = base_buffer(node->uop);
  if (!b || !(b->dtype == s.dtype) || b->get<std::vector<int64_t>>().at(1) != s.size) {
    why = "a tensor it assigns no longer holds a buffer of the recorded dtype and size";
    return nullptr;
  }
  return node;
}

// Points an in-place state at a copy of its buffer when something besides the
// node still reads it, as the assign would have copied on write.
void copy_if_shared(TensorNode& node, const Program::State& s) {
  const UOpPtr& view = node.uop;
  const UOpPtr& b = base_buffer(view);
  if (view.use_count() == 1 && (view == b || b.use_count() == 1)) return;
  const UOpPtr copy = detail::allocate_buffer(s.dtype, s.size, false);
  std::memcpy(detail::buffer_data(copy), detail::buffer_data(b),
              static_cast<size_t>(s.size) * s.dtype.itemsize());
  static_cast<Buffer*>(b->storage().get())->retire();
  detail::point_at(node, like(s.recorded, copy), detail::NewUOp::realized);
}

// Per fresh slot, the view a replay writes: a tensor's own buffer when only
// it can read it (a gradient nobody kept), the slot's spare, else a new buffer.
std::vector<UOpPtr> fresh_views(const Program& p, const ArgValues& at) {
  std::vector<int64_t> sizes;  // each slot's elements in this replay
  for (const auto& slot : p.fresh) sizes.push_back(bound(slot.count, at).value());
  std::vector<UOpPtr> views(p.fresh.size());
  for (const auto& c : p.computed) {
    const auto node = c.node.lock();
    const auto leaf = c.grad_of.lock();
    if (!node || (leaf && leaf->grad.node() != node)) continue;  // not the gradient now: keeps its value
    UOpPtr& v = views[c.slot - p.first_fresh()];
    const size_t f = c.slot - p.first_fresh();
    if (!v && free_to_overwrite(node->uop, 1, p.fresh[f], sizes[f])) v = node->uop;
  }
  for (size_t f = 0; f < p.fresh.size(); ++f) {
    const Program::Fresh& slot = p.fresh[f];
    if (!views[f])
      views[f] = free_to_overwrite(slot.spare, 1, slot, sizes[f])
                     ? slot.spare
                     : detail::allocate_buffer(slot.dtype, sizes[f], false);
  }
  return views;
}

void run_kernels(const Program& p, const std::vector<void*>& table, const ArgValues& at) {
  std::vector<void*> bufs;
  std::vector<int64_t> vars;
  const bool timed = flags()->debug >= 2;
  detail::InFlight travelling;
  for (const auto& k : p.kernels) {
    if (k.collective) {  // the job's ranks replay the same items in the same order
      if (k.wait) {
        travelling.wait(*k.collective);
        continue;
      }
      std::vector<const void*> pieces;  // a bucket's, after its input and output
      for (size_t s = 2; s < k.slots.size(); ++s) pieces.push_back(table[k.slots[s]]);
      travelling.start(*k.collective, table[k.slots[0]], table[k.slots[1]], pieces, timed ? 2 : 0);
      continue;
    }
    travelling.progress();
    bufs.clear();
    for (uint32_t s : k.slots) bufs.push_back(table[s]);
    vars = k.vars;  // the size variables take this replay's values, and so does the parallel extent
    for (const auto& [position, variable] : k.run_vars) vars[position] = at.values.at(variable);
    const int64_t extent = k.run_vars.empty() ? k.parallel_extent : parallel_extent(k.kernel->extent, vars);
    if (!timed) {
      run_kernel(k.kernel->fn, bufs, vars, extent, {}, k.work);
      continue;
    }
    const auto t0 = std::chrono::steady_clock::now();
    run_kernel(k.kernel->fn, bufs, vars, extent, {}, k.work);
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
      if (held_only_by(slot.spare, 1)) slot.spare = nullptr;
    for (const auto& s : p.scratch)
      if (p.kept[s.kept].held.use_count() == 1) p.kept[s.kept].held = nullptr;
  }
}

std::optional<std::vector<Tensor>> Capture::Impl::replay(const std::vector<Tensor>& args, const ArgValues& at,
                                                         Program& p, std::string& why) const {
  // Everything is bound and checked before anything runs: a stale recording changes nothing.
  std::vector<std::shared_ptr<TensorNode>> nodes;
  for (const auto& s : p.states) {
    nodes.push_back(bound_node(s, args, why));
    if (!nodes.back()) return std::nullopt;
  }
  // An assign the host made into memory the recording only reads happens first, as a realize would.
  std::vector<const void*> borrowed;
  for (const auto& k : p.kept)
    if (const auto b = k.borrowed.lock()) borrowed.push_back(b->storage().get());
  for (const auto& node : detail::assigns_into(borrowed)) Tensor(node).realize();
  std::vector<UOpPtr> kept;
  for (const auto& k : p.kept) {
    if (!k.borrows) {
      kept.push_back(k.held);  // null for released scratch: allocated below
      continue;
    }
    kept.push_back(k.borrowed.lock());
    if (!kept.back()) {
      why = "the memory of a tensor it reads is gone";
      return std::nullopt;
    }
    if (!k.retired_at_record && static_cast<const Buffer*>(kept.back()->storage().get())->retired()) {
      why = "an assign outside it moved a tensor it reads to a new buffer";
      return std::nullopt;
    }
  }
  for (size_t i = 0; i < p.states.size(); ++i)
    if (p.states[i].out_slot == p.inputs + i) copy_if_shared(*nodes[i], p.states[i]);
  for (const auto& s : p.scratch)
    if (!kept[s.kept]) kept[s.kept] = p.kept[s.kept].held = detail::allocate_buffer(s.dtype, s.size, false);
  const std::vector<UOpPtr> fresh = fresh_views(p, at);
  std::vector<void*> table;
  table.reserve(p.first_kept() + p.kept.size());
  for (const auto& a : args) table.push_back(detail::buffer_data(arg_buffer(a.node()->uop)));
  for (const auto& n : nodes) table.push_back(detail::buffer_data(base_buffer(n->uop)));
  for (const auto& v : fresh) table.push_back(detail::buffer_data(base_buffer(v)));
  for (const auto& b : kept) table.push_back(detail::buffer_data(b));
  run_kernels(p, table, at);
  // Each copied state's old buffer is its out slot's spare: the next replay writes there.
  for (size_t i = 0; i < p.states.size(); ++i) {
    const Program::State& s = p.states[i];
    if (s.out_slot == p.inputs + i) {  // in place: the same buffer holds a new value
      detail::point_at(*nodes[i], nodes[i]->uop, detail::NewUOp::value);
      continue;
    }
    const size_t f = s.out_slot - p.first_fresh();
    p.fresh[f].spare = nodes[i]->uop;
    detail::point_at(*nodes[i], like(s.recorded, fresh[f]), detail::NewUOp::value);
  }
  for (const auto& c : p.computed) {
    const auto node = c.node.lock();
    UOpPtr view = like(c.recorded, fresh[c.slot - p.first_fresh()], at);
    if (const auto leaf = c.grad_of.lock(); leaf && (!node || leaf->grad.node() != node))
      leaf->grad = Tensor(std::make_shared<TensorNode>(std::move(view)));
    else if (node)
      detail::point_at(*node, std::move(view), detail::NewUOp::value);
  }
  std::vector<Tensor> out;
  for (const auto& o : p.outputs) {
    UOpPtr view;
    if (o.slot < p.inputs)
      view = like(o.recorded, base_buffer(args[o.slot].node()->uop), at);
    else if (o.slot < p.first_fresh())
      view = like(o.recorded, nodes[o.slot - p.inputs]->uop);
    else if (o.slot < p.first_kept())
      view = p.fresh[o.slot - p.first_fresh()].spare = like(o.recorded, fresh[o.slot - p.first_fresh()], at);
    else
      view = like(o.recorded, kept[o.slot - p.first_kept()], at);
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
    const ArgValues at = arg_values(bound);
    SignatureState* state = nullptr;
    bool stale = false;
    {
      std::lock_guard lock(impl_->mu);
      state = &impl_->states[signature_of(bound, at)];  // std::map: the reference stays valid
      ++state->calls;
      if (state->program) {
        std::string why;
        if (auto out = impl_->replay(bound, at, *state->program, why)) return std::move(*out);
        state->program.reset();
        stale = true;
        ++state->dropped;
        if (flags()->debug >= 1)
          log().info(
              "Capture: dropped a stale recording, never replayed: {}; {}", why,
              state->dropped < kMaxDropped ? "this call records again" : "the signature now runs uncaptured");
      }
    }
    if (stale && state->dropped < kMaxDropped) return impl_->record(bound, at, *state);
    if (stale)
      log().warn(
          "Capture: recordings of one signature went stale {} times (tensors it binds are replaced or moved "
          "between calls); it runs uncaptured from now on (docs/api.md, Capture)",
          state->dropped);
    if (state->calls == 1) return impl_->first_call(bound, *state);
    if (state->calls == 2) return impl_->record(bound, at, *state);
  }
  std::vector<Tensor> results = impl_->step(bound);
  realize_results(results, bound);
  return results;
}

const std::optional<Program>* Capture::Impl::program_for(const std::vector<Tensor>& args) const {
  const std::vector<Tensor> bound = bindable(args);
  const Signature signature = signature_of(bound, arg_values(bound));
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
  if (!p || !p->has_value()) return 0;
  const auto& kernels = (*p)->kernels;
  return static_cast<size_t>(
      std::count_if(kernels.begin(), kernels.end(), [](const auto& k) { return k.kernel; }));
}

}  // namespace loom
