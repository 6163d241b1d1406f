#include "schedule/kernel_split.hpp"

#include "ir/buffer_access.hpp"
#include "ir/kernel_name.hpp"
#include "ir/pass_observer.hpp"
#include "ir/pattern.hpp"
#include "ir/planted_fault.hpp"
#include "ir/symbolic.hpp"

#include <algorithm>
#include <numeric>
#include <queue>
#include <unordered_map>
#include <unordered_set>

namespace loom {

namespace {

int64_t numel(const Shape& s) { return std::accumulate(s.begin(), s.end(), int64_t{1}, std::multiplies<>()); }

UOpPtr linear_index(const UOpPtr* idx, size_t n, const Shape& shape) {
  UOpPtr lin = const_int(DType::Int64, 0);
  int64_t stride = 1;
  for (size_t i = n; i-- > 0;) {
    if (shape[i] != 1) lin = idx[i] * stride + lin;
    stride *= shape[i];
  }
  return lin;
}

// Slots of one kernel: 0 is its output, then each buffer it reads, in order of
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
      const auto& shape = source->get<std::vector<int64_t>>();
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

BuiltKernel build_kernel(const UOpPtr& bufferize, const UOpPtr& out,
                         const std::unordered_map<const UOp*, UOpPtr>& buffer_of) {
  KernelBuilder kb{buffer_of, {}};
  UOpPtr out_param = kb.param(out);
  // Top-down, so an INDEX is rewritten before its BUFFERIZE source is visited:
  // a producer's body never enters its consumer's kernel.
  UOpPtr value = graph_rewrite(bufferize->src[0], buffer_to_param(), kb, RewriteOrder::TopDown);
  const auto& shape = bufferize->get<std::vector<int64_t>>();
  // A BUFFERIZE stores where its valid (after its ranges) holds: columns padded to whole panels.
  const UOpPtr valid = bufferize->src.size() > shape.size() + 1 ? bufferize->src.back() : nullptr;
  UOpPtr store = UOp::make(
      Op::STORE, value->dtype,
      {make_index(out_param, {linear_index(bufferize->src.data() + 1, shape.size(), shape)}, valid), value});
  std::vector<UOpPtr> end_src{store};
  for (size_t i = 1; i < bufferize->src.size(); ++i)
    if (bufferize->src[i]->op == Op::RANGE) end_src.push_back(bufferize->src[i]);
  UOpPtr effect = end_src.size() > 1 ? UOp::make(Op::END, value->dtype, std::move(end_src)) : store;
  const UOpPtr built = renumber_ranges(UOp::make(Op::SINK, DType::Bool, {effect}));
  return {{simplify(built), std::move(kb.slots), ""}, built};
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
  UOpPtr stored;
  for (const auto& n : toposort(kernel))
    if (n->op == Op::STORE) stored = n->src[0];
  for (const auto& n : toposort(kernel))
    if (n->op == Op::LOAD && n->src[0]->src[0]->op == Op::DEFINE_GLOBAL &&
        n->src[0]->src[0]->arg_int() == 0 && n->src[0]->src[1] != stored->src[1])
      return false;
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

// The kernels (one per BUFFERIZE, in toposort order) and what must run before
// each: the kernels it reads, and for an in-place write every other kernel
// that reads the old value of the buffer it overwrites.
struct KernelOrder {
  std::vector<UOpPtr> kernels;
  std::unordered_map<const UOp*, size_t> index;
  std::vector<DirectReads> reads;
  std::vector<std::vector<size_t>> before;

  explicit KernelOrder(const UOpPtr& sink) {
    for (const auto& n : toposort(sink))
      if (n->op == Op::BUFFERIZE) {
        index.emplace(n.get(), kernels.size());
        kernels.push_back(n);
        reads.push_back(direct_reads(n));
      }
    before.resize(kernels.size());
    for (size_t k = 0; k < kernels.size(); ++k)
      for (const UOp* dep : reads[k].kernels) before[k].push_back(index.at(dep));
  }

  // Must `later` run after `earlier` (through any chain of edges)?
  bool depends(size_t later, size_t earlier) const {
    std::vector<size_t> stack{later};
    std::vector<char> seen(kernels.size(), 0);
    while (!stack.empty()) {
      const size_t k = stack.back();
      stack.pop_back();
      if (k == earlier) return true;
      if (seen[k]++) continue;
      stack.insert(stack.end(), before[k].begin(), before[k].end());
    }
    return false;
  }

  // Orders every other reader of `buffer` before `writer`; false (and no
  // change) when a reader needs the writer's result, so both cannot hold.
  bool order_readers_before(size_t writer, const UOpPtr& buffer) {
    std::vector<size_t> readers;
    for (size_t k = 0; k < kernels.size(); ++k)
      if (k != writer && std::count(reads[k].buffers.begin(), reads[k].buffers.end(), buffer.get())) {
        if (depends(k, writer)) return false;
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

  std::vector<BuiltKernel> built;
  std::unordered_map<const UOp*, UOpPtr> buffer_of;
  for (const auto& n : graph.kernels) {
    if (auto it = requested.find(n.get()); it != requested.end()) {
      buffer_of[n.get()] = it->second;
      BuiltKernel k = build_kernel(n, it->second, buffer_of);
      if (reads_output_only_in_place(k.kernel.ast)) {
        built.push_back(std::move(k));
        continue;
      }
    }
    const int64_t size = numel(n->get<std::vector<int64_t>>());
    UOpPtr out = make_buffer(n->dtype, size);
    buffer_of[n.get()] = out;
    built.push_back(build_kernel(n, out, buffer_of));
  }
  Schedule schedule;
  std::vector<UOpPtr> unsimplified;
  for (size_t k : graph.order()) {
    // A kernel writing no element has nothing to do; its buffer still exists.
    // Simplifying its empty ranges away can leave a store whose address ignores
    // a loop it sits in, which codegen would refuse.
    if (numel(graph.kernels[k]->get<std::vector<int64_t>>()) == 0) continue;
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
    const auto& shape = root->get<std::vector<int64_t>>();
    const UOpPtr& buf = buffer_of.at(root.get());
    schedule.results.push_back(shape == *buf->shape() ? buf
                                                      : UOp::make(Op::RESHAPE, buf->dtype, {buf}, shape));
  }
  return schedule;
}

}  // namespace loom
