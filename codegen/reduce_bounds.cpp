// reduce_bounds (kernel pass, after gated_select): a sum whose every term is zero outside
// a bound on its own loop variable runs over the bound only. A term is zero where a
// select of it against the sum's identity fails (WHERE(c, x, 0) in an ADD, WHERE(c, x,
// -inf) in a MAX) or where a guarded load reads 0, in any factor of a product. A compare
// of the loop variable with an expression of the outer loops bounds it; over the tile's
// lanes the loop runs from the least start to the greatest stop, and the selects stay in
// the body for the lanes that stop sooner.
//
//   Before:  REDUCE(WHERE(j <= 6*r + u, p[r, u, j], 0.0) * v[j, d], j)      j in [0, 1024)
//   After:   REDUCE(WHERE(j' <= 6*r + u, p[r, u, j'], 0.0) * v[j', d], j')  j' in [0, min(1024, 6*r + 6))
//
// Causal attention's products read their weights so (schedule/masked_reads.hpp): each
// tile of query rows sums over the keys up to its last row, and skips the rest. A term
// skipped is counted as zero even where its other factor is inf or NaN (docs/semantics.md,
// "Masked terms of a sum").
#include "codegen/codegen.hpp"
#include "ir/int_arith.hpp"
#include "ir/linear_form.hpp"
#include "ir/pattern.hpp"
#include "ir/range_split.hpp"
#include "ir/symbolic.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <unordered_set>
#include <vector>

namespace loom {

namespace {

// A loop of fewer iterations, its count a constant, LLVM unrolls whole; bounded, it would
// stay a loop (a depthwise conv's 3 x 3 window under its padding's guards ran 1.6 times
// as long: docs/performance.md, "Causal blocks skipped").
constexpr int64_t kMinBoundedTrips = 16;

bool worth_bounding(const UOpPtr& r) {
  return !r->src[0]->is_const() || r->src[0]->const_int() >= kMinBoundedTrips;
}

struct BoundContext {
  UOpPtr kernel;                  // as it came in: which sums something else reads too
  int64_t next_axis;              // the id of the next loop made
  std::vector<UOpPtr> made = {};  // the loops made: each is bounded once

  UOpPtr loop(const UOpPtr& extent) {
    made.push_back(make_range(extent, next_axis++, AxisKind::Reduce));
    return made.back();
  }
  bool bounded(const UOpPtr& r) const { return std::find(made.begin(), made.end(), r) != made.end(); }
};

bool lane_range(const UOpPtr& u) {
  if (u->op != Op::RANGE) return false;
  const AxisKind kind = u->get<AxisArg>().kind;
  return kind == AxisKind::Upcast || kind == AxisKind::Unroll;
}

bool has_lane_range(const UOpPtr& e) {
  for (const UOpPtr& u : toposort(e))
    if (lane_range(u)) return true;
  return false;
}

// The greatest (most = true) or least value of integer `e` over the tile's lanes (its
// upcast and unroll ranges), as an expression of the other loops; null where `e` is not
// made of sums, constant multiples, integer casts and selects.
UOpPtr over_lanes(const UOpPtr& e, bool most) {
  if (!e->dtype.is_int() || e->dtype.lanes != 1) return nullptr;
  if (e->is_const()) return e;
  if (lane_range(e)) return const_like(e->dtype, static_cast<double>(most ? e->vmax() : e->vmin()));
  // An outer loop or a variable is what the bound is made of; another sum's loop (a conv's
  // other kernel axis) is not there when this loop starts.
  if (e->op == Op::RANGE) return e->get<AxisArg>().kind == AxisKind::Reduce ? nullptr : e;
  if (e->op == Op::DEFINE_VAR) return e;
  if (e->op == Op::ADD) {
    UOpPtr a = over_lanes(e->src[0], most), b = over_lanes(e->src[1], most);
    return a && b ? a + b : nullptr;
  }
  if (e->op == Op::MUL && e->src[1]->is_const()) {
    const bool up = e->src[1]->const_value() >= 0 ? most : !most;
    UOpPtr a = over_lanes(e->src[0], up);
    return a ? a * e->src[1] : nullptr;
  }
  if (e->op == Op::CAST && e->src[0]->dtype.is_int() && e->src[0]->vmin() >= e->vmin() &&
      e->src[0]->vmax() <= e->vmax()) {
    UOpPtr a = over_lanes(e->src[0], most);
    return a ? cast(a, e->dtype) : nullptr;
  }
  if (e->op == Op::WHERE) {
    const UOpPtr &c = e->src[0], &x = e->src[1], &y = e->src[2];
    UOpPtr a = over_lanes(x, most), b = over_lanes(y, most);
    if (!a || !b) return nullptr;
    if (!has_lane_range(c)) return where(c, a, b);  // one choice for the whole tile
    // x < n ? x : n - 1, a tile's last rows clamped to the last row: min(x, n - 1).
    if (c->op == Op::CMPLT && c->src[0] == x && c->src[1]->is_const() && y->is_const() &&
        y->const_value() == c->src[1]->const_value() - 1)
      return min_by_bounds(a, y);
  }
  return nullptr;
}

// What one term of a condition says of `r`: r < stop or start <= r (as Int64, or null).
struct Bound {
  UOpPtr start, stop;
};

UOpPtr as_index(const UOpPtr& e, const UOpPtr& r) {
  if (depends_on(e, r) || !e->dtype.is_int() || e->dtype.lanes != 1) return nullptr;
  return e->dtype == r->dtype ? e : cast(e, r->dtype);
}

// `a` as s*r + rest (s > 0, rest free of r), looking through a cast that keeps every value.
struct Stride {
  int64_t s;
  UOpPtr rest;  // as r's dtype
};
std::optional<Stride> stride_of(const UOpPtr& a, const UOpPtr& r) {
  UOpPtr e = a;
  if (e->op == Op::CAST && is_int_scalar(e->dtype) && is_int_scalar(e->src[0]->dtype) &&
      fits(e->dtype, Wide{e->src[0]->vmin()}) && fits(e->dtype, Wide{e->src[0]->vmax()}))
    e = e->src[0];
  if (e == r) return Stride{1, const_like(r->dtype, 0)};
  if (!is_int_scalar(e->dtype) || !is_linear(e)) return std::nullopt;
  const LinearForm f = linear_form(e);
  if (!exact_bounds(f)) return std::nullopt;  // it may wrap
  LinearForm rest{f.dtype, {}, f.constant};
  int64_t stride = 0;
  for (const Term& t : f.terms) {
    if (t.base == r) {
      stride = t.coef;
    } else {
      if (depends_on(t.base, r)) return std::nullopt;
      rest.terms.push_back(t);
    }
  }
  if (stride <= 0) return std::nullopt;
  return Stride{stride, cast(build(rest), r->dtype)};
}

UOpPtr plus(const UOpPtr& x, int64_t offset) {
  return !x || offset == 0 ? x : x + const_like(x->dtype, static_cast<double>(offset));
}

// What `a + offset <= x` (`below`) or `x + offset <= a` says of r over the tile's lanes, a
// the side that reads r (s*r + rest) and x free of it: r < (max x - offset - min rest) / s
// + 1, or r >= the ceiling of (min x + offset - max rest) / s. Rounding only widens it.
void bound_side(const UOpPtr& a, const UOpPtr& x_in, int64_t offset, bool below, const UOpPtr& r, Bound& b) {
  const std::optional<Stride> st = stride_of(a, r);
  const UOpPtr x = st ? plus(as_index(x_in, r), below ? -offset : offset) : nullptr;
  const UOpPtr side = x ? over_lanes(x, below) : nullptr,
               rest = side ? over_lanes(st->rest, !below) : nullptr;
  if (!rest) return;
  const UOpPtr zero = const_like(r->dtype, 0), s = const_like(r->dtype, static_cast<double>(st->s));
  if (below) {  // the stop
    const UOpPtr stop = st->s == 1 ? side - rest + const_like(r->dtype, 1) : (side - rest + s) / s;
    b.stop = min_by_bounds(b.stop, stop);
  } else {  // the start
    const UOpPtr start =
        st->s == 1
            ? side - rest
            : max_by_bounds(side - rest + const_like(r->dtype, static_cast<double>(st->s - 1)), zero) / s;
    b.start = max_by_bounds(b.start, start);
  }
}

// A condition read as a compare: lhs < rhs, or lhs <= rhs (written lhs < rhs OR lhs == rhs,
// the equality either way round, as a `<=` of tensors lowers).
struct Compare {
  UOpPtr lhs, rhs;
  bool or_equal;
};
std::optional<Compare> as_compare(const UOpPtr& c) {
  if (c->op == Op::CMPLT) return Compare{c->src[0], c->src[1], false};
  if (c->op != Op::OR || c->src.size() != 2 || c->src[0]->op != Op::CMPLT || c->src[1]->op != Op::CMPEQ)
    return std::nullopt;
  const UOpPtr &lt = c->src[0], &eq = c->src[1];
  const bool same = (eq->src[0] == lt->src[0] && eq->src[1] == lt->src[1]) ||
                    (eq->src[0] == lt->src[1] && eq->src[1] == lt->src[0]);
  return same ? std::optional<Compare>{Compare{lt->src[0], lt->src[1], true}} : std::nullopt;
}

void bound_of_term(const UOpPtr& c, const UOpPtr& r, Bound& b) {
  if (c->op == Op::AND && c->dtype.scalar == Scalar::Bool) {
    for (const UOpPtr& s : c->src) bound_of_term(s, r, b);
    return;
  }
  const std::optional<Compare> cmp = as_compare(c);
  if (!cmp) return;
  // a < x is a + 1 <= x; x < a is x + 1 <= a.
  const int64_t offset = cmp->or_equal ? 0 : 1;
  if (depends_on(cmp->lhs, r) && !depends_on(cmp->rhs, r)) bound_side(cmp->lhs, cmp->rhs, offset, true, r, b);
  if (depends_on(cmp->rhs, r) && !depends_on(cmp->lhs, r))
    bound_side(cmp->rhs, cmp->lhs, offset, false, r, b);
}

bool is_identity(const UOpPtr& k, Op reduce_op) {
  if (!k->is_const() || !k->dtype.is_float()) return false;
  const double v = k->const_value();
  if (reduce_op == Op::ADD) return v == 0;
  return reduce_op == Op::MAX && v == -std::numeric_limits<double>::infinity();
}

// The conditions outside which `v`, a term of a sum of `reduce_op`, is its identity.
void vanishing(const UOpPtr& v, Op reduce_op, std::vector<UOpPtr>& out) {
  if (v->op == Op::WHERE && is_identity(v->src[2], reduce_op)) {
    out.push_back(v->src[0]);
    vanishing(v->src[1], reduce_op, out);
  } else if (reduce_op == Op::ADD && v->op == Op::MUL) {
    for (const UOpPtr& s : v->src) vanishing(s, Op::ADD, out);
  } else if (reduce_op == Op::ADD && v->op == Op::LOAD && v->src[0]->op == Op::INDEX &&
             v->src[0]->src.size() == 3 && v->dtype.is_float()) {
    out.push_back(v->src[0]->src[2]);  // a guarded load reads 0
  } else if (v->op == Op::CAST && v->dtype.is_float() && v->src[0]->dtype.is_float()) {
    vanishing(v->src[0], reduce_op, out);
  }
}

UOpPtr bound_reduce(const Match& m) {
  const UOpPtr& reduce = m.root();
  const Op reduce_op = reduce->get<ReduceArg>().op;
  if (reduce_op != Op::ADD && reduce_op != Op::MAX) return nullptr;
  std::vector<UOpPtr> conditions;
  vanishing(reduce->src[0], reduce_op, conditions);
  if (conditions.empty()) return nullptr;
  BoundContext& ctx = m.ctx<BoundContext>();
  std::vector<UOpPtr> src = reduce->src;
  std::vector<std::pair<UOpPtr, UOpPtr>> narrowed;
  for (size_t k = 1; k < src.size(); ++k) {
    const UOpPtr& r = src[k];
    if (r->op != Op::RANGE || r->get<AxisArg>().kind != AxisKind::Reduce || ctx.bounded(r) ||
        !worth_bounding(r))
      continue;
    Bound b;
    for (const UOpPtr& c : conditions)
      if (c->dtype.lanes == 1) bound_of_term(c, r, b);
    if (!b.start && !b.stop) continue;
    const UOpPtr zero = const_like(r->dtype, 0);
    const UOpPtr start = simplify(max_by_bounds(b.start, zero));
    const UOpPtr stop = simplify(min_by_bounds(b.stop, r->src[0]));
    const UOpPtr extent = simplify(max_by_bounds(simplify(stop - start), zero));
    if (extent == r->src[0] && start == zero) continue;
    const UOpPtr loop = ctx.loop(extent);
    narrowed.emplace_back(r, loop + start);
    src[k] = loop;
  }
  if (narrowed.empty()) return nullptr;
  src[0] = substitute(reduce->src[0], narrowed);
  return reduce->with_src(std::move(src));
}

// A condition that holds in some lane of the tile wherever `c` holds in one: a compare's
// least left side against its greatest right side. Null where `c` is not such a compare
// (or an AND of them).
UOpPtr in_some_lane(const UOpPtr& c) {
  if (c->dtype.lanes != 1) return nullptr;
  if (!has_lane_range(c)) return c;
  if (c->op == Op::AND && c->dtype.scalar == Scalar::Bool) {
    UOpPtr all;
    for (const UOpPtr& t : c->src)
      if (const UOpPtr some = in_some_lane(t)) all = all ? land(all, some) : some;
    return all;
  }
  const std::optional<Compare> cmp = as_compare(c);
  if (!cmp) return nullptr;
  const UOpPtr &a = cmp->lhs, &b = cmp->rhs;
  const bool or_equal = cmp->or_equal;
  const UOpPtr least = over_lanes(a, false), most = over_lanes(b, true);
  if (!least || !most) return nullptr;
  const UOpPtr lt = least < most;
  return or_equal ? alu(Op::OR, {lt, eq(least, most)}) : lt;
}

// Every node under `root` reachable without entering `skip`.
std::unordered_set<const UOp*> reached_without(const UOpPtr& root, const UOpPtr& skip) {
  std::unordered_set<const UOp*> seen;
  std::vector<const UOp*> stack{root.get()};
  while (!stack.empty()) {
    const UOp* n = stack.back();
    stack.pop_back();
    if (n == skip.get() || !seen.insert(n).second) continue;
    for (const UOpPtr& s : n->src) stack.push_back(s.get());
  }
  return seen;
}

// Does `c` read only loops `reduce` reads already? A sum of fewer loops (a row's sum under
// a tile of its columns) is computed once outside the others; bounded by them it would not be.
bool within(const UOpPtr& c, const UOpPtr& reduce) {
  for (const UOpPtr& u : toposort(c))
    if (u->op == Op::RANGE && !depends_on(reduce, u)) return false;
  return true;
}

// WHERE(c, f(REDUCE(x, k)), y): the sum only matters where c holds. In a tile where c
// fails in every lane its loop runs no iteration (a causal score's block above the diagonal).
// Not a sum that c or y reads too (a blocked product's epilogue, WHERE(not last block, s,
// s + bias)): bounded in one branch, it would be summed twice, once per branch.
//
//   Before:  WHERE(j <= i, REDUCE(q[i, d] * k[j, d], d) * s, -inf)       d in [0, 64)
//   After:   WHERE(j <= i, REDUCE(q[i, d'] * k[j, d'], d') * s, -inf)    d' in [0, j0 <= i1 ? 64 : 0)
UOpPtr skip_unselected(const Match& m) {
  const UOpPtr &select = m.root(), &c = select->src[0], &x = select->src[1];
  BoundContext& ctx = m.ctx<BoundContext>();
  const UOpPtr some = in_some_lane(c);
  if (!some || some->is_const()) return nullptr;
  std::vector<UOpPtr> sums;
  for (const UOpPtr& u : toposort(x))
    if (u->op == Op::REDUCE && within(some, u)) sums.push_back(u);
  if (sums.empty()) return nullptr;  // before the walk of the whole kernel below
  const std::unordered_set<const UOp*> outside = reached_without(ctx.kernel, x),
                                       condition = reached_without(c, nullptr),
                                       otherwise = reached_without(select->src[2], nullptr);
  std::vector<std::pair<UOpPtr, UOpPtr>> narrowed;
  for (const UOpPtr& u : sums) {
    if (outside.contains(u.get()) || condition.contains(u.get()) || otherwise.contains(u.get())) continue;
    for (size_t k = 1; k < u->src.size(); ++k) {
      const UOpPtr& r = u->src[k];
      if (r->op != Op::RANGE || r->get<AxisArg>().kind != AxisKind::Reduce) continue;
      if (ctx.bounded(r) || !worth_bounding(r)) break;
      // Simplified as every later pass simplifies it: one loop is one RANGE node.
      const UOpPtr extent = simplify(where(some, r->src[0], const_like(r->dtype, 0)));
      if (extent == r->src[0]) break;
      std::vector<UOpPtr> src = u->src;
      const UOpPtr loop = ctx.loop(extent);
      src[k] = loop;
      src[0] = substitute(u->src[0], {{r, loop}});
      narrowed.emplace_back(u, u->with_src(std::move(src)));
      break;
    }
  }
  if (narrowed.empty()) return nullptr;
  return select->with_src({c, substitute(x, narrowed), select->src[2]});
}

const PatternMatcher& reduce_bound_rules() {
  static const PatternMatcher pm("reduce_bounds", {{UPat::ops({Op::REDUCE}).allow_more_src(), bound_reduce},
                                                   {UPat::ops({Op::WHERE}), skip_unselected}});
  return pm;
}

}  // namespace

UOpPtr bound_reduces(const UOpPtr& kernel) {
  // Both rules bound a sum: an elementwise kernel (many selects, no sum) is left at once.
  const std::vector<UOpPtr> nodes = toposort(kernel);
  if (std::none_of(nodes.begin(), nodes.end(), [](const UOpPtr& u) { return u->op == Op::REDUCE; }))
    return kernel;
  BoundContext ctx{kernel, next_axis_id(kernel)};
  return graph_rewrite(kernel, reduce_bound_rules(), ctx);
}

}  // namespace loom
