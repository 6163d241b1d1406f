#include "ir/kernel_cost.hpp"

#include "ir/buffer_access.hpp"
#include "ir/float_math.hpp"

#include <algorithm>
#include <iterator>
#include <optional>
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

// An op as codegen emits it: a multiply-add two, a pair dot product four, any other ALU op
// or reduce step one, per lane.
double emitted_ops(const UOp& u) {
  if (u.op == Op::MULACC) return 2.0 * u.dtype.lanes;
  if (u.op == Op::DOT2) return 4.0 * u.dtype.lanes;
  if (is_alu(u.op) || u.op == Op::REDUCE) return u.dtype.lanes;
  return 0;
}

// Codegen lowers a Float32 EXP, EXP2, LOG2, SIN, COS, TANH, SIGMOID or ERF to its form
// (codegen/transcendental.cpp): it costs that form's operations, as when the front end built
// the form itself, not one. (POW's form computes in Float64; it counts as one op.)
constexpr std::pair<Op, UOpPtr (*)(const UOpPtr&)> kLoweredForms[] = {
    {Op::EXP, exp_f32}, {Op::EXP2, exp2_f32}, {Op::LOG2, log2_f32},       {Op::SIN, sin_f32},
    {Op::COS, cos_f32}, {Op::TANH, tanh_f32}, {Op::SIGMOID, sigmoid_f32}, {Op::ERF, erf_f32}};

// The operations of `op`'s Float32 form for one lane, or nullopt for an op codegen emits as
// it is. (The forms are made of emitted ops only.)
std::optional<double> lowered_form_ops(Op op) {
  static const std::unordered_map<Op, double> ops = [] {
    const UOpPtr x =
        UOp::make(Op::CAST, DType::Float32, {UOp::make(Op::DEFINE_VAR, DType::Int32, {}, VarArg{"x", 0, 1})});
    std::unordered_map<Op, double> out;
    for (const auto& [form_op, form] : kLoweredForms) {
      double n = 0;
      for (const UOpPtr& u : toposort(form(x))) n += emitted_ops(*u);
      out[form_op] = n;
    }
    return out;
  }();
  const auto it = ops.find(op);
  return it == ops.end() ? std::nullopt : std::optional<double>(it->second);
}

}  // namespace

double op_cost(const UOp& u) {
  if (u.dtype.scalar == Scalar::Float32)
    if (const auto form = lowered_form_ops(u.op)) return *form * u.dtype.lanes;
  return emitted_ops(u);
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
    const double ops = addressing.count(u.get()) ? 0 : op_cost(*u);
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

namespace {

// A select whose condition is addressing (a pad's validity) costs what a
// masked load would: nothing of the value's arithmetic.
bool counts(const UOp* u, const std::unordered_set<const UOp*>& data) {
  if (!data.count(u)) return false;
  return !(u->op == Op::WHERE && !data.count(u->src[0].get()));
}

// A condition on ranges (a load's validity) evaluated at one point of them;
// nullopt where it uses anything else.
std::optional<int64_t> evaluate(const UOp* u, const std::unordered_map<const UOp*, int64_t>& at) {
  if (u->op == Op::CONST) return u->const_int();
  if (u->op == Op::RANGE) {  // one a reduce inside the condition sums over is no point of it
    const auto it = at.find(u);
    return it == at.end() ? std::nullopt : std::optional<int64_t>(it->second);
  }
  std::vector<int64_t> v;
  for (const UOpPtr& s : u->src) {
    const auto x = evaluate(s.get(), at);
    if (!x) return std::nullopt;
    v.push_back(*x);
  }
  switch (u->op) {
    case Op::CAST: return u->dtype.scalar == Scalar::Bool ? int64_t{v[0] != 0} : v[0];
    case Op::NEG: return -v[0];
    case Op::ADD: return v[0] + v[1];
    case Op::SUB: return v[0] - v[1];
    case Op::MUL: return v[0] * v[1];
    case Op::IDIV: return v[1] == 0 ? 0 : v[0] / v[1];
    case Op::MOD: return v[1] == 0 ? 0 : v[0] % v[1];
    case Op::MAX: return std::max(v[0], v[1]);
    case Op::CMPLT: return int64_t{v[0] < v[1]};
    case Op::CMPNE: return int64_t{v[0] != v[1]};
    case Op::CMPEQ: return int64_t{v[0] == v[1]};
    case Op::AND: return v[0] & v[1];
    case Op::OR: return v[0] | v[1];
    case Op::XOR: return v[0] ^ v[1];
    case Op::WHERE: return v[0] ? v[1] : v[2];
    default: return std::nullopt;
  }
}

// The share of its ranges' iterations at which `valid` holds: counted point by
// point where they are at most 2^16, else taken as all (a pad's border is then a
// small share of its iterations anyway).
double share_valid(const UOp* valid) {
  constexpr double kCountedPoints = 65536;
  std::vector<const UOp*> ranges(valid->ranges().begin(), valid->ranges().end());
  double points = 1;
  for (const UOp* r : ranges) points *= static_cast<double>(std::max<int64_t>(r->src.at(0)->vmax(), 0));
  if (points == 0 || points > kCountedPoints) return 1;
  std::unordered_map<const UOp*, int64_t> at;
  for (const UOp* r : ranges) at[r] = 0;
  int64_t holds = 0;
  for (int64_t p = 0; p < static_cast<int64_t>(points); ++p) {
    int64_t rest = p;
    for (const UOp* r : ranges) {
      const int64_t n = r->src.at(0)->vmax();
      at[r] = rest % n;
      rest /= n;
    }
    const auto v = evaluate(valid, at);
    if (!v) return 1;
    holds += *v != 0;
  }
  return static_cast<double>(holds) / points;
}

double trips(const RangeSet& loops) {
  double n = 1;
  for (const UOp* r : loops) n *= static_cast<double>(std::max<int64_t>(r->src.at(0)->vmax(), 0));
  return n;
}

}  // namespace

double kernel_arithmetic(const UOpPtr& kernel) {
  const std::vector<UOpPtr> nodes = toposort(kernel);
  const std::unordered_set<const UOp*> addressing = index_math(nodes);
  std::unordered_map<const UOp*, RangeSet> ranges;  // the ranges each node depends on
  std::unordered_set<const UOp*> data;              // nodes whose value depends on a load
  // The share of a data node's iterations at which it computes on loaded values: a
  // value read through a pad is computed over the padded extent, where only the
  // loads inside read anything; the rest is masked lanes, not a value computed again.
  std::unordered_map<const UOp*, double> useful;
  for (const UOpPtr& u : nodes) {
    RangeSet& mine = ranges[u.get()];
    double share = 0;
    for (const UOpPtr& s : u->src) {
      mine = merge(mine, ranges.at(s.get()));
      if (data.count(s.get()) && u->op != Op::INDEX) {
        data.insert(u.get());
        share = std::max(share, s->op == Op::REDUCE ? 1.0 : useful.at(s.get()));  // a sum holds everywhere
      }
    }
    if (u->op == Op::WHERE && data.count(u.get()) && !data.count(u->src[0].get()))
      share = 1;  // a pad's select: its value (the pad's 0 outside) holds everywhere
    if (u->op == Op::LOAD) {
      data.insert(u.get());
      const UOpPtr valid = valid_of(u->src[0]);
      share = valid ? share_valid(valid.get()) : 1.0;
    }
    useful[u.get()] = share;
    if (u->op == Op::RANGE) mine = merge(mine, {u.get()});
    if (u->op == Op::REDUCE || u->op == Op::END)  // it, and its users, run outside the loops it closes
      for (size_t i = 1; i < u->src.size(); ++i) std::erase(mine, u->src[i].get());
  }
  // The loops outside each range, as END and REDUCE list them (outermost first): a
  // value needing an inner loop runs inside the outer ones too. A range that several
  // ENDs list (the loops two stores share) is outside only what all of them put
  // outside it.
  std::unordered_map<const UOp*, RangeSet> outer;
  for (const UOpPtr& u : nodes) {
    if (u->op != Op::END && u->op != Op::REDUCE) continue;
    RangeSet before;
    for (size_t i = 1; i < u->src.size(); ++i) {
      if (u->src[i]->op != Op::RANGE) continue;
      const auto [at, first] = outer.try_emplace(u->src[i].get(), before);
      if (!first) {
        RangeSet common;
        std::set_intersection(at->second.begin(), at->second.end(), before.begin(), before.end(),
                              std::back_inserter(common));
        at->second = std::move(common);
      }
      before = merge(before, {u->src[i].get()});
    }
  }
  auto nested = [&](const RangeSet& needed) {
    RangeSet out = needed;
    for (const UOp* r : needed)
      if (auto o = outer.find(r); o != outer.end()) out = merge(out, o->second);
    return out;
  };
  // Consumers first: the reduces each node is inside the body of, and the loops
  // that run around it.
  std::unordered_map<const UOp*, std::vector<const UOp*>> above;  // REDUCEs whose value reads the node
  std::unordered_map<const UOp*, RangeSet> loops;
  double ops = 0;
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    const UOp* u = it->get();
    const RangeSet& open = ranges.at(u);
    RangeSet around = nested(open);
    for (const UOp* red : above[u]) {
      const bool inside = std::any_of(red->src.begin() + 1, red->src.end(), [&](const UOpPtr& r) {
        return std::binary_search(open.begin(), open.end(), r.get());
      });
      if (inside && red != u) around = merge(around, loops.at(red));
    }
    loops[u] = around;
    if (!addressing.count(u) && counts(u, data)) {
      RangeSet folds = around;  // a reduce folds once per iteration of its own ranges too
      if (u->op == Op::REDUCE)
        for (size_t i = 1; i < u->src.size(); ++i) folds = merge(folds, nested({u->src[i].get()}));
      ops += op_cost(*u) * trips(folds) * useful.at(u);
    }
    std::vector<const UOp*> mine = above[u];
    if (u->op == Op::REDUCE) mine.push_back(u);
    for (const UOpPtr& s : u->src) {
      std::vector<const UOp*>& theirs = above[s.get()];
      for (const UOp* red : mine)
        if (std::find(theirs.begin(), theirs.end(), red) == theirs.end()) theirs.push_back(red);
    }
  }
  return ops;
}

}  // namespace loom
