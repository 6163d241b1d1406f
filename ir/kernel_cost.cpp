#include "ir/kernel_cost.hpp"

#include "ir/float_math.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <unordered_map>
#include <unordered_set>

namespace loom {

namespace {

using RangeSet = std::vector<const UOp*>;  // sorted, small: a kernel has a handful of ranges

RangeSet merge(const RangeSet& a, const RangeSet& b) {
  RangeSet out;
  std::set_union(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

// Nodes that only compute addresses: reached from an INDEX's index or validity
// operands without passing through a LOAD.
std::unordered_set<const UOp*> index_math(const std::vector<UOpPtr>& nodes) {
  std::unordered_set<const UOp*> out;
  std::vector<const UOp*> stack;
  for (const UOpPtr& u : nodes)
    if (u->op == Op::INDEX)
      for (size_t i = 1; i < u->src.size(); ++i) stack.push_back(u->src[i].get());
  while (!stack.empty()) {
    const UOp* u = stack.back();
    stack.pop_back();
    if (u->op == Op::LOAD || !out.insert(u).second) continue;
    for (const UOpPtr& s : u->src) stack.push_back(s.get());
  }
  return out;
}

double ops_per_iteration(const UOp& u);

// Codegen lowers a Float32 EXP to exp_f32's form (codegen/transcendental.cpp): it costs
// that form's operations, as when the front end built the form itself, not one.
double exp_f32_ops() {
  static const double ops = [] {
    const UOpPtr x =
        UOp::make(Op::CAST, DType::Float32, {UOp::make(Op::DEFINE_VAR, DType::Int32, {}, VarArg{"x", 0, 1})});
    double n = 0;
    for (const UOpPtr& u : toposort(exp_f32(x))) n += ops_per_iteration(*u);
    return n;
  }();
  return ops;
}

double ops_per_iteration(const UOp& u) {
  if (u.op == Op::EXP && u.dtype.scalar == Scalar::Float32) return exp_f32_ops() * u.dtype.lanes;
  if (u.op == Op::MULACC) return 2.0 * u.dtype.lanes;
  if (is_alu(u.op) || u.op == Op::REDUCE) return u.dtype.lanes;
  return 0;
}

// What an op costs where it decides a schedule (value_ops, kernel_cost): as
// kernel_flops counts it, except that codegen lowers the other Float32
// transcendentals to forms like exp_f32's (codegen/transcendental.cpp), and a
// square root takes as long as several adds.
constexpr double kSqrtOps = 4;
double cost_ops(const UOp& u) {
  if (u.dtype.scalar == Scalar::Float32 &&
      (u.op == Op::EXP2 || u.op == Op::LOG2 || u.op == Op::SIN || u.op == Op::COS || u.op == Op::POW))
    return exp_f32_ops() * u.dtype.lanes;
  if (u.op == Op::SQRT) return kSqrtOps * u.dtype.lanes;
  return ops_per_iteration(u);
}

double trip(const UOp* range) { return static_cast<double>(std::max<int64_t>(range->src.at(0)->vmax(), 0)); }

// The ranges each node needs open: those it depends on, less those a REDUCE or END
// under it closes (codegen/needed_loops.hpp's sets).
std::unordered_map<const UOp*, RangeSet> needed_ranges(const std::vector<UOpPtr>& nodes) {
  std::unordered_map<const UOp*, RangeSet> ranges;
  for (const UOpPtr& u : nodes) {
    RangeSet& mine = ranges[u.get()];
    for (const UOpPtr& s : u->src) mine = merge(mine, ranges.at(s.get()));
    if (u->op == Op::RANGE) mine = merge(mine, {u.get()});
    if (u->op == Op::REDUCE || u->op == Op::END)
      for (size_t i = 1; i < u->src.size(); ++i) std::erase(mine, u->src[i].get());
  }
  return ranges;
}

}  // namespace

double value_ops(const UOpPtr& value, double ops_per_byte) {
  // The value's own nodes, sources first: reads of buffers are loads, not entered.
  std::vector<const UOp*> order;
  std::unordered_set<const UOp*> seen;
  std::vector<std::pair<const UOp*, bool>> stack{{value.get(), false}};
  while (!stack.empty()) {
    auto [u, expanded] = stack.back();
    stack.pop_back();
    if (expanded) {
      order.push_back(u);
      continue;
    }
    if (!seen.insert(u).second) continue;
    stack.emplace_back(u, true);
    if (u->op != Op::BUFFER && u->op != Op::BUFFERIZE)
      for (const UOpPtr& s : u->src) stack.emplace_back(s.get(), false);
  }
  std::unordered_set<const UOp*>
      addressing;  // index math: reached from an INDEX's operands, not through a LOAD
  for (const UOp* u : order)
    if (u->op == Op::INDEX)
      for (size_t i = 1; i < u->src.size(); ++i) stack.emplace_back(u->src[i].get(), false);
  while (!stack.empty()) {
    const UOp* u = stack.back().first;
    stack.pop_back();
    if (u->op == Op::LOAD || !seen.contains(u) || !addressing.insert(u).second) continue;
    for (const UOpPtr& s : u->src) stack.emplace_back(s.get(), false);
  }
  double ops = 0;
  std::unordered_map<const UOp*, RangeSet> under;  // the value's reduce ranges each node runs under
  for (const UOp* u : order) {
    RangeSet& mine = under[u];
    if (u->op != Op::BUFFER && u->op != Op::BUFFERIZE)
      for (const UOpPtr& s : u->src) mine = merge(mine, under.at(s.get()));
    if (u->op == Op::RANGE && u->get<AxisArg>().kind == AxisKind::Reduce) mine = merge(mine, {u});
    const double own = addressing.contains(u) ? 0
                       : u->op == Op::LOAD
                           ? ops_per_byte * static_cast<double>(u->dtype.itemsize()) * u->dtype.lanes
                           : cost_ops(*u);
    if (own != 0) {
      double iterations = 1;
      for (const UOp* r : mine) iterations *= trip(r);
      ops += own * iterations;
    }
    if (u->op == Op::REDUCE)
      for (size_t i = 1; i < u->src.size(); ++i) std::erase(mine, u->src[i].get());
  }
  return ops;
}

double kernel_cost(const UOpPtr& kernel, int64_t tile_columns, double ops_per_byte) {
  const std::vector<UOpPtr> nodes = toposort(kernel);
  const std::unordered_set<const UOp*> addressing = index_math(nodes);
  const std::unordered_map<const UOp*, RangeSet> needed = needed_ranges(nodes);
  // Ops on ranges and constants alone (a PAD's or a read's validity, an arange) are
  // address and mask math the linearizer hoists and LLVM strength-reduces: they cost
  // nothing here, in either schedule; only ops on loaded data count. So does a select
  // by such a mask (a read's validity put around its value where it is inlined: the
  // masked load already reads 0 there).
  std::unordered_set<const UOp*> on_data;
  for (const UOpPtr& u : nodes)
    if (u->op == Op::LOAD ||
        std::any_of(u->src.begin(), u->src.end(), [&](const UOpPtr& s) { return on_data.contains(s.get()); }))
      on_data.insert(u.get());
  // Each loop's nest, outermost first: an END opens its ranges in order, a REDUCE
  // its own inside the loops it needs (where the linearizer places it).
  std::unordered_map<const UOp*, std::vector<const UOp*>> nest;
  std::unordered_set<const UOp*> innermost;  // the last loop of each END: the tile's columns
  auto deepest = [&](const RangeSet& set) {
    const std::vector<const UOp*>* best = nullptr;
    for (const UOp* r : set) {
      const auto it = nest.find(r);
      if (it != nest.end() && (!best || it->second.size() > best->size())) best = &it->second;
    }
    return best ? *best : std::vector<const UOp*>{};
  };
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    const UOp& u = **it;
    if (u.op != Op::END && u.op != Op::REDUCE) continue;
    std::vector<const UOp*> chain = u.op == Op::END ? std::vector<const UOp*>{} : deepest(needed.at(&u));
    for (size_t i = 1; i < u.src.size(); ++i) {
      const UOp* r = u.src[i].get();
      if (r->op != Op::RANGE || nest.contains(r)) continue;
      chain.push_back(r);
      nest[r] = chain;
    }
    if (u.op == Op::END && u.src.size() > 1 && u.src.back()->op == Op::RANGE)
      innermost.insert(u.src.back().get());
  }
  double cost = 0;
  for (const UOpPtr& u : nodes) {
    const bool memory = u->op == Op::LOAD || u->op == Op::STORE;
    const DType moved = u->op == Op::STORE ? u->src.at(1)->dtype : u->dtype;
    const bool mask = u->op == Op::WHERE && !on_data.contains(u->src[0].get());
    const double ops = addressing.count(u.get()) || !on_data.contains(u.get()) || mask ? 0
                       : memory ? ops_per_byte * static_cast<double>(moved.itemsize()) * moved.lanes
                                : cost_ops(*u);
    if (ops == 0) continue;
    const RangeSet& mine = needed.at(u.get());
    std::vector<const UOp*> loops = deepest(mine);
    for (const UOp* r : mine)  // a range no END or REDUCE opens (a bare value): its own loop
      if (std::find(loops.begin(), loops.end(), r) == loops.end()) loops.push_back(r);
    double iterations = 1;
    for (const UOp* r : loops) {
      const bool broadcast_in_tile = innermost.contains(r) &&
                                     !std::binary_search(mine.begin(), mine.end(), r) &&
                                     loops.back()->get<AxisArg>().kind == AxisKind::Reduce;
      iterations *= broadcast_in_tile
                        ? std::ceil(trip(r) / static_cast<double>(std::max<int64_t>(tile_columns, 1)))
                        : trip(r);
    }
    cost += ops * iterations;
  }
  return cost;
}

double kernel_flops(const UOpPtr& kernel) {
  const std::vector<UOpPtr> nodes = toposort(kernel);
  const std::unordered_set<const UOp*> addressing = index_math(nodes);
  std::unordered_map<const UOp*, RangeSet> ranges;  // the ranges each node depends on
  double flops = 0;
  for (const UOpPtr& u : nodes) {
    RangeSet& mine = ranges[u.get()];
    for (const UOpPtr& s : u->src) mine = merge(mine, ranges.at(s.get()));
    if (u->op == Op::RANGE) mine = merge(mine, {u.get()});
    const double ops = addressing.count(u.get()) ? 0 : ops_per_iteration(*u);
    if (ops != 0) {
      double iterations = 1;
      for (const UOp* r : mine) iterations *= static_cast<double>(std::max<int64_t>(r->src.at(0)->vmax(), 0));
      flops += ops * iterations;
    }
    if (u->op == Op::REDUCE || u->op == Op::END)  // their users run outside the loops they close
      for (size_t i = 1; i < u->src.size(); ++i) std::erase(mine, u->src[i].get());
  }
  return flops;
}

}  // namespace loom
