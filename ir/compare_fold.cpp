// Comparisons of integer expressions with constants. The sum is brought to
// the form  n = sign*g*S + k  (g the gcd of its coefficients, S's first
// coefficient positive) and the constant moves to the other side, rounded the
// way integer inequalities allow: g*S < t  <=>  S < ceil(t/g). Every rule asks
// exact_bounds first: only a sum that cannot wrap obeys these identities.
#include "ir/linear_form.hpp"
#include "ir/symbolic.hpp"

#include <algorithm>
#include <numeric>

namespace loom {

namespace {
int64_t const_of(const UOpPtr& c) { return wrap_int(c->dtype, static_cast<uint64_t>(c->const_int())); }
Wide floor_div(Wide a, Wide b) { return a / b - (a % b != 0 && a < 0); }  // b > 0
Wide ceil_div(Wide a, Wide b) { return -floor_div(-a, b); }               // b > 0

struct Scaled {  // n = sign * g * s + k, exactly
  LinearForm s;
  Wide g;
  int sign;
  int64_t k;
};

std::optional<Scaled> scaled_form(const UOpPtr& n) {
  const LinearForm f = linear_form(n);
  if (f.terms.empty() || !exact_bounds(f)) return std::nullopt;
  uint64_t g = 0;
  for (const auto& t : f.terms) g = std::gcd(g, static_cast<uint64_t>(t.coef < 0 ? -Wide{t.coef} : t.coef));
  const int sign = f.terms[0].coef < 0 ? -1 : 1;
  LinearForm s{f.dtype, {}, 0};
  for (const auto& t : f.terms)
    s.terms.push_back({t.base, static_cast<int64_t>(Wide{t.coef} / (Wide{g} * sign))});
  if (!exact_bounds(s)) return std::nullopt;
  return Scaled{s, Wide{g}, sign, f.constant};
}

UOpPtr cmp(Op op, const UOpPtr& a, const UOpPtr& b) { return UOp::make(op, DType::Bool, {a, b}); }
// `s < c` (const_right) or `c < s`; nullptr when c does not fit the dtype.
UOpPtr lt(const LinearForm& s, Wide c, bool const_right) {
  if (!fits(s.dtype, c)) return nullptr;
  const UOpPtr cn = const_int(s.dtype, static_cast<int64_t>(c));
  return const_right ? cmp(Op::CMPLT, build(s), cn) : cmp(Op::CMPLT, cn, build(s));
}

// n = g*B + R, where g divides every coefficient of B and R (the other terms and the
// constant) lies in [lo, hi]: n < c  <=>  B < ceil((c - R) / g), the same bound for every R
// when ceil((c - hi) / g) == ceil((c - lo) / g). A guard 64h + 16q + l < 256 with q < 4,
// l < 16 is h < 4, and so no longer depends on l: a vector of lanes l is valid or not as a
// whole.
std::optional<std::pair<LinearForm, Wide>> carried_bound(const UOpPtr& n, Wide c) {
  const LinearForm f = linear_form(n);
  if (f.terms.size() < 2 || !exact_bounds(f)) return std::nullopt;
  for (const auto& candidate : f.terms) {
    const Wide g = candidate.coef < 0 ? -Wide{candidate.coef} : Wide{candidate.coef};
    if (g < 2) continue;
    LinearForm big{f.dtype, {}, 0}, small{f.dtype, {}, f.constant};
    for (const auto& t : f.terms) (Wide{t.coef} % g == 0 ? big : small).terms.push_back(t);
    if (small.terms.empty()) continue;  // the gcd's rule (scaled_form) covers it
    const auto r = exact_bounds(small);
    if (!r) continue;
    const Wide bound = ceil_div(c - r->first, g);
    if (ceil_div(c - r->second, g) != bound) continue;
    for (auto& t : big.terms) t.coef = static_cast<int64_t>(Wide{t.coef} / g);
    if (exact_bounds(big)) return std::pair{big, bound};
  }
  return std::nullopt;
}

// n < c  <=>  B < bound
UOpPtr fold_carried_lt_const_right(const UOpPtr& n, int64_t c) {
  const auto f = carried_bound(n, Wide{c});
  return f ? lt(f->first, f->second, true) : nullptr;
}

// c < n  <=>  !(n < c + 1)  <=>  bound - 1 < B
UOpPtr fold_carried_lt_const_left(int64_t c, const UOpPtr& n) {
  const auto f = carried_bound(n, Wide{c} + 1);
  return f ? lt(f->first, f->second - 1, false) : nullptr;
}

// n < c  <=>  sign*g*S < c - k; where that changes nothing (`cmp`, the comparison itself),
// the carried bound.
UOpPtr fold_lt_const_right(const UOpPtr& cmp_node, const UOpPtr& n, int64_t c) {
  if (const auto f = scaled_form(n)) {
    const Wide t = Wide{c} - f->k;
    const UOpPtr folded =
        f->sign > 0 ? lt(f->s, ceil_div(t, f->g), true) : lt(f->s, floor_div(-t, f->g), false);
    if (folded && folded != cmp_node) return folded;
  }
  return fold_carried_lt_const_right(n, c);
}

// c < n  <=>  c - k < sign*g*S; else the carried bound, as above.
UOpPtr fold_lt_const_left(const UOpPtr& cmp_node, int64_t c, const UOpPtr& n) {
  if (const auto f = scaled_form(n)) {
    const Wide t = Wide{c} - f->k;
    const UOpPtr folded =
        f->sign > 0 ? lt(f->s, floor_div(t, f->g), false) : lt(f->s, ceil_div(-t, f->g), true);
    if (folded && folded != cmp_node) return folded;
  }
  return fold_carried_lt_const_left(c, n);
}

// n == c  <=>  S == (c - k) / (sign*g), never when g does not divide c - k.
UOpPtr fold_eq_const(Op op, const UOpPtr& n, int64_t c) {
  const auto f = scaled_form(n);
  if (!f) return nullptr;
  const Wide t = Wide{c} - f->k;
  if (t % f->g != 0) return const_int(DType::Bool, op == Op::CMPNE);
  const Wide v = t / (f->g * f->sign);
  if (!fits(f->s.dtype, v)) return nullptr;
  return cmp(op, build(f->s), const_int(f->s.dtype, static_cast<int64_t>(v)));
}

// Truncating x/d (d > 0) against c: x/d < c <=> x < c*d (c > 0), x < (c-1)*d + 1 (c <= 0).
Wide div_lt_bound(Wide c, Wide d) { return c > 0 ? c * d : (c - 1) * d + 1; }

UOpPtr fold_div_lt(const UOpPtr& x, const UOpPtr& d, int64_t c) {
  const int64_t dv = const_of(d);
  if (dv <= 0) return nullptr;
  const Wide b = div_lt_bound(c, dv);
  if (!fits(x->dtype, b)) return nullptr;
  return cmp(Op::CMPLT, x, const_int(x->dtype, static_cast<int64_t>(b)));
}

// c < x/d  <=>  !(x/d < c+1)  <=>  bound(c+1) - 1 < x
UOpPtr fold_lt_div(int64_t c, const UOpPtr& x, const UOpPtr& d) {
  const int64_t dv = const_of(d);
  if (dv <= 0) return nullptr;
  const Wide b = div_lt_bound(Wide{c} + 1, dv) - 1;
  if (!fits(x->dtype, b)) return nullptr;
  return cmp(Op::CMPLT, const_int(x->dtype, static_cast<int64_t>(b)), x);
}

// A conjunction of bounds on the same integer value that no value meets makes the whole
// AND false (a padded axis of size 0: r < 1 and 0 < r).
UOpPtr fold_empty_conjunction(const UOpPtr& and_node) {
  if (and_node->dtype != DType::Bool) return nullptr;
  for (const auto& b : conjunct_bounds(and_node))
    if (b.lo > b.hi) return const_int(DType::Bool, 0);
  return nullptr;
}

// !(x < c) <=> c-1 < x, !(c < x) <=> x < c+1
UOpPtr fold_not_lt(const UOpPtr& lt_node) {
  const UOpPtr &a = lt_node->src[0], &b = lt_node->src[1];
  if (!is_int_scalar(a->dtype)) return nullptr;
  if (b->op == Op::CONST && fits(a->dtype, Wide{const_of(b)} - 1))
    return cmp(Op::CMPLT, const_int(a->dtype, const_of(b) - 1), a);
  if (a->op == Op::CONST && fits(b->dtype, Wide{const_of(a)} + 1))
    return cmp(Op::CMPLT, b, const_int(b->dtype, const_of(a) + 1));
  return nullptr;
}
}  // namespace

const PatternMatcher& comparison_folding() {
  using P = UPat;
  static const PatternMatcher pm(
      "comparison_folding",
      {
          {(P::var("x") / P::cvar("d")) < P::cvar("c"),
           [](const Match& m) {
             return is_int_scalar(m["x"]->dtype) ? fold_div_lt(m["x"], m["d"], const_of(m["c"])) : nullptr;
           }},
          {P::cvar("c") < (P::var("x") / P::cvar("d")),
           [](const Match& m) {
             return is_int_scalar(m["x"]->dtype) ? fold_lt_div(const_of(m["c"]), m["x"], m["d"]) : nullptr;
           }},
          {P::var("x") < P::cvar("c"),
           [](const Match& m) {
             return is_int_scalar(m["x"]->dtype) ? fold_lt_const_right(m.root(), m["x"], const_of(m["c"]))
                                                 : nullptr;
           }},
          {P::cvar("c") < P::var("x"),
           [](const Match& m) {
             return is_int_scalar(m["x"]->dtype) ? fold_lt_const_left(m.root(), const_of(m["c"]), m["x"])
                                                 : nullptr;
           }},
          {P::op(Op::CMPEQ, {P::var("x"), P::cvar("c")}),
           [](const Match& m) {
             return is_int_scalar(m["x"]->dtype) ? fold_eq_const(Op::CMPEQ, m["x"], const_of(m["c"]))
                                                 : nullptr;
           }},
          {P::op(Op::CMPNE, {P::var("x"), P::cvar("c")}),
           [](const Match& m) {
             return is_int_scalar(m["x"]->dtype) ? fold_eq_const(Op::CMPNE, m["x"], const_of(m["c"]))
                                                 : nullptr;
           }},
          {P::op(Op::CMPNE, {P::ops({Op::CMPLT}, "lt"), P::cnst(1)}),
           [](const Match& m) { return fold_not_lt(m["lt"]); }},
          {P::op(Op::AND, {P::ops({Op::CMPLT, Op::AND}), P::ops({Op::CMPLT, Op::AND})}),
           [](const Match& m) { return fold_empty_conjunction(m.root()); }},
      });
  return pm;
}

std::vector<UOpPtr> conjuncts(const UOpPtr& guard) {
  std::vector<UOpPtr> out, stack{guard};
  while (!stack.empty()) {
    const UOpPtr u = stack.back();
    stack.pop_back();
    if (u->op == Op::AND && u->dtype.is_bool())
      stack.insert(stack.end(), u->src.begin(), u->src.end());
    else
      out.push_back(u);
  }
  return out;
}

std::vector<ConjunctBound> conjunct_bounds(const UOpPtr& guard) {
  std::vector<ConjunctBound> out;
  const auto narrow = [&](const UOpPtr& x, Wide lo, Wide hi) {
    auto it = std::find_if(out.begin(), out.end(), [&](const ConjunctBound& b) { return b.x == x; });
    if (it == out.end()) it = out.insert(out.end(), {x, x->vmin(), x->vmax()});
    it->lo = std::max(it->lo, lo), it->hi = std::min(it->hi, hi);
  };
  const Wide far = Wide{1} << 80;
  for (const UOpPtr& u : conjuncts(guard)) {
    if (u->op != Op::CMPLT || !is_int_scalar(u->src[0]->dtype)) continue;
    const UOpPtr &a = u->src[0], &b = u->src[1];
    if (b->op == Op::CONST && a->op != Op::CONST) narrow(a, -far, Wide{const_of(b)} - 1);
    if (a->op == Op::CONST && b->op != Op::CONST) narrow(b, Wide{const_of(a)} + 1, far);
  }
  return out;
}

size_t divmod_count(const UOpPtr& u) {
  size_t n = 0;
  for (const auto& x : toposort(u)) n += x->op == Op::IDIV || x->op == Op::MOD;
  return n;
}

}  // namespace loom
