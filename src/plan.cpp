#include "src/plan.hpp"

#include "src/engine.hpp"
#include "src/memory_plan.hpp"
#include "src/offset_vars.hpp"
#include "src/plan_overlap.hpp"

#include "codegen/codegen.hpp"
#include "ir/kernel_cost.hpp"
#include "ir/pattern.hpp"
#include "schedule/schedule.hpp"

#include <fmt/format.h>

#include <limits>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

namespace loom::detail {

namespace {
// Placeholders are BUFFER nodes without memory whose id is -(table index + 1):
// real buffers have positive ids, so the two never meet in the intern table.
UOpPtr placeholder(DType dtype, size_t index, int64_t size) {
  return UOp::make(Op::BUFFER, dtype, {}, std::vector<int64_t>{-static_cast<int64_t>(index) - 1, size});
}

uint32_t table_index(const UOpPtr& buffer) {
  const int64_t id = buffer->op == Op::BUFFER ? buffer->get<std::vector<int64_t>>().at(0) : 0;
  if (id >= 0)
    throw Error(fmt::format("engine: the schedule bound a {} node that is not a placeholder buffer",
                            op_name(buffer->op)));
  return static_cast<uint32_t>(-id - 1);
}

// The buffer a schedule's result is: itself, or the buffer under its view (a
// RESHAPE, and for a symbolic shape a SHRINK to its elements first).
const UOpPtr& result_buffer(const UOpPtr& result) {
  const UOp* r = result.get();
  if (r->op == Op::BUFFER) return result;
  while (r->src[0]->op != Op::BUFFER) r = r->src[0].get();
  return r->src[0];
}

// The COLLECTIVE nodes of `root` whose input reaches no other COLLECTIVE: the
// next ones to run, in toposort order.
std::vector<UOpPtr> ready_collectives(const UOpPtr& root) {
  std::unordered_set<const UOp*> reaching;  // nodes that are or reach a COLLECTIVE
  std::vector<UOpPtr> ready;
  for (const UOpPtr& u : toposort(root)) {
    bool reaches = false;
    for (const auto& s : u->src) reaches = reaches || reaching.count(s.get()) > 0;
    if (u->op == Op::COLLECTIVE) {
      if (!reaches) ready.push_back(u);
      reaches = true;
    }
    if (reaches) reaching.insert(u.get());
  }
  return ready;
}

// The targets that reach no COLLECTIVE and may be computed with the first
// round's collective inputs, in one schedule: what they share with the
// backward pass (a loss, batch-norm statistics of the forward's activations)
// is computed once, not again after the collectives, and their kernels run
// while the collectives are in flight. A target assigned into a buffer
// stays in the last part when anything else reads that buffer: the rest of
// the graph must see its old value.
std::vector<char> independent_targets(const std::vector<UOpPtr>& targets, const std::vector<UOpPtr>& into) {
  std::unordered_set<const UOp*> reaching;  // nodes that are or reach a COLLECTIVE
  for (const UOpPtr& u : toposort(UOp::make(Op::SINK, DType::Bool, targets))) {
    bool reaches = u->op == Op::COLLECTIVE;
    for (const auto& s : u->src) reaches = reaches || reaching.count(s.get()) > 0;
    if (reaches) reaching.insert(u.get());
  }
  std::vector<char> out(targets.size(), 0);
  std::vector<UOpPtr> others;
  for (size_t i = 0; i < targets.size(); ++i) {
    out[i] = reaching.count(targets[i].get()) == 0;
    if (!out[i]) others.push_back(targets[i]);
  }
  std::unordered_set<const UOp*> read_elsewhere;
  if (!others.empty())
    for (const UOpPtr& u : toposort(UOp::make(Op::SINK, DType::Bool, others)))
      if (u->op == Op::BUFFER) read_elsewhere.insert(u.get());
  for (size_t i = 0; i < targets.size() && i < into.size(); ++i)
    if (out[i] && into[i] && read_elsewhere.count(into[i].get()) > 0) out[i] = 0;
  return out;
}

int64_t elements(const UOpPtr& u) {
  int64_t n = 1;
  for (int64_t d : *u->shape()) n *= d;
  return n;
}

// One part of a plan: schedules `targets` and appends their kernels to the
// plan. Returns each target's result, a placeholder buffer or a view of one;
// `made[i]` says whether a kernel of this part wrote it (else the target was
// a buffer already).
struct Part {
  std::vector<UOpPtr> results;
  std::vector<bool> made;
};
Part schedule_part(Plan& plan, const std::vector<UOpPtr>& targets, const BufferFactory& make_buffer,
                   const std::vector<UOpPtr>& into, const ScheduleOptions& options, size_t part) {
  Part out{std::vector<UOpPtr>(targets.size()), std::vector<bool>(targets.size(), false)};
  std::vector<UOpPtr> rest, rest_into;
  std::vector<size_t> where;
  for (size_t i = 0; i < targets.size(); ++i) {
    const bool assigned = i < into.size() && into[i];
    if (is_buffer_view(targets[i]) && !assigned) {
      out.results[i] = targets[i];
      continue;
    }
    rest.push_back(targets[i]);
    rest_into.push_back(assigned ? into[i] : nullptr);
    where.push_back(i);
  }
  if (rest.empty()) return out;
  Schedule schedule = create_schedule(rest, make_buffer, rest_into, options);
  // Names are unique within a part (the same name is the same kernel); a kernel of a
  // later part named like another of an earlier part gets the part's number.
  std::unordered_map<std::string, const UOp*> earlier;
  for (const auto& k : plan.kernels) earlier.emplace(k.name, k.ast.get());
  for (auto& k : schedule.kernels) {
    const auto it = earlier.find(k.name);
    std::string name = it != earlier.end() && it->second != k.ast.get() ? fmt::format("{}_p{}", k.name, part)
                                                                        : std::move(k.name);
    PlanKernel pk{std::move(k.ast), std::move(name), {}, k.outputs, 1, {}, {}, {}};
    for (const auto& b : k.buffers) pk.args.push_back(table_index(b));
    plan.kernels.push_back(std::move(pk));
  }
  for (size_t j = 0; j < rest.size(); ++j) {
    out.results[where[j]] = schedule.results[j];
    out.made[where[j]] = true;
  }
  return out;
}
}  // namespace

Plan plan_schedule(const std::vector<UOpPtr>& targets, const GraphSignature& sig,
                   const std::vector<int64_t>& into) {
  Plan plan;
  plan.inputs = sig.inputs();
  std::vector<std::pair<UOpPtr, UOpPtr>> swaps;
  std::vector<UOpPtr> inputs;
  for (size_t p = 0; p < sig.inputs(); ++p) {
    const UOpPtr& buf = sig.buffer(p);
    inputs.push_back(placeholder(buf->dtype, p, buf->get<std::vector<int64_t>>().at(1)));
    swaps.emplace_back(buf, inputs.back());
  }
  const UOpPtr abstract = substitute(UOp::make(Op::SINK, DType::Bool, targets), swaps);
  std::vector<UOpPtr> abstract_into(into.size());
  for (size_t i = 0; i < into.size(); ++i)
    if (into[i] >= 0) abstract_into[i] = inputs.at(static_cast<size_t>(into[i]));

  // A symbolic size's placeholder has its upper bound (what the kernels may index
  // at most); each run allocates what its values need.
  auto make_buffer = [&plan](DType dtype, const Dim& size) {
    plan.allocations.push_back({dtype, size.max(), size.is_symbolic() ? size : Dim()});
    return placeholder(dtype, plan.inputs + plan.allocations.size() - 1, size.max());
  };
  // b of a matmul is packed in panels as wide as the tile codegen will give it.
  const std::shared_ptr<const Flags> f = flags();
  const ScheduleOptions options{matmul_panel_bytes(*f), matmul_panel_rows(*f), matmul_panel_depth(*f),
                                target_of(*f)};
  // Each round schedules the inputs of the collectives that depend on no other,
  // then runs them: their results are buffers the rest of the graph reads. The
  // first round also schedules the targets that need no collective.
  UOpPtr graph = abstract;
  std::vector<char> early;  // per target: scheduled in the first round
  std::vector<UOpPtr> early_results(targets.size());
  for (size_t part = 0;; ++part) {
    const std::vector<UOpPtr> ready = ready_collectives(graph);
    if (ready.empty()) break;
    // Every source of each ready collective (a bucket has several), then the early targets.
    std::vector<UOpPtr> inputs_of, inputs_into;
    std::vector<size_t> first_source;  // per ready collective: its first entry in inputs_of
    for (const UOpPtr& c : ready) {
      first_source.push_back(inputs_of.size());
      inputs_of.insert(inputs_of.end(), c->src.begin(), c->src.end());
    }
    const size_t sources = inputs_of.size();
    if (part == 0) {
      early = independent_targets(graph->src, abstract_into);
      inputs_into.resize(inputs_of.size());
      for (size_t t = 0; t < early.size(); ++t)
        if (early[t]) {
          inputs_of.push_back(graph->src[t]);
          inputs_into.push_back(t < abstract_into.size() ? abstract_into[t] : nullptr);
        }
    }
    const size_t first = plan.kernels.size();
    const Part computed = schedule_part(plan, inputs_of, make_buffer, inputs_into, options, part);
    for (size_t t = 0, j = sources; part == 0 && t < early.size(); ++t)
      if (early[t]) early_results[t] = computed.results[j++];
    std::vector<std::vector<uint32_t>> input(ready.size());  // per collective: its sources' buffers
    std::unordered_map<uint32_t, int> readers;  // buffer -> the collectives of this round reading it
    for (size_t i = 0; i < ready.size(); ++i)
      for (size_t s = 0; s < ready[i]->src.size(); ++s) {
        const UOpPtr& r = computed.results[first_source[i] + s];
        input[i].push_back(table_index(result_buffer(r)));
        ++readers[input[i].back()];
      }
    for (const UOpPtr& r : early_results)  // a target's value is no collective's to overwrite
      if (r && (r->op == Op::BUFFER || r->src[0]->op == Op::BUFFER)) ++readers[table_index(result_buffer(r))];
    // Each collective starts as soon as the kernels writing its input have run.
    std::vector<std::pair<UOpPtr, UOpPtr>> results;
    for (const size_t i : order_for_inputs(plan.kernels, first, input)) {
      const UOpPtr& c = ready[i];
      // In place on a buffer this round's kernels wrote for this collective alone; a
      // buffer the graph reads elsewhere (an input, an earlier collective's result,
      // another collective's input) is copied. A bucket's pieces are copied into a
      // buffer of its own.
      const CollectiveArg arg = collective_arg(*c);
      const bool same_size =
          arg.kind != CollectiveKind::AllGather && arg.kind != CollectiveKind::ReduceScatter;
      const bool bucket = c->src.size() > 1;
      const bool in_place =
          !bucket && same_size && computed.made[first_source[i]] && readers[input[i][0]] == 1;
      const int64_t size = elements(c);
      const UOpPtr out = in_place ? placeholder(c->dtype, input[i][0], size) : make_buffer(c->dtype, size);
      const size_t after = std::max(ready_after(plan.kernels, input[i]),
                                    plan.collectives.empty() ? size_t{0} : plan.collectives.back().after);
      std::vector<BucketPiece> pieces;
      if (bucket) {
        const BucketLayout layout = bucket_layout(c->src);
        for (size_t s = 0; s < c->src.size(); ++s)
          pieces.push_back({input[i][s], layout.offsets[s], elements(c->src[s])});
      }
      const uint32_t in = bucket ? table_index(out) : input[i][0];
      plan.collectives.push_back({arg, in, table_index(out), c->dtype, size, after, after,
                                  fmt::format("{} #{}", collective_name(arg), plan.collectives.size()),
                                  std::move(pieces)});
      const bool flat = *c->shape() == Shape{size};
      results.emplace_back(c, flat ? out : UOp::make(Op::RESHAPE, c->dtype, {out}, *c->shape()));
    }
    graph = substitute(graph, results);
  }
  std::vector<UOpPtr> rest, rest_into;
  for (size_t t = 0; t < graph->src.size(); ++t)
    if (early.empty() || !early[t]) {
      rest.push_back(graph->src[t]);
      rest_into.push_back(t < abstract_into.size() ? abstract_into[t] : nullptr);
    }
  const Part last = schedule_part(plan, rest, make_buffer, rest_into, options, plan.collectives.size());
  if (!flags()->disabled(kOffsetVarsPass)) share_offset_kernels(plan.kernels);
  set_waits(plan);
  std::vector<UOpPtr> results;
  for (size_t t = 0, j = 0; t < graph->src.size(); ++t)
    results.push_back(!early.empty() && early[t] ? early_results[t] : last.results[j++]);
  for (const auto& r : results)
    plan.results.push_back({table_index(result_buffer(r)), r->op == Op::BUFFER ? std::nullopt : r->shape()});
  share_dead_buffers(plan);
  return plan;
}

double PlanCost::recompute_ratio() const {
  if (materialised > 0) return scheduled / materialised;
  return scheduled > 0 ? std::numeric_limits<double>::infinity() : 1.0;
}

namespace {
// `targets` with every op that computes (ALU, reduce) realized, as if each were
// followed by .contiguous(): each is computed once, in a kernel of its own.
std::vector<UOpPtr> each_op_realized(const std::vector<UOpPtr>& targets) {
  std::unordered_map<const UOp*, UOpPtr> now;
  for (const UOpPtr& u : toposort(targets)) {
    std::vector<UOpPtr> src;
    for (const UOpPtr& s : u->src) src.push_back(now.at(s.get()));
    UOpPtr v = src == u->src ? u : u->with_src(std::move(src));
    if (is_alu(u->op) || u->op == Op::REDUCE_AXIS) v = UOp::make(Op::CONTIGUOUS, v->dtype, {v});
    now[u.get()] = std::move(v);
  }
  std::vector<UOpPtr> out;
  for (const UOpPtr& t : targets) out.push_back(now.at(t.get()));
  return out;
}

// The plan's cost (kernel_work and launches) and its arithmetic alone.
std::pair<double, double> cost_of(const Plan& plan, const GraphSignature& sig) {
  double work = 0, ops = 0;
  for (const PlanKernel& k : plan.kernels) {
    double bytes = 0;
    for (uint32_t slot : k.args) {
      if (slot < plan.inputs) {
        const UOpPtr& b = sig.buffer(slot);
        bytes += static_cast<double>(b->get<std::vector<int64_t>>().at(1) * b->dtype.itemsize());
      } else {
        const PlanBuffer& a = plan.allocations.at(slot - plan.inputs);
        bytes += static_cast<double>(a.size * a.dtype.itemsize());
      }
    }
    const double arithmetic = kernel_arithmetic(k.ast);
    work += kernel_work(arithmetic, bytes) + kKernelLaunchOps;
    ops += arithmetic;
  }
  return {work, ops};
}
}  // namespace

PlanCost plan_cost(const Plan& plan, const GraphSignature& sig, const std::vector<UOpPtr>& targets) {
  const std::vector<UOpPtr> realized = each_op_realized(targets);
  const GraphSignature realized_sig = sign_graph(realized);
  const Plan materialised = plan_schedule(realized, realized_sig, std::vector<int64_t>(realized.size(), -1));
  PlanCost out;
  std::tie(out.scheduled, out.scheduled_ops) = cost_of(plan, sig);
  std::tie(out.materialised, out.materialised_ops) = cost_of(materialised, realized_sig);
  return out;
}

}  // namespace loom::detail
