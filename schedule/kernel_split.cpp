#include "schedule/kernel_split.hpp"

#include "ir/buffer_access.hpp"
#include "ir/dim_expr.hpp"
#include "ir/kernel_name.hpp"
#include "ir/pass_observer.hpp"
#include "ir/pattern.hpp"
#include "ir/planted_fault.hpp"
#include "ir/symbolic.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <queue>
#include <unordered_map>
#include <unordered_set>

namespace loom {

namespace {

UOpPtr linear_index(const UOpPtr* idx, size_t n, const Shape& shape) {
  UOpPtr lin = const_int(DType::Int64, 0);
  Dim stride = 1;
  for (size_t i = n; i-- > 0;) {
    if (shape[i] != 1) lin = idx[i] * stride + lin;
    stride *= shape[i];
  }
  return lin;
}

// Slots of one kernel: its outputs first, then each buffer it reads, in order of
// first appearance.
struct KernelBuilder {
  const std::unordered_map<const UOp*, UOpPtr>& buffer_of;  // BUFFERIZE -> its BUFFER
  std::vector<UOpPtr> slots;

  UOpPtr param(const UOpPtr& buffer) {
    size_t slot = 0;
    while (slot < slots.size() && slots[slot] != buffer) ++slot;
    if (slot == slots.size()) slots.push_back(buffer);
    return UOp::make(Op::DEFINE_GLOBAL, buffer->dtype.ptr_to(), {}, static_cast<int64_t>(slot));
  }

  // INDEX(BUFFER, i[, valid]) or INDEX(BUFFERIZE, i0..in[, valid]) -> INDEX(DEFINE_GLOBAL, linear[, valid])
  UOpPtr index_param(const UOpPtr& index) {
    const UOpPtr& source = index->src[0];
    std::vector<UOpPtr> src;
    size_t n_idx = 1;
    if (source->op == Op::BUFFERIZE) {
      const auto& shape = source->get<Shape>();
      n_idx = shape.size();
      src = {param(buffer_of.at(source.get())), linear_index(index->src.data() + 1, n_idx, shape)};
    } else {
      src = {param(source), index->src.at(1)};
    }
    if (index->src.size() > n_idx + 1) src.push_back(index->src.back());
    if (planted_fault() == PlantedFault::LoadPastEnd) src[1] = src[1] + 1;  // ir/planted_fault.hpp
    const DType dt = src[0]->dtype;  // read before src is moved into the call
    return UOp::make(Op::INDEX, dt, std::move(src));
  }
};

const PatternMatcher& buffer_to_param() {
  static const PatternMatcher pm(
      "buffer_to_param", {
                             {UPat::op(Op::INDEX, {UPat::ops({Op::BUFFER, Op::BUFFERIZE})}).allow_more_src(),
                              [](const Match& m) { return m.ctx<KernelBuilder>().index_param(m.root()); }},
                         });
  return pm;
}

// A kernel as split, and before the simplifier cleaned its index arithmetic.
struct BuiltKernel {
  ScheduledKernel kernel;
  UOpPtr unsimplified;
};

// The effect storing `bufferize`'s value into `out_param`: END(STORE ...) over its ranges.
UOpPtr store_effect(const UOpPtr& bufferize, const UOpPtr& out_param, KernelBuilder& kb) {
  // Top-down, so an INDEX is rewritten before its BUFFERIZE source is visited:
  // a producer's body never enters its consumer's kernel.
  UOpPtr value = graph_rewrite(bufferize->src[0], buffer_to_param(), kb, RewriteOrder::TopDown);
  const auto& shape = bufferize->get<Shape>();
  // A BUFFERIZE stores where its valid (after its ranges) holds: columns padded to whole panels.
  const UOpPtr valid = bufferize->src.size() > shape.size() + 1 ? bufferize->src.back() : nullptr;
  UOpPtr store = UOp::make(
      Op::STORE, value->dtype,
      {make_index(out_param, {linear_index(bufferize->src.data() + 1, shape.size(), shape)}, valid), value});
  std::vector<UOpPtr> end_src{store};
  for (size_t i = 1; i < bufferize->src.size(); ++i)
    if (bufferize->src[i]->op == Op::RANGE) end_src.push_back(bufferize->src[i]);
  return end_src.size() > 1 ? UOp::make(Op::END, value->dtype, std::move(end_src)) : store;
}

// One kernel storing each of `group` (BUFFERIZEs sharing output ranges, schedule/
// multi_output.hpp) into `outs`: SINK(END(STORE out0 ...), END(STORE out1 ...), ...).
BuiltKernel build_kernel(const std::vector<UOpPtr>& group, const std::vector<UOpPtr>& outs,
                         const std::unordered_map<const UOp*, UOpPtr>& buffer_of) {
  KernelBuilder kb{buffer_of, {}};
  std::vector<UOpPtr> out_params, effects;
  for (const auto& out : outs) out_params.push_back(kb.param(out));
  for (size_t i = 0; i < group.size(); ++i) effects.push_back(store_effect(group[i], out_params[i], kb));
  const UOpPtr built = renumber_ranges(UOp::make(Op::SINK, DType::Bool, std::move(effects)));
  return {{simplify(built), std::move(kb.slots), "", outs.size()}, built};
}

}  // namespace

UOpPtr renumber_ranges(const UOpPtr& kernel) {
  std::vector<std::pair<UOpPtr, UOpPtr>> renames;
  int64_t next = 0;
  for (const auto& n : toposort(kernel))
    if (n->op == Op::RANGE) {
      const auto& axis = n->get<AxisArg>();
      renames.emplace_back(n, UOp::make(Op::RANGE, n->dtype, n->src, AxisArg{next++, axis.kind}));
    }
  return substitute(kernel, renames);
}

bool reads_output_only_in_place(const UOpPtr& kernel) {
  std::unordered_map<int64_t, UOpPtr> stored;  // output slot -> its STORE
  for (const auto& n : toposort(kernel))
    if (n->op == Op::STORE && n->src[0]->src[0]->op == Op::DEFINE_GLOBAL)
      stored[n->src[0]->src[0]->arg_int()] = n;
  // A kernel of several outputs computes their values in order (the linearizer places a
  // value at its first use): a load the slot's own store does not wait for may come
  // after that store, and read the new value.
  std::unordered_map<int64_t, std::unordered_set<const UOp*>> before_store;
  for (const auto& n : toposort(kernel)) {
    if (n->op != Op::LOAD || n->src[0]->src[0]->op != Op::DEFINE_GLOBAL) continue;
    const auto it = stored.find(n->src[0]->src[0]->arg_int());
    if (it == stored.end()) continue;
    if (n->src[0]->src[1] != it->second->src[0]->src[1]) return false;
    if (stored.size() == 1) continue;
    auto& cone = before_store[it->first];
    if (cone.empty())
      for (const auto& u : toposort(it->second->src[1])) cone.insert(u.get());
    if (!cone.contains(n.get())) return false;
  }
  return true;
}

namespace {
// What one kernel reads directly (not through another kernel): the kernels
// whose outputs it loads, and the buffers it loads.
struct DirectReads {
  std::vector<const UOp*> kernels, buffers;
};
DirectReads direct_reads(const UOpPtr& bufferize) {
  DirectReads out;
  std::vector<const UOp*> stack{bufferize->src[0].get()};
  std::unordered_set<const UOp*> seen;
  while (!stack.empty()) {
    const UOp* u = stack.back();
    stack.pop_back();
    if (!seen.insert(u).second) continue;
    if (u->op == Op::BUFFERIZE) out.kernels.push_back(u);
    if (u->op == Op::BUFFER) out.buffers.push_back(u);
    if (u->op == Op::BUFFERIZE || u->op == Op::BUFFER) continue;
    for (const auto& s : u->src) stack.push_back(s.get());
  }
  return out;
}

// The kernels (one per group of BUFFERIZEs that share output ranges, in toposort
// order of their first) and what must run before each: the kernels it reads, and
// for an in-place write every other kernel that reads the old value of the buffer
// it overwrites.
struct KernelOrder {
  std::vector<std::vector<UOpPtr>> kernels;  // each kernel's BUFFERIZEs, the one of most ranges first
  std::unordered_map<const UOp*, size_t> index;
  std::vector<DirectReads> reads;
  std::vector<std::vector<size_t>> before;

  explicit KernelOrder(const UOpPtr& sink) {
    std::unordered_map<const UOp*, size_t> kernel_of_range;
    for (const auto& n : toposort(sink))
      if (n->op == Op::BUFFERIZE) add(n, kernel_of_range);
    for (auto& group : kernels)
      std::stable_sort(group.begin(), group.end(),
                       [](const UOpPtr& a, const UOpPtr& b) { return a->src.size() > b->src.size(); });
    before.resize(kernels.size());
    for (size_t k = 0; k < kernels.size(); ++k)
      for (const UOp* dep : reads[k].kernels) {
        if (index.at(dep) == k)
          throw Error(
              fmt::format("kernel_split: a kernel of {} outputs reads one of them", kernels[k].size()));
        before[k].push_back(index.at(dep));
      }
  }

  // `n` joins the kernel of a BUFFERIZE it shares a RANGE with, or starts one.
  void add(const UOpPtr& n, std::unordered_map<const UOp*, size_t>& kernel_of_range) {
    size_t k = kernels.size();
    for (size_t i = 1; i < n->src.size(); ++i)
      if (const auto it = kernel_of_range.find(n->src[i].get()); it != kernel_of_range.end()) k = it->second;
    if (k == kernels.size()) kernels.emplace_back(), reads.emplace_back();
    for (size_t i = 1; i < n->src.size(); ++i)
      if (n->src[i]->op == Op::RANGE) kernel_of_range[n->src[i].get()] = k;
    kernels[k].push_back(n);
    index.emplace(n.get(), k);
    const DirectReads r = direct_reads(n);
    reads[k].kernels.insert(reads[k].kernels.end(), r.kernels.begin(), r.kernels.end());
    reads[k].buffers.insert(reads[k].buffers.end(), r.buffers.begin(), r.buffers.end());
  }

  // The kernels that must run after `earlier` (through any chain of edges), and
  // `earlier` itself: one walk of the edges, whatever number of kernels is asked about.
  std::vector<char> after(size_t earlier) const {
    std::vector<std::vector<size_t>> users(kernels.size());
    for (size_t k = 0; k < kernels.size(); ++k)
      for (size_t b : before[k]) users[b].push_back(k);
    std::vector<char> seen(kernels.size(), 0);
    std::vector<size_t> stack{earlier};
    seen[earlier] = 1;
    while (!stack.empty()) {
      const size_t k = stack.back();
      stack.pop_back();
      for (size_t u : users[k])
        if (!seen[u]++) stack.push_back(u);
    }
    return seen;
  }

  // Orders every other reader of `buffer` before `writer`; false (and no
  // change) when a reader needs the writer's result, so both cannot hold.
  bool order_readers_before(size_t writer, const UOpPtr& buffer) {
    std::vector<size_t> readers;
    std::vector<char> needs_writer;  // filled at the first reader
    for (size_t k = 0; k < kernels.size(); ++k)
      if (k != writer && std::count(reads[k].buffers.begin(), reads[k].buffers.end(), buffer.get())) {
        if (needs_writer.empty()) needs_writer = after(writer);
        if (needs_writer[k]) return false;
        readers.push_back(k);
      }
    before[writer].insert(before[writer].end(), readers.begin(), readers.end());
    return true;
  }

  // A topological order that keeps toposort order wherever the edges allow.
  std::vector<size_t> order() const {
    std::vector<size_t> waiting(kernels.size(), 0);
    std::vector<std::vector<size_t>> users(kernels.size());
    for (size_t k = 0; k < kernels.size(); ++k)
      for (size_t b : before[k]) {
        ++waiting[k];
        users[b].push_back(k);
      }
    std::priority_queue<size_t, std::vector<size_t>, std::greater<>> ready;
    for (size_t k = 0; k < kernels.size(); ++k)
      if (!waiting[k]) ready.push(k);
    std::vector<size_t> out;
    while (!ready.empty()) {
      const size_t k = ready.top();
      ready.pop();
      out.push_back(k);
      for (size_t u : users[k])
        if (!--waiting[u]) ready.push(u);
    }
    if (out.size() != kernels.size())  // a stage's fusion made kernels that wait on each other
      throw Error(fmt::format("kernel_split: {} of {} kernels read each other's outputs in a cycle",
                              kernels.size() - out.size(), kernels.size()));
    return out;
  }
};
}  // namespace

Schedule split_kernels(const UOpPtr& sink, const BufferFactory& make_buffer, const std::vector<UOpPtr>& into,
                       const KernelPasses& passes) {
  KernelOrder graph(sink);
  std::unordered_map<const UOp*, UOpPtr> requested;  // root BUFFERIZE -> existing buffer
  for (size_t i = 0; i < into.size() && i < sink->src.size(); ++i)
    if (into[i] && graph.order_readers_before(graph.index.at(sink->src[i].get()), into[i]))
      requested[sink->src[i].get()] = into[i];

  // Built in the order they run: a kernel's BUFFERIZEs read buffers of kernels before it,
  // which a kernel of several outputs may come after in toposort order.
  const std::vector<size_t> order = graph.order();
  std::vector<BuiltKernel> built(graph.kernels.size());
  std::unordered_map<const UOp*, UOpPtr> buffer_of;
  for (size_t k : order) {
    const auto& group = graph.kernels[k];
    // Each output written in place where asked (an assign into its own buffer), or, when
    // the kernel reads such a buffer other than before storing the same element, into a
    // fresh buffer (a copy).
    std::vector<UOpPtr> outs(group.size());
    bool in_place = false;
    for (size_t i = 0; i < group.size(); ++i)
      if (const auto it = requested.find(group[i].get());
          it != requested.end() && std::find(outs.begin(), outs.end(), it->second) == outs.end()) {
        outs[i] = it->second;
        in_place = true;
      }
    const auto fresh = [&](size_t i) {
      return make_buffer(group[i]->dtype, element_count(group[i]->get<Shape>()));
    };
    for (size_t i = 0; i < group.size(); ++i)
      if (!outs[i]) outs[i] = fresh(i);
    for (size_t i = 0; i < group.size(); ++i) buffer_of[group[i].get()] = outs[i];
    built[k] = build_kernel(group, outs, buffer_of);
    if (!in_place || reads_output_only_in_place(built[k].kernel.ast)) continue;
    for (size_t i = 0; i < group.size(); ++i)
      if (requested.contains(group[i].get()) && outs[i] == requested.at(group[i].get())) {
        outs[i] = fresh(i);
        buffer_of[group[i].get()] = outs[i];
      }
    built[k] = build_kernel(group, outs, buffer_of);
  }
  Schedule schedule;
  std::vector<UOpPtr> unsimplified;
  for (size_t k : order) {
    // A kernel writing no element has nothing to do; its buffer still exists.
    // Simplifying its empty ranges away can leave a store whose address ignores
    // a loop it sits in, which codegen would refuse.
    const auto& group = graph.kernels[k];
    if (std::all_of(group.begin(), group.end(),
                    [](const UOpPtr& n) { return element_count(n->get<Shape>()) == 0; }))
      continue;
    schedule.kernels.push_back(std::move(built[k].kernel));
    unsimplified.push_back(built[k].unsimplified);
  }
  std::vector<std::vector<KernelPassRun>> ran(schedule.kernels.size());
  if (passes)
    for (size_t k = 0; k < ran.size(); ++k) schedule.kernels[k].ast = passes(schedule.kernels[k].ast, ran[k]);
  // Named once all are known, so a name is unique within the schedule; the
  // simplify events (and the passes') wait for the names.
  std::vector<UOpPtr> asts;
  for (const auto& k : schedule.kernels) asts.push_back(k.ast);
  const std::vector<std::string> names = kernel_names(asts);
  for (size_t k = 0; k < names.size(); ++k) {
    schedule.kernels[k].name = names[k];
    if (!pass_observed()) continue;
    const UOpPtr simplified = ran[k].empty() ? schedule.kernels[k].ast : ran[k].front().before;
    notify_pass({PassLevel::Kernel, "simplify", names[k], unsimplified[k], simplified});
    for (const auto& r : ran[k]) notify_pass({PassLevel::Kernel, r.pass, names[k], r.before, r.after});
  }
  for (const auto& root : sink->src) {
    const auto& shape = root->get<Shape>();
    const UOpPtr& buf = buffer_of.at(root.get());
    // A buffer of symbolic size has room for the most elements it may hold: its
    // view takes the first element_count(shape).
    const UOpPtr whole =
        is_symbolic(shape) ? UOp::make(Op::SHRINK, buf->dtype, {buf}, Shape{0, element_count(shape)}) : buf;
    schedule.results.push_back(shape == *buf->shape() ? buf
                                                      : UOp::make(Op::RESHAPE, buf->dtype, {whole}, shape));
  }
  return schedule;
}

}  // namespace loom
