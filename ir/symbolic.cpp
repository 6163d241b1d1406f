// The simplifier's pattern tables (ir/symbolic.hpp). symbolic_simple holds
// constant folding and identities that need no analysis; symbolic adds the
// canonical form of integer sums, canonical operand order, range-analysis
// folds, comparison folding and divmod folding.
#include "ir/symbolic.hpp"

#include "ir/int_arith.hpp"
#include "ir/linear_form.hpp"
#include "ir/planted_fault.hpp"

namespace loom {

namespace {
using P = UPat;

bool is_bool(const UOpPtr& u) { return u->dtype.is_bool() && u->dtype.lanes == 1 && !u->dtype.ptr; }
bool is_int_value(const UOpPtr& u) { return is_int_scalar(u->dtype); }
bool is_intlike(const UOpPtr& u) { return is_int_scalar(u->dtype) || is_bool(u); }
UOpPtr zero(const UOpPtr& like) { return const_int(like->dtype, 0); }
UOpPtr bool_const(bool v) { return const_int(DType::Bool, v); }
UOpPtr logical_not(const UOpPtr& x) { return UOp::make(Op::CMPNE, DType::Bool, {x, bool_const(true)}); }

std::vector<Op> ops_where(bool (*keep)(Op)) {
  std::vector<Op> out;
  for (int i = 0; i < kNumOps; ++i)
    if (keep(static_cast<Op>(i))) out.push_back(static_cast<Op>(i));
  return out;
}
bool is_foldable(Op op) { return is_alu(op) || op == Op::CAST || op == Op::BITCAST; }
bool has_single_value(Op op) {
  return is_alu(op) || op == Op::CAST || op == Op::DEFINE_VAR || op == Op::BIND;
}

UOpPtr fold_all_const(const UOpPtr& u) {
  for (const auto& s : u->src)
    if (s->op != Op::CONST) return nullptr;
  return fold_constant(u->op, u->dtype, u->src).value_or(nullptr);
}

// An integer or bool value that range analysis pins to one number is that number.
// (RANGE is left alone: it is a loop as well as a value, and END/REDUCE list it.)
UOpPtr fold_single_value(const UOpPtr& u) {
  if (!is_intlike(u) || u->vmin() != u->vmax()) return nullptr;
  return const_int(u->dtype, u->vmin());
}

// Operands of a commutative op in structural order, constants last. Integer
// sums and scalings are the linear form's (ir/linear_form.hpp) to order.
UOpPtr order_operands(const UOpPtr& u) {
  if (u->src.size() != 2 || is_linear(u) || structural_compare(u->src[1], u->src[0]) >= 0) return nullptr;
  return u->with_src({u->src[1], u->src[0]});
}

// (x op c1) op c2 -> x op (c1 op c2) for associative integer/bool ops.
UOpPtr merge_constants(const Match& m) {
  const UOpPtr& r = m.root();
  if (!is_intlike(r)) return nullptr;
  const auto c = fold_constant(r->op, r->dtype, {m["c1"], m["c2"]});
  return c ? UOp::make(r->op, r->dtype, {m["x"], *c}) : nullptr;
}

// cast(cast(x, a), b) -> cast(x, b) when every value of x survives the cast to a.
UOpPtr fold_cast_chain(const Match& m) {
  const UOpPtr &x = m["x"], &a = m["a"], &b = m.root();
  if (!is_intlike(x) || !is_intlike(a)) return nullptr;
  const auto [lo, hi] = int_range(a->dtype);
  if (x->vmin() < lo || x->vmax() > hi) return nullptr;
  return x->dtype == b->dtype ? x : UOp::make(Op::CAST, b->dtype, {x});
}

// The replacement is built only when the guard holds: building it first would
// make nodes UOp::make rejects (a bool negation of an integer, say).
template <class Build>
UOpPtr when(bool ok, Build build) {
  return ok ? build() : nullptr;
}
UOpPtr when(bool ok, const UOpPtr& r) { return ok ? r : nullptr; }

// Rewrite functions for one-line rules: x (or 0, or a constant) when x's dtype passes.
using Pred = bool (*)(const UOpPtr&);
RewriteFn x_if(Pred p) {
  return [p](const Match& m) { return when(p(m["x"]), m["x"]); };
}
RewriteFn zero_if(Pred p) {
  return [p](const Match& m) { return when(p(m["x"]), [&] { return zero(m["x"]); }); };
}
RewriteFn value_if(Pred p, int64_t v) {
  return [p, v](const Match& m) { return when(p(m["x"]), [&] { return const_int(m["x"]->dtype, v); }); };
}
RewriteFn bool_if(Pred p, bool v) {
  return [p, v](const Match& m) { return when(p(m["x"]), bool_const(v)); };
}
RewriteFn not_x_if(Pred p) {
  return [p](const Match& m) { return when(p(m["x"]), [&] { return logical_not(m["x"]); }); };
}
bool any(const UOpPtr&) { return true; }
bool nonzero_int(const UOpPtr& x) { return is_int_scalar(x->dtype) && (x->vmin() > 0 || x->vmax() < 0); }

// The planted fault (ir/planted_fault.hpp), for the fuzzer's test: float x - c -> x + c.
UOpPtr planted_flip(const Match& m) {
  if (planted_fault() != PlantedFault::FlipConstantSub || !m["x"]->dtype.is_float()) return nullptr;
  return UOp::make(Op::ADD, m.root()->dtype, {m["x"], m["c"]});
}

UOpPtr negate(const Match& m) {
  return when(is_int_value(m["x"]), [&] { return UOp::make(Op::NEG, m["x"]->dtype, {m["x"]}); });
}

std::vector<Rule> identity_rules() {
  const P x = P::var("x");
  return {
      // arithmetic (x+0 -> x and x*0 -> 0 are false for floats: -0.0 + 0.0, NaN * 0)
      {x + 0, x_if(is_int_value)},
      {x - 0, x_if(is_int_value)},
      {x - P::cvar("c"), planted_flip},
      {x * 1, x_if(any)},
      {x * 0, zero_if(is_int_value)},
      {x - x, zero_if(is_int_value)},
      {P::op(Op::NEG, {P::op(Op::NEG, {x})}), x_if(any)},
      {P::op(Op::FDIV, {x, P::cnst(1)}), x_if(any)},
      {x / 1, x_if(is_int_value)},
      {x / -1, negate},
      {x % 1, zero_if(is_int_value)},
      {x % -1, zero_if(is_int_value)},
      {x % x, zero_if(is_int_value)},     // x%0 is 0 too
      {x / x, value_if(nonzero_int, 1)},  // 0/0 is 0, not 1: only with x != 0 proven
      // bitwise and logic
      {P::op(Op::AND, {x, x}), x_if(any)},
      {P::op(Op::OR, {x, x}), x_if(any)},
      {P::op(Op::MAX, {x, x}), x_if(any)},
      {P::op(Op::XOR, {x, x}), zero_if(is_intlike)},
      {P::op(Op::AND, {x, P::cnst(0)}), zero_if(is_intlike)},
      {P::op(Op::OR, {x, P::cnst(0)}), x_if(is_intlike)},
      {P::op(Op::XOR, {x, P::cnst(0)}), x_if(is_intlike)},
      {P::op(Op::AND, {x, P::cnst(-1)}), x_if(is_int_value)},
      {P::op(Op::OR, {x, P::cnst(-1)}), value_if(is_int_value, -1)},
      {P::op(Op::AND, {x, P::cnst(1)}), x_if(is_bool)},
      {P::op(Op::OR, {x, P::cnst(1)}), bool_if(is_bool, true)},
      {P::op(Op::SHL, {x, P::cnst(0)}), x_if(is_intlike)},
      {P::op(Op::SHR, {x, P::cnst(0)}), x_if(is_intlike)},
  };
}

UOpPtr swap_branches(const Match& m) {
  return when(is_bool(m["c"]), [&] {
    return UOp::make(Op::WHERE, m.root()->dtype, {m["c"], m["b"], m["a"]});
  });
}
UOpPtr select_branch(const Match& m) { return m["c"]->const_value() != 0 ? m["a"] : m["b"]; }
UOpPtr bool_select(const Match& m) { return when(is_bool(m.root()), m["c"]); }
UOpPtr negated_select(const Match& m) {
  return when(is_bool(m.root()), [&] { return logical_not(m["c"]); });
}
UOpPtr cast_to_same(const Match& m) { return when(m["x"]->dtype == m.root()->dtype, m["x"]); }

std::vector<Rule> compare_where_cast_rules() {
  const P x = P::var("x"), a = P::var("a"), b = P::var("b"), c = P::var("c");
  const P one = P::cnst(1), zero = P::cnst(0);
  return {
      // a value against itself (x != x is true for a float NaN)
      {x < x, bool_if(any, false)},
      {P::op(Op::CMPNE, {x, x}), bool_if(is_intlike, false)},
      {P::op(Op::CMPEQ, {x, x}), bool_if(is_intlike, true)},
      // bool negation is CMPNE(x, true)
      {P::op(Op::CMPNE, {x, zero}), x_if(is_bool)},
      {P::op(Op::CMPEQ, {x, one}), x_if(is_bool)},
      {P::op(Op::CMPEQ, {x, zero}), not_x_if(is_bool)},
      {P::op(Op::XOR, {x, one}), not_x_if(is_bool)},
      {P::op(Op::CMPNE, {P::op(Op::CMPNE, {x, one}), one}), x_if(is_bool)},
      // where
      {P::op(Op::WHERE, {c, a, a}), [](const Match& m) { return m["a"]; }},
      {P::op(Op::WHERE, {P::cvar("c"), a, b}), select_branch},
      {P::op(Op::WHERE, {c, one, zero}), bool_select},
      {P::op(Op::WHERE, {c, zero, one}), negated_select},
      {P::op(Op::WHERE, {P::op(Op::CMPNE, {c, one}), a, b}), swap_branches},
      // casts
      {P::op(Op::CAST, {x}), cast_to_same},
      {P::op(Op::TRUNC, {x}), x_if(is_intlike)},
  };
}

std::vector<Rule> simple_rules() {
  std::vector<Rule> rules{
      {P::ops(ops_where(is_foldable)), [](const Match& m) { return fold_all_const(m.root()); }}};
  for (auto& r : identity_rules()) rules.push_back(std::move(r));
  for (auto& r : compare_where_cast_rules()) rules.push_back(std::move(r));
  return rules;
}

UOpPtr normalize_linear(const Match& m) { return is_linear(m.root()) ? canonical_sum(m.root()) : nullptr; }

// (x*c)*y -> (x*y)*c: constants move out of products, where the linear form sees them.
UOpPtr constant_out_of_product(const Match& m) {
  const DType dt = m.root()->dtype;
  return when(is_int_value(m.root()) && m["y"]->op != Op::CONST, [&] {
    return UOp::make(Op::MUL, dt, {UOp::make(Op::MUL, dt, {m["x"], m["y"]}), m["c"]});
  });
}

// max(x, y) of ranges that do not overlap.
UOpPtr fold_max(const Match& m) {
  const UOpPtr &x = m["x"], &y = m["y"];
  if (!is_int_scalar(x->dtype)) return nullptr;
  return x->vmin() >= y->vmax() ? x : x->vmax() <= y->vmin() ? y : nullptr;
}

std::vector<Rule> index_rules() {
  const P x = P::var("x"), y = P::var("y");
  std::vector<Rule> rules{
      {P::ops(ops_where(has_single_value)), [](const Match& m) { return fold_single_value(m.root()); }},
      {P::ops({Op::ADD, Op::SUB, Op::NEG, Op::MUL}), normalize_linear},
      {P::ops(ops_where(is_commutative)), [](const Match& m) { return order_operands(m.root()); }},
      {(x * P::cvar("c")) * y, constant_out_of_product},
      {P::op(Op::MAX, {x, y}), fold_max},
      {P::op(Op::CAST, {P::op(Op::CAST, {x}, "a")}), fold_cast_chain},
  };
  for (Op op : {Op::MAX, Op::AND, Op::OR, Op::XOR})
    rules.push_back({P::op(op, {P::op(op, {x, P::cvar("c1")}), P::cvar("c2")}), merge_constants});
  return rules;
}
}  // namespace

const PatternMatcher& symbolic_simple() {
  static const PatternMatcher pm("symbolic_simple", simple_rules());
  return pm;
}

const PatternMatcher& symbolic() {
  static const PatternMatcher pm = symbolic_simple() + PatternMatcher("symbolic_index", index_rules()) +
                                   comparison_folding() + divmod_folding();
  return pm;
}

const PatternMatcher& symbolic_index() {
  static const PatternMatcher pm = symbolic().restricted("symbolic_index", [](const UOp& u) {
    // A float select on a constant condition is no float arithmetic: its dead branch
    // (an empty slice's source, say) must not keep a buffer alive. Nor is a cast of a
    // constant: folded, an integer chain that is constant stays no buffer's value.
    return !u.dtype.is_float() || (u.op == Op::WHERE && u.src[0]->op == Op::CONST) ||
           (u.op == Op::CAST && u.src[0]->op == Op::CONST);
  });
  return pm;
}

UOpPtr simplify(const UOpPtr& root) { return graph_rewrite(root, symbolic()); }

UOpPtr min_by_bounds(const UOpPtr& a, const UOpPtr& b) {
  if (!a || b->vmax() <= a->vmin()) return b;
  return a->vmax() <= b->vmin() ? a : where(a < b, a, b);
}
UOpPtr max_by_bounds(const UOpPtr& a, const UOpPtr& b) {
  if (!a || b->vmin() >= a->vmax()) return b;
  return a->vmin() >= b->vmax() ? a : umax(a, b);
}

bool is_range_ref(const UOpPtr& a, const UOpPtr& r) {
  if (a == r) return true;
  return a->op == Op::CAST && a->src[0] == r && is_int_scalar(a->dtype) && fits(a->dtype, Wide{r->vmax()});
}

int64_t const_of(DType dt, const UOpPtr& c) { return wrap_int(dt, static_cast<uint64_t>(c->const_int())); }

}  // namespace loom
