#include "ir/kernel_cost.hpp"

#include "ir/float_math.hpp"

#include <algorithm>
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

}  // namespace

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
