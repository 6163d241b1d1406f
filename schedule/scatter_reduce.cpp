#include "schedule/scatter_reduce.hpp"

#include "ir/int_arith.hpp"
#include "ir/range_split.hpp"
#include "ir/symbolic.hpp"

namespace loom {

namespace {

using P = UPat;

// The row `cond` selects as an i64 expression free of r: the e of e == r.
UOpPtr selected_row(const UOpPtr& cond, const UOpPtr& r) {
  if (cond->op != Op::CMPEQ) return nullptr;
  for (int k = 0; k < 2; ++k) {
    const UOpPtr &e = cond->src[k], &rr = cond->src[1 - k];
    if (is_range_ref(rr, r) && is_int_scalar(e->dtype) && !depends_on(e, r)) return cast(e, DType::Int64);
  }
  return nullptr;
}

bool loads_from(const UOpPtr& root, const UOpPtr& buffer) {
  for (const auto& n : toposort(root))
    if (n->op == Op::LOAD && n->src[0]->src[0] == buffer) return true;
  return false;
}

// END(STORE(INDEX(out, lin), 0), fresh copies of the END's ranges): every element of out zeroed.
UOpPtr zero_fill(const UOpPtr& root, const UOpPtr& end) {
  const UOpPtr& index = end->src[0]->src[0];
  int64_t next = next_axis_id(root);
  std::vector<std::pair<UOpPtr, UOpPtr>> fresh;
  std::vector<UOpPtr> src{nullptr};
  for (size_t k = 1; k < end->src.size(); ++k) {
    const UOpPtr& q = end->src[k];
    fresh.emplace_back(q, UOp::make(Op::RANGE, q->dtype, q->src, AxisArg{next++, AxisKind::Loop}));
    src.push_back(fresh.back().second);
  }
  const UOpPtr zero = const_like(end->src[0]->dtype, 0);
  src[0] = UOp::make(Op::STORE, zero->dtype, {substitute(index, fresh), zero});
  return UOp::make(Op::END, zero->dtype, std::move(src));
}

// The kernel's one store of a sum selecting row r of out by `cmp` (row == r):
// a zero fill, then the selected terms added into their rows in the order of i.
UOpPtr scatter(const Match& m) {
  const UOpPtr &end = m["end"], &index = m["index"], &out = m["out"], &i = m["i"], &v = m["v"];
  if (m["red"]->get<ReduceArg>().op != Op::ADD || loads_from(m.root(), out)) return nullptr;
  const UOpPtr i_loop = UOp::make(Op::RANGE, i->dtype, i->src, AxisArg{i->get<AxisArg>().id, AxisKind::Loop});
  for (size_t k = 1; k < end->src.size(); ++k) {
    const UOpPtr& r = end->src[k];
    const UOpPtr row = selected_row(m["cmp"], r);
    if (!row || depends_on(v, r) || !r->src[0]->is_const()) continue;
    const UOpPtr fill = zero_fill(m.root(), end);
    const UOpPtr at = substitute(row, {{i, i_loop}});
    const UOpPtr inside = land(const_i64(-1) < at, at < r->src[0]);
    const UOpPtr target = UOp::make(Op::AFTER, out->dtype, {out, fill});
    const UOpPtr idx = UOp::make(Op::INDEX, index->dtype, {target, substitute(m["lin"], {{r, at}}), inside});
    const UOpPtr added = UOp::make(Op::LOAD, v->dtype, {idx}) + substitute(v, {{i, i_loop}});
    std::vector<UOpPtr> loops = end->src;
    loops[0] = UOp::make(Op::STORE, added->dtype, {idx, added});
    loops[k] = i_loop;
    return UOp::make(Op::SINK, DType::Bool, {UOp::make(Op::END, added->dtype, std::move(loops))});
  }
  return nullptr;
}

// SINK(END(STORE(INDEX(out, lin), REDUCE(body, i)), loops...)): a kernel storing one sum over one range.
P kernel_storing_sum(P body) {
  const P index = P::op(Op::INDEX, {P::ops({Op::DEFINE_GLOBAL}, "out"), P::var("lin")}, "index");
  const P sum = P::op(Op::REDUCE, {std::move(body), P::ops({Op::RANGE}, "i")}, "red");
  return P::op(Op::SINK, {P::op(Op::END, {P::op(Op::STORE, {index, sum})}, "end").allow_more_src()});
}

std::vector<Rule> scatter_rules() {
  const P cmp = P::ops({Op::CMPEQ}, "cmp"), v = P::var("v");
  return {
      {kernel_storing_sum(P::op(Op::WHERE, {cmp, v, P::cnst(0)})), scatter},
      {kernel_storing_sum(v * P::op(Op::CAST, {cmp})), scatter},  // inf * 0 not kept (docs/semantics.md)
  };
}

}  // namespace

const PatternMatcher& scatter_reduce() {
  static const PatternMatcher pm("scatter_reduce", scatter_rules());
  return pm;
}

}  // namespace loom
