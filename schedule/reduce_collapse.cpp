#include "schedule/reduce_collapse.hpp"

#include "ir/int_arith.hpp"
#include "ir/range_split.hpp"
#include "ir/symbolic.hpp"
#include "schedule/reduce_unparented.hpp"

#include <optional>
#include <unordered_set>

namespace loom {

namespace {

using P = UPat;

bool in_reduce_body(const UOpPtr& u) { return u->ranges().has_kind(AxisKind::Reduce); }
bool is_add_reduce(const UOpPtr& red) { return red->get<ReduceArg>().op == Op::ADD; }
UOpPtr to_i64(const UOpPtr& u) { return cast(u, DType::Int64); }
UOpPtr imin(const UOpPtr& a, const UOpPtr& b) { return where(a < b, a, b); }
UOpPtr imax(const UOpPtr& a, const UOpPtr& b) { return umax(a, b); }
UOpPtr sum_over(const UOpPtr& body, const UOpPtr& r) {
  return UOp::make(Op::REDUCE, body->dtype, {body, r}, ReduceArg{Op::ADD, {}});
}
UOpPtr range_size(const UOpPtr& r) { return r->src[0]; }

// Where a condition holds, as an interval [lo, hi) of r (null: unbounded).
struct Interval {
  UOpPtr lo, hi;
};

std::optional<Interval> interval_of(const UOpPtr& c, const UOpPtr& r) {
  auto free = [&](const UOpPtr& u) {
    return !depends_on(u, r) && (is_int_scalar(u->dtype) || u->dtype.is_bool());
  };
  if (c->op == Op::CMPLT) {
    const UOpPtr &a = c->src[0], &b = c->src[1];
    if (is_range_ref(a, r) && free(b)) return Interval{nullptr, to_i64(b)};
    if (is_range_ref(b, r) && free(a)) return Interval{to_i64(a) + 1, nullptr};
  }
  if (c->op == Op::CMPEQ)
    for (int k = 0; k < 2; ++k)
      if (is_range_ref(c->src[k], r) && free(c->src[1 - k]))
        return Interval{to_i64(c->src[1 - k]), to_i64(c->src[1 - k]) + 1};
  if (c->op == Op::CMPNE && c->src[1]->is_const() && c->src[1]->dtype.is_bool() && c->src[1]->const_int()) {
    const auto inner = interval_of(c->src[0], r);  // NOT: the complement of a half-line
    if (inner && !inner->lo) return Interval{inner->hi, nullptr};
    if (inner && !inner->hi) return Interval{nullptr, inner->lo};
  }
  if (c->op == Op::AND) {
    const auto a = interval_of(c->src[0], r), b = interval_of(c->src[1], r);
    if (!a || !b) return std::nullopt;
    auto pick = [](const UOpPtr& x, const UOpPtr& y, bool lower) -> UOpPtr {
      if (!x || !y) return x ? x : y;
      return lower ? imax(x, y) : imin(x, y);
    };
    return Interval{pick(a->lo, b->lo, true), pick(a->hi, b->hi, false)};
  }
  return std::nullopt;
}

// How many r in [0, n) lie in `iv`.
UOpPtr count_in(const Interval& iv, const UOpPtr& n) {
  const UOpPtr hi = iv.hi ? imin(iv.hi, n) : n, lo = iv.lo ? imax(iv.lo, const_i64(0)) : const_i64(0);
  return imax(imin(hi - lo, n), const_i64(0));
}

// sum over r of (cond ? val : 0), or of (cond ? 0 : val), val free of r.
UOpPtr bounded_sum(const Match& m, bool holds) {
  const UOpPtr &red = m.root(), &r = m["r"], &val = m["val"];
  if (!is_add_reduce(red) || depends_on(val, r)) return nullptr;
  const auto iv = interval_of(m["c"], r);
  if (!iv) return nullptr;
  const UOpPtr n = to_i64(range_size(r)), count = count_in(*iv, n);
  return cast(holds ? count : n - count, val->dtype) * val;
}

// sum over r of (idx == r ? expr : 0) = expr at r := idx, where idx is in [0, n).
// (The comparison's operands may come in either order.)
UOpPtr gathered(const Match& m) {
  const UOpPtr &red = m.root(), &r = m["r"], &cmp = m["cmp"];
  if (!is_add_reduce(red)) return nullptr;
  for (int k = 0; k < 2; ++k) {
    const UOpPtr &idx = cmp->src[k], &rr = cmp->src[1 - k];
    if (depends_on(idx, r) || !is_int_scalar(idx->dtype) || !is_range_ref(rr, r) || idx->dtype != rr->dtype)
      continue;
    const UOpPtr at = to_i64(idx);
    const UOpPtr inside = land(const_i64(-1) < at, at < to_i64(range_size(r)));
    return where(inside, substitute_ranges(m["expr"], {{r, at}}, inside), const_like(red->dtype, 0));
  }
  return nullptr;
}

UOpPtr split_sum(const Match& m) {
  if (!is_add_reduce(m.root())) return nullptr;
  return sum_over(m["x"], m["r"]) + sum_over(m["y"], m["r"]);
}

UOpPtr factor_out(const Match& m) {
  if (!is_add_reduce(m.root())) return nullptr;
  const UOpPtr &x = m["x"], &y = m["y"], &r = m["r"];
  if (!depends_on(y, r)) return sum_over(x, r) * y;
  if (!depends_on(x, r)) return sum_over(y, r) * x;
  return nullptr;
}

// sum(c ? x : 0) = c ? sum(x) : 0 when c does not depend on r.
UOpPtr gate_out(const Match& m, bool holds) {
  const UOpPtr &c = m["c"], &r = m["r"];
  if (!is_add_reduce(m.root()) || depends_on(c, r)) return nullptr;
  const UOpPtr s = sum_over(m["x"], r), zero = const_like(s->dtype, 0);
  return holds ? where(c, s, zero) : where(c, zero, s);
}

// (a & b) ? x : 0 with a free of reduce ranges and b not: a ? (b ? x : 0) : 0.
UOpPtr split_condition(const Match& m) {
  const UOpPtr &a = m["a"], &b = m["b"], &x = m["x"];
  if (in_reduce_body(a) || !in_reduce_body(b)) return nullptr;
  const UOpPtr zero = const_like(x->dtype, 0);
  return where(a, where(b, x, zero), zero);
}

// Of x + y, the term that depends on a reduce range and the one that does not.
std::optional<std::pair<UOpPtr, UOpPtr>> split_terms(const Match& m) {
  const UOpPtr &a = m["x"], &b = m["y"];
  if (in_reduce_body(a) && !in_reduce_body(b)) return std::pair{a, b};
  if (in_reduce_body(b) && !in_reduce_body(a)) return std::pair{b, a};
  return std::nullopt;
}

// x + y < c -> x < c - y, where x depends on a reduce range and y, c do not;
// only when neither side wraps (order is not preserved modulo 2^bits).
UOpPtr lift_less(const Match& m) {
  const auto terms = split_terms(m);
  const UOpPtr& c = m["c"];
  if (!terms || !is_int_scalar(c->dtype) || in_reduce_body(c)) return nullptr;
  const auto& [x, y] = *terms;
  const DType dt = x->dtype;
  if (!fits(dt, Wide{x->vmin()} + y->vmin()) || !fits(dt, Wide{x->vmax()} + y->vmax()) ||
      !fits(dt, Wide{c->vmin()} - y->vmax()) || !fits(dt, Wide{c->vmax()} - y->vmin()))
    return nullptr;
  return x < (c - y);
}

// x + y == c -> x == c - y (and !=): exact in wrapping arithmetic, a bijection.
UOpPtr lift_equal(const Match& m) {
  const auto terms = split_terms(m);
  const UOpPtr& c = m["c"];
  if (!terms || !is_int_scalar(c->dtype) || in_reduce_body(c)) return nullptr;
  return UOp::make(m.root()->op, DType::Bool, {terms->first, c - terms->second});
}

// x * cast(b) -> b ? x : 0 inside a reduce's body, where b is Bool seen
// through any chain of casts (each keeps 0 and 1 what they are): the form the
// bound and gather rules read. It differs from the product where x is inf or NaN.
UOpPtr mul_cast_bool(const Match& m) {
  const UOpPtr& x = m["x"];
  const UOp* b = m["cb"].get();
  while (b->op == Op::CAST) b = b->src[0].get();
  if (!b->dtype.is_bool() || b->dtype.lanes != 1 || !in_reduce_body(m.root())) return nullptr;
  return where(b->ptr(), x, const_like(x->dtype, 0));
}

P sum1(P body) { return P::op(Op::REDUCE, {std::move(body), P::ops({Op::RANGE}, "r")}); }

std::vector<Rule> closed_form_rules() {
  const P x = P::var("x"), y = P::var("y"), c = P::var("c"), val = P::var("val"), zero = P::cnst(0);
  return {
      {sum1(P::op(Op::WHERE, {c, val, zero})), [](const Match& m) { return bounded_sum(m, true); }},
      {sum1(P::op(Op::WHERE, {c, zero, val})), [](const Match& m) { return bounded_sum(m, false); }},
      {sum1(P::op(Op::WHERE, {c, x, zero})), [](const Match& m) { return gate_out(m, true); }},
      {sum1(P::op(Op::WHERE, {c, zero, x})), [](const Match& m) { return gate_out(m, false); }},
      {sum1(x + y), split_sum},
      {sum1(x * y), factor_out},
      {P::op(Op::WHERE, {P::op(Op::AND, {P::var("a"), P::var("b")}), x, zero}), split_condition},
      {(x + y) < c, lift_less},
      {P::op(Op::CMPEQ, {x + y, c}), lift_equal},
      {P::op(Op::CMPNE, {x + y, c}), lift_equal},
  };
}

std::vector<Rule> gather_rules() {
  const P expr = P::var("expr"), zero = P::cnst(0);
  return {
      {sum1(P::op(Op::WHERE, {P::ops({Op::CMPEQ}, "cmp"), expr, zero})), gathered},
      {sum1(P::op(Op::WHERE, {P::ops({Op::CMPNE}, "cmp"), zero, expr})), gathered},
      {P::var("x") * P::op(Op::CAST, {P()}, "cb"), mul_cast_bool},
  };
}

const PatternMatcher& reduce_attempt_rules() {
  // The index simplifier only: a float value is rewritten where the kernel checker sees it.
  static const PatternMatcher pm = symbolic_index() + reduce_unparented() + reduce_closed_forms() +
                                   PatternMatcher("reduce_gather", gather_rules());
  return pm;
}

// Each range of a REDUCE[ADD] whose sum can be written without it is summed away.
UOpPtr collapse_reduce(const Match& m) {
  const UOpPtr& red = m.root();
  if (!is_add_reduce(red)) return nullptr;
  UOpPtr body = red->src[0];
  std::vector<UOpPtr> left{nullptr};
  for (size_t i = 1; i < red->src.size(); ++i) {
    const UOpPtr& r = red->src[i];
    // Within this kernel: the buffers it reads hold other kernels' values.
    const UOpPtr attempt = graph_rewrite_within(sum_over(body, r), reduce_attempt_rules(), Op::BUFFERIZE);
    if (mentions_range(attempt, r))
      left.push_back(r);
    else
      body = attempt;
  }
  if (left.size() == red->src.size()) return nullptr;
  if (left.size() == 1) return body;
  left[0] = body;
  return red->with_src(std::move(left));
}

}  // namespace

bool mentions_range(const UOpPtr& u, const UOpPtr& r) {
  std::unordered_set<const UOp*> seen;
  std::vector<const UOp*> stack{u.get()};
  while (!stack.empty()) {
    const UOp* n = stack.back();
    stack.pop_back();
    if (n == r.get()) return true;
    if (!seen.insert(n).second || n->op == Op::BUFFERIZE) continue;
    for (const auto& s : n->src) stack.push_back(s.get());
  }
  return false;
}

const PatternMatcher& reduce_closed_forms() {
  static const PatternMatcher pm("reduce_closed_forms", closed_form_rules());
  return pm;
}

const PatternMatcher& reduce_collapse() {
  static const PatternMatcher pm("reduce_collapse", {{UPat::ops({Op::REDUCE}), collapse_reduce}});
  return pm;
}

}  // namespace loom
