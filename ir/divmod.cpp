// Division and modulo folding for truncating IDIV/MOD (LLVM's sdiv/srem).
//
// Floor-division identities such as (a*c + b)/c = a + b/c hold for truncation
// only where numerator and remainder share a sign, so every rule here either
// holds for all signs (stated beside it) or is applied to a numerator proven
// non-negative (fold_nonneg), or non-positive through n/c = -((-n)/c).
// Rules on a sum first ask exact_bounds: only when the exact value cannot wrap
// does the hardware's result equal the integer identity's.
#include "ir/linear_form.hpp"
#include "ir/symbolic.hpp"

#include <numeric>
#include <unordered_set>

namespace loom {

namespace {
int64_t floor_div(int64_t a, int64_t c) { return a / c - (a % c != 0 && a < 0); }  // c > 0
int64_t floor_mod(int64_t a, int64_t c) { return a % c < 0 ? a % c + c : a % c; }  // c > 0

UOpPtr cnst(DType dt, int64_t v) { return const_int(dt, wrap_int(dt, static_cast<uint64_t>(v))); }
UOpPtr divmod(Op op, const UOpPtr& x, int64_t c) { return UOp::make(op, x->dtype, {x, cnst(x->dtype, c)}); }
UOpPtr negated(const UOpPtr& x) { return UOp::make(Op::MUL, x->dtype, {x, cnst(x->dtype, -1)}); }

// Is z's value its linear form's exact value? Only then may a form that
// flattens z be reasoned about in integers (2^bits is no multiple of c).
bool exact_node(const UOpPtr& z) { return exact_bounds(linear_form(z)).has_value(); }

// x/c = -(x/-c) and x%c = x%-c for truncation (c != INT_MIN, whose negation wraps).
UOpPtr negative_divisor(Op op, const UOpPtr& x, int64_t c) {
  if (c == int_range(x->dtype).first) return nullptr;
  return op == Op::IDIV ? negated(divmod(op, x, -c)) : divmod(op, x, -c);
}

// Nested divisions, all signs (c > 0; a, m > 0): (z/a)/c = z/(a*c);
// (z%m)/c = (z/c)%(m/c) and (z%m)%c = z%c when c divides m.
UOpPtr fold_nested(Op op, const UOpPtr& x, int64_t c) {
  const DType dt = x->dtype;
  if ((x->op != Op::IDIV && x->op != Op::MOD) || x->src[1]->op != Op::CONST) return nullptr;
  const UOpPtr& z = x->src[0];
  const int64_t a = const_of(dt, x->src[1]);
  if (a <= 0) return nullptr;
  if (x->op == Op::IDIV)
    return op == Op::IDIV && fits(dt, Wide{a} * c) ? divmod(Op::IDIV, z, a * c) : nullptr;
  if (a % c != 0) return nullptr;
  return op == Op::IDIV ? divmod(Op::MOD, divmod(Op::IDIV, z, c), a / c) : divmod(Op::MOD, z, c);
}

// (z/a + k)/c = (z + k*a)/(a*c) when z >= 0 and z/a + k >= 0: floor identities
// on non-negative values, where truncation is floor.
UOpPtr fold_div_of_shifted_div(const LinearForm& f, int64_t c) {
  if (f.terms.size() != 1 || f.terms[0].coef != 1 || f.constant == 0) return nullptr;
  const UOpPtr& q = f.terms[0].base;
  if (q->op != Op::IDIV || q->src[1]->op != Op::CONST) return nullptr;
  const DType dt = f.dtype;
  const UOpPtr& z = q->src[0];
  const int64_t a = const_of(dt, q->src[1]);
  const auto eb = exact_bounds(f);
  if (a <= 0 || z->vmin() < 0 || !eb || eb->first < 0 || !fits(dt, Wide{a} * c) ||
      !fits(dt, Wide{f.constant} * a) || !exact_node(z))
    return nullptr;
  const LinearForm shifted = linear_form(UOp::make(Op::ADD, dt, {z, cnst(dt, f.constant * a)}));
  if (!exact_bounds(shifted)) return nullptr;
  return divmod(Op::IDIV, build(shifted), a * c);
}

// n = g*n' exactly (g = gcd of coefficients, constant and c): n/c = n'/(c/g) and
// n%c = (n'%(c/g))*g, all signs. With g = c: n/c = n', n%c = 0.
UOpPtr fold_gcd(Op op, const LinearForm& f, int64_t c) {
  uint64_t g = std::gcd(static_cast<uint64_t>(c),
                        static_cast<uint64_t>(f.constant < 0 ? -Wide{f.constant} : f.constant));
  for (const auto& t : f.terms) g = std::gcd(g, static_cast<uint64_t>(t.coef < 0 ? -Wide{t.coef} : t.coef));
  if (g <= 1) return nullptr;
  const auto gi = static_cast<int64_t>(g);
  LinearForm reduced{f.dtype, {}, f.constant / gi};
  for (const auto& t : f.terms) reduced.terms.push_back({t.base, t.coef / gi});
  const UOpPtr n = build(reduced);
  if (gi == c) return op == Op::IDIV ? n : cnst(f.dtype, 0);
  if (op == Op::IDIV) return divmod(Op::IDIV, n, c / gi);
  return UOp::make(Op::MUL, f.dtype, {divmod(Op::MOD, n, c / gi), cnst(f.dtype, gi)});
}

// Split n = c*quo + rem with each coefficient's remainder in [0, c) or, with
// `nearest`, in (-c/2, c/2]; the constant's in [0, c).
std::pair<LinearForm, LinearForm> split(const LinearForm& f, int64_t c, bool nearest) {
  LinearForm quo{f.dtype, {}, floor_div(f.constant, c)}, rem{f.dtype, {}, floor_mod(f.constant, c)};
  for (const auto& t : f.terms) {
    int64_t r = floor_mod(t.coef, c);
    if (nearest && Wide{r} * 2 > c) r -= c;
    if (r) rem.terms.push_back({t.base, r});
    if (const auto q = static_cast<int64_t>((Wide{t.coef} - r) / c)) quo.terms.push_back({t.base, q});
  }
  return {quo, rem};
}

// n >= 0 and rem's range lies in one period [m*c, (m+1)*c): n/c = quo + m, n%c = rem - m*c.
UOpPtr fold_one_period(Op op, const LinearForm& f, int64_t c) {
  for (bool nearest : {false, true}) {
    auto [quo, rem] = split(f, c, nearest);
    const auto eb = exact_bounds(rem);
    if (!eb || floor_div(eb->first, c) != floor_div(eb->second, c)) continue;
    const int64_t m = floor_div(eb->first, c);
    if (op == Op::IDIV) {
      quo.constant = wrap_add(f.dtype, quo.constant, m);
      return build(quo);
    }
    rem.constant = wrap_add(f.dtype, rem.constant, wrap_mul(f.dtype, -m, c));
    return build(rem);
  }
  return nullptr;
}

// z%m = z (mod c) when c divides m.
LinearForm strip_nested_mods(const LinearForm& f, int64_t c) {
  UOpPtr n = cnst(f.dtype, f.constant);
  for (const auto& t : f.terms) {
    const UOpPtr& b = t.base;
    const bool strip = b->op == Op::MOD && b->src[1]->op == Op::CONST && const_of(f.dtype, b->src[1]) > 0 &&
                       const_of(f.dtype, b->src[1]) % c == 0 && exact_node(b->src[0]);
    n = UOp::make(Op::ADD, f.dtype,
                  {n, UOp::make(Op::MUL, f.dtype, {strip ? b->src[0] : b, cnst(f.dtype, t.coef)})});
  }
  return linear_form(n);
}

// n >= 0: n%c = n'%c for any n' = n (mod c) with n' >= 0 (both are floor mods).
// n' reduces coefficients mod c and drops nested mods whose modulus c divides.
UOpPtr fold_mod_congruent(const LinearForm& f, int64_t c) {
  const UOpPtr n = build(f);
  for (bool strip : {true, false}) {
    const LinearForm rem = split(strip ? strip_nested_mods(f, c) : f, c, false).second;
    const auto eb = exact_bounds(rem);
    const UOpPtr r = build(rem);
    if (r != n && eb && eb->first >= 0) return divmod(Op::MOD, r, c);
  }
  return nullptr;
}

// n >= 0, n = c*quo + b with b >= 0: n/c = quo + b/c (quo: the terms that are multiples of c).
UOpPtr fold_div_multiples(const LinearForm& f, int64_t c) {
  LinearForm quo{f.dtype, {}, floor_div(f.constant, c)}, rest{f.dtype, {}, floor_mod(f.constant, c)};
  for (const auto& t : f.terms) {
    if (t.coef % c == 0)
      quo.terms.push_back({t.base, t.coef / c});
    else
      rest.terms.push_back(t);
  }
  const auto eb = exact_bounds(rest);
  if ((quo.terms.empty() && quo.constant == 0) || !eb || eb->first < 0) return nullptr;
  return UOp::make(Op::ADD, f.dtype, {build(quo), divmod(Op::IDIV, build(rest), c)});
}

UOpPtr fold_nonneg(Op op, const LinearForm& f, int64_t c) {
  const auto eb = exact_bounds(f);
  if (!eb || eb->first < 0) return nullptr;
  if (UOpPtr r = fold_one_period(op, f, c)) return r;
  return op == Op::MOD ? fold_mod_congruent(f, c) : fold_div_multiples(f, c);
}

UOpPtr fold_signed(Op op, const LinearForm& f, int64_t c) {
  const auto eb = exact_bounds(f);
  if (eb->first >= 0) return fold_nonneg(op, f, c);
  if (eb->second <= 0)  // n <= 0: n/c = -((-n)/c), n%c = -((-n)%c)
    if (UOpPtr r = fold_nonneg(op, scaled(f, -1), c)) return negated(r);
  return nullptr;
}

// Does r hold a division or modulo that x does not?
bool adds_divisions(const UOpPtr& r, const UOpPtr& x) {
  std::unordered_set<const UOp*> old;
  for (const auto& n : toposort(x))
    if (n->op == Op::IDIV || n->op == Op::MOD) old.insert(n.get());
  for (const auto& n : toposort(r))
    if ((n->op == Op::IDIV || n->op == Op::MOD) && !old.count(n.get())) return true;
  return false;
}

UOpPtr fold_by_positive(Op op, const UOpPtr& x, int64_t c);

// For a coefficient f of x that divides c (f > 0, all signs):
//   x/c = (x/f)/(c/f)   and   x%c = ((x/f)%(c/f))*f + x%f,
// taken only when x/f (and x%f) fold without new divisions, e.g. the index of
// (s0*4 + s1)/12 with s1 in [0, 4) is s0/3.
UOpPtr fold_by_factor(Op op, const LinearForm& f, const UOpPtr& x, int64_t c) {
  for (const auto& t : f.terms) {
    if (t.coef == int_range(f.dtype).first) continue;
    const int64_t k = t.coef < 0 ? -t.coef : t.coef;
    if (k <= 1 || k >= c || c % k != 0) continue;
    const UOpPtr q = fold_by_positive(Op::IDIV, x, k);
    if (!q || adds_divisions(q, x)) continue;
    if (op == Op::IDIV) return divmod(Op::IDIV, q, c / k);
    const UOpPtr r = fold_by_positive(Op::MOD, x, k);
    if (!r || adds_divisions(r, x)) continue;
    return UOp::make(Op::ADD, x->dtype,
                     {UOp::make(Op::MUL, x->dtype, {divmod(Op::MOD, q, c / k), cnst(x->dtype, k)}), r});
  }
  return nullptr;
}

// x/c and x%c for a constant c > 0.
UOpPtr fold_by_positive(Op op, const UOpPtr& x, int64_t c) {
  if (UOpPtr r = fold_nested(op, x, c)) return r;
  if (-c < x->vmin() && x->vmax() < c) return op == Op::MOD ? x : cnst(x->dtype, 0);  // |x| < c
  const LinearForm f = linear_form(x);
  if (!exact_bounds(f)) return nullptr;  // the sum may wrap: integer identities do not apply
  if (UOpPtr r = fold_gcd(op, f, c)) return r;
  if (op == Op::IDIV)
    if (UOpPtr r = fold_div_of_shifted_div(f, c)) return r;
  if (UOpPtr r = fold_signed(op, f, c)) return r;
  return fold_by_factor(op, f, x, c);
}

UOpPtr fold_divmod_const(const UOpPtr& root) {
  const DType dt = root->dtype;
  if (!is_int_scalar(dt) || root->src[1]->op != Op::CONST) return nullptr;
  const int64_t c = const_of(dt, root->src[1]);
  if (c == 0 || c == 1) return nullptr;  // by zero: left to the run time; by one: symbolic_simple
  if (c < 0) return negative_divisor(root->op, root->src[0], c);
  return fold_by_positive(root->op, root->src[0], c);
}

bool product_exact(const UOpPtr& a, const UOpPtr& y) {
  for (Wide p : {Wide{a->vmin()} * y->vmin(), Wide{a->vmin()} * y->vmax(), Wide{a->vmax()} * y->vmin(),
                 Wide{a->vmax()} * y->vmax()})
    if (!fits(a->dtype, p)) return false;
  return true;
}

// The factor of `base` beside y when base is y*o or o*y (y itself: 1), else null.
UOpPtr beside(const UOpPtr& base, const UOpPtr& y) {
  if (base == y) return cnst(base->dtype, 1);
  if (base->op != Op::MUL) return nullptr;
  return base->src[0] == y ? base->src[1] : base->src[1] == y ? base->src[0] : nullptr;
}

// A divisor d = y*c, y > 0 symbolic (a size, such as T) and c >= 1 a constant, and
// x >= 0 exact, written x = d*a + b from its terms, every one non-negative: those
// with y as a factor and a coefficient c divides make d*a, the rest b. When b < d
// over the bounds, x/d = a and x%d = b. b < d is shown from b = y*B + k*r + s with
// r a RANGE(y) (r <= y - 1), B and s bounded by numbers: b < d when
// (c - max B - k) >= 0 and (c - max B - k) * min y > max s - k. The index of a
// [.., T, ..] view read back through a reshape: (T*64*h + 64*t + j)/(T*64) is h
// for t a RANGE(T) and j < 64.
UOpPtr fold_by_symbol(Op op, const UOpPtr& x, const UOpPtr& d) {
  if (!is_int_scalar(x->dtype) || d->op == Op::CONST || x->vmin() < 0) return nullptr;
  const DType dt = x->dtype;
  UOpPtr y = d;
  int64_t c = 1;
  if (d->op == Op::MUL && (d->src[0]->op == Op::CONST || d->src[1]->op == Op::CONST)) {
    const int side = d->src[1]->op == Op::CONST ? 0 : 1;
    y = d->src[side];
    c = const_of(dt, d->src[1 - side]);
  }
  if (y->op == Op::CONST || y->vmin() <= 0 || c <= 0 || !product_exact(y, cnst(dt, c))) return nullptr;
  const LinearForm f = linear_form(x);
  if (!exact_bounds(f) || f.constant < 0) return nullptr;
  LinearForm a{dt, {}, 0}, b{dt, {}, f.constant};
  Wide most_b = 0, most_s = f.constant;  // max B, max s
  int64_t k = 0;                         // r's coefficient (0: no r)
  for (const Term& t : f.terms) {
    if (t.coef <= 0 || t.base->vmin() < 0) return nullptr;
    b.terms.push_back(t);
    if (const UOpPtr o = beside(t.base, y); o && o->vmin() >= 0) {
      if (t.coef % c == 0) {
        b.terms.pop_back();
        a.terms.push_back({o, t.coef / c});
      } else {
        most_b += Wide{t.coef} * o->vmax();
      }
    } else if (t.base->op == Op::RANGE && t.base->src[0] == y && k == 0) {
      k = t.coef;
    } else {
      most_s += Wide{t.coef} * t.base->vmax();
    }
  }
  const Wide spare = Wide{c} - most_b - k;
  if (spare < 0 || spare * y->vmin() <= most_s - k) return nullptr;
  return op == Op::IDIV ? build(a) : build(b);
}

// p = a*y: p/y = a and p%y = 0 when y != 0 and the product does not wrap.
UOpPtr cancel_factor(const UOpPtr& p, const UOpPtr& y, bool mod) {
  if (!is_int_scalar(p->dtype) || !(y->vmin() > 0 || y->vmax() < 0)) return nullptr;
  const int side = p->src[1] == y ? 0 : p->src[0] == y ? 1 : -1;
  if (side < 0 || !product_exact(p->src[side], y)) return nullptr;
  return mod ? cnst(p->dtype, 0) : p->src[side];
}
}  // namespace

const PatternMatcher& divmod_folding() {
  using P = UPat;
  static const PatternMatcher pm(
      "divmod_folding",
      {
          {P::ops({Op::IDIV, Op::MOD}), [](const Match& m) { return fold_divmod_const(m.root()); }},
          // (a*y)/y -> a, (a*y)%y -> 0: y != 0 and a*y does not wrap
          {P::op(Op::IDIV, {P::ops({Op::MUL}, "p"), P::var("y")}),
           [](const Match& m) { return cancel_factor(m["p"], m["y"], false); }},
          {P::op(Op::MOD, {P::ops({Op::MUL}, "p"), P::var("y")}),
           [](const Match& m) { return cancel_factor(m["p"], m["y"], true); }},
          // a range is below its end: r%end -> r, r/end -> 0
          {P::op(Op::RANGE, {P::var("end")}, "r") % P::var("end"), [](const Match& m) { return m["r"]; }},
          {P::op(Op::RANGE, {P::var("end")}, "r") / P::var("end"),
           [](const Match& m) { return cnst(m["r"]->dtype, 0); }},
          // (d*a + b)/d -> a, (d*a + b)%d -> b for d = y*c, y > 0 symbolic, 0 <= b < d
          {P::ops({Op::IDIV, Op::MOD}),
           [](const Match& m) {
             const UOpPtr& r = m.root();
             return fold_by_symbol(r->op, r->src[0], r->src[1]);
           }},
      });
  return pm;
}

}  // namespace loom
