// Flattening integer expressions into Σ coef·base + constant and building the
// canonical node back (ir/linear_form.hpp).
#include "ir/linear_form.hpp"

#include "ir/symbolic.hpp"

#include <algorithm>
#include <unordered_map>

namespace loom {

namespace {

bool is_const_of(const UOpPtr& u, DType dt) { return u->op == Op::CONST && u->dtype == dt; }

struct Accumulator {
  DType dt;
  std::vector<Term> terms;
  std::unordered_map<const UOp*, size_t> index;
  int64_t constant = 0;

  void add_term(const UOpPtr& base, int64_t coef) {
    auto [it, fresh] = index.emplace(base.get(), terms.size());
    if (fresh)
      terms.push_back({base, coef});
    else
      terms[it->second].coef = wrap_add(dt, terms[it->second].coef, coef);
  }

  // Iterative: a chain of thousands of ADDs must not overflow the stack.
  void add(const UOpPtr& root, int64_t mul) {
    std::vector<std::pair<UOpPtr, int64_t>> stack{{root, mul}};
    while (!stack.empty()) {
      auto [n, m] = std::move(stack.back());
      stack.pop_back();
      if (is_const_of(n, dt)) {
        constant = wrap_add(dt, constant, wrap_mul(dt, m, const_of(dt, n)));
      } else if (n->dtype != dt || !is_linear(n)) {
        add_term(n, m);
      } else if (n->op == Op::ADD || n->op == Op::SUB) {
        stack.emplace_back(n->src[0], m);
        stack.emplace_back(n->src[1], n->op == Op::ADD ? m : wrap_neg(dt, m));
      } else if (n->op == Op::NEG) {
        stack.emplace_back(n->src[0], wrap_neg(dt, m));
      } else {  // MUL by a constant
        const bool c1 = n->src[1]->op == Op::CONST;
        stack.emplace_back(n->src[c1 ? 0 : 1], wrap_mul(dt, m, const_of(dt, n->src[c1 ? 1 : 0])));
      }
    }
  }

  Term* find(Op op, const UOpPtr& x, const UOpPtr& c) {
    for (auto& t : terms)
      if (t.coef != 0 && t.base->op == op && t.base->src[0] == x && t.base->src[1] == c) return &t;
    return nullptr;
  }

  // (x/c)*(c*k) + (x%c)*k -> x*k: the definition of truncating srem, any c != 0.
  bool recombine_full(Term& mod) {
    const UOpPtr x = mod.base->src[0], c = mod.base->src[1];
    Term* div = find(Op::IDIV, x, c);
    if (!div || div->coef != wrap_mul(dt, const_of(dt, c), mod.coef)) return false;
    const int64_t k = mod.coef;
    div->coef = mod.coef = 0;
    add(x, k);
    return true;
  }

  // ((x/c)%d)*(c*k) + (x%c)*k -> (x%(c*d))*k for c, d > 0 (both sides are odd in x).
  bool recombine_partial(Term& mod) {
    const UOpPtr x = mod.base->src[0], c = mod.base->src[1];
    const int64_t cv = const_of(dt, c);
    if (cv <= 0) return false;
    for (auto& t : terms) {
      const UOpPtr& b = t.base;
      if (t.coef == 0 || b->op != Op::MOD || !is_const_of(b->src[1], dt)) continue;
      const UOpPtr& inner = b->src[0];
      if (inner->op != Op::IDIV || inner->src[0] != x || inner->src[1] != c) continue;
      const int64_t d = const_of(dt, b->src[1]);
      if (d <= 0 || !fits(dt, Wide{cv} * d) || t.coef != wrap_mul(dt, cv, mod.coef)) continue;
      const int64_t k = mod.coef;
      t.coef = mod.coef = 0;
      add_term(UOp::make(Op::MOD, dt, {x, const_int(dt, cv * d)}), k);
      return true;
    }
    return false;
  }

  bool recombine_once() {
    for (size_t i = 0; i < terms.size(); ++i) {
      Term& t = terms[i];
      if (t.coef == 0 || t.base->op != Op::MOD || !is_const_of(t.base->src[1], dt)) continue;
      if (const_of(dt, t.base->src[1]) == 0) continue;
      if (recombine_full(t) || recombine_partial(terms[i])) return true;  // terms may have grown
    }
    return false;
  }

  LinearForm finish() {
    while (recombine_once()) {
    }
    LinearForm f{dt, {}, constant};
    for (auto& t : terms)
      if (t.coef != 0) f.terms.push_back(std::move(t));
    std::sort(f.terms.begin(), f.terms.end(),
              [](const Term& a, const Term& b) { return structural_compare(a.base, b.base) < 0; });
    return f;
  }
};

UOpPtr term_node(DType dt, const UOpPtr& base, int64_t coef) {
  return coef == 1 ? base : UOp::make(Op::MUL, dt, {base, const_int(dt, coef)});
}
}  // namespace

bool is_linear(const UOpPtr& u) {
  const DType dt = u->dtype;
  if (!dt.is_int() || dt.lanes != 1 || dt.ptr) return false;
  switch (u->op) {
    case Op::ADD:
    case Op::SUB:
    case Op::NEG: return true;
    case Op::MUL: return u->src[0]->op == Op::CONST || u->src[1]->op == Op::CONST;
    default: return false;
  }
}

LinearForm linear_form(const UOpPtr& u) {
  Accumulator acc{u->dtype, {}, {}, 0};
  acc.add(u, 1);
  return acc.finish();
}

UOpPtr build(const LinearForm& f) {
  const DType dt = f.dtype;
  UOpPtr acc;
  for (const auto& t : f.terms) {  // coefficients as the dtype holds them (UInt8: -1 is 255)
    const int64_t coef = wrap_int(dt, static_cast<uint64_t>(t.coef));
    if (coef == 0) continue;
    const UOpPtr term = term_node(dt, t.base, coef);
    acc = acc ? UOp::make(Op::ADD, dt, {acc, term}) : term;
  }
  const UOpPtr constant = const_int(dt, wrap_int(dt, static_cast<uint64_t>(f.constant)));
  if (!acc) return constant;
  return constant->const_int() == 0 ? acc : UOp::make(Op::ADD, dt, {acc, constant});
}

namespace {
// A canonical term: base (not linear, not a constant) or base * c with c != 0, 1.
const UOp* term_base(const UOpPtr& t) {
  if (t->op == Op::CONST) return nullptr;
  if (!is_linear(t)) return t.get();
  if (t->op != Op::MUL || t->src[1]->op != Op::CONST || t->src[0]->op == Op::CONST || is_linear(t->src[0]))
    return nullptr;
  const int64_t c = const_of(t->dtype, t->src[1]);
  return c == 0 || c == 1 ? nullptr : t->src[0].get();
}

// u = a + b, a canonical: the O(1) cases, or nullptr to take the general path.
UOpPtr append(const UOpPtr& u) {
  const DType dt = u->dtype;
  const UOpPtr &a = u->src[0], &b = u->src[1];
  if (u->op != Op::ADD || a->dtype != dt || a->op == Op::CONST) return nullptr;
  const bool has_k = a->op == Op::ADD && is_const_of(a->src[1], dt);
  const UOpPtr& body = has_k ? a->src[0] : a;  // the terms of a
  const int64_t k = has_k ? const_of(dt, a->src[1]) : 0;
  if (is_const_of(b, dt)) {  // merge the constants
    const int64_t sum = wrap_add(dt, k, const_of(dt, b));
    if (!has_k) return sum == 0 ? a : u;
    return sum == 0 ? body : UOp::make(Op::ADD, dt, {body, const_int(dt, sum)});
  }
  const UOp* last = term_base(body->op == Op::ADD ? body->src[1] : body);
  const UOp* next = term_base(b);
  // a new base after every base of a cannot merge with one; IDIV/MOD may recombine
  if (!last || !next || next->op == Op::IDIV || next->op == Op::MOD ||
      structural_compare(last->ptr(), next->ptr()) >= 0)
    return nullptr;
  return has_k ? UOp::make(Op::ADD, dt, {UOp::make(Op::ADD, dt, {body, b}), a->src[1]}) : u;
}
}  // namespace

UOpPtr canonical_sum(const UOpPtr& u) {
  if (UOpPtr r = append(u)) return r;
  return build(linear_form(u));
}

LinearForm scaled(const LinearForm& f, int64_t k) {
  LinearForm out{f.dtype, {}, wrap_mul(f.dtype, f.constant, k)};
  for (const auto& t : f.terms)
    if (int64_t c = wrap_mul(f.dtype, t.coef, k)) out.terms.push_back({t.base, c});
  return out;
}

LinearForm single_term(DType dt, const UOpPtr& base, int64_t coef, int64_t constant) {
  return LinearForm{dt, {{base, coef}}, constant};
}

std::optional<std::pair<int64_t, int64_t>> exact_bounds(const LinearForm& f) {
  constexpr Wide kHuge = Wide{1} << 66;  // past any dtype: such a form cannot fit
  Wide lo = f.constant, hi = f.constant;
  for (const auto& t : f.terms) {
    const Wide a = Wide{t.coef} * t.base->vmin(), b = Wide{t.coef} * t.base->vmax();
    if (a > kHuge || a < -kHuge || b > kHuge || b < -kHuge) return std::nullopt;
    lo += std::min(a, b);
    hi += std::max(a, b);
  }
  if (!fits(f.dtype, lo) || !fits(f.dtype, hi)) return std::nullopt;
  return std::pair<int64_t, int64_t>{static_cast<int64_t>(lo), static_cast<int64_t>(hi)};
}

}  // namespace loom
