#pragma once
// The symbolic simplifier: constant folding, algebraic identities, a canonical
// form for integer index arithmetic, and folds proven by range analysis
// (UOp::vmin/vmax, ir/bounds.cpp). Rangeify and codegen run it on index math.
//
// Integer rules follow docs/kernel-ir.md ("ALU semantics"): two's-complement
// wrapping, IDIV/MOD truncating like LLVM's sdiv/srem. Every division/modulo
// rule carries the sign guard that truncation needs; rules that are only true
// for integers (x*0 -> 0, reassociation, x+0 -> x) never touch floats.
//
// Canonical form of an integer sum (see ir/linear_form.hpp): a left-leaning
// chain ((t0 + t1) + t2) + c of terms `base` or `base * coef`, bases distinct
// and sorted by structural_compare, the constant last and omitted when 0.
// Adding a term that sorts last costs O(1); one that sorts first rebuilds the
// chain, so a sum of n terms built in reverse order costs O(n^2) (index sums
// have a handful of terms).
// Operands of other commutative ops are ordered the same way, constants last,
// so equal expressions hash-cons to one node.
#include "ir/int_arith.hpp"
#include "ir/pattern.hpp"

#include <optional>
#include <vector>

namespace loom {

// Constant folding and cheap identities (x+0, x*1, where(true, a, b), ...).
const PatternMatcher& symbolic_simple();
// symbolic_simple + canonical order and reassociation, range-analysis folds,
// comparison folds and divmod_folding.
const PatternMatcher& symbolic();
// symbolic on integer and bool nodes only: index arithmetic and conditions, and
// a select on a constant condition (whatever its dtype). Float values are left to
// the per-kernel simplifier, where the kernel-level checker sees every rewrite of
// a value.
const PatternMatcher& symbolic_index();
// Division and modulo by constants (and a few by variables), each with its sign guard.
const PatternMatcher& divmod_folding();
// Integer comparisons with a constant: the sum's constant and gcd move to the
// constant's side (x + 3 < 7 -> x < 4, 4*x < 10 -> x < 3), x/d < c -> x < c*d, and
// terms that cannot move the sum past the next multiple of g drop out beside the
// multiples of g (64h + 16q + l < 256 -> h < 4 for q < 4, l < 16).
const PatternMatcher& comparison_folding();
// The conjuncts of a Bool AND tree (the guard itself when it is no AND).
std::vector<UOpPtr> conjuncts(const UOpPtr& guard);
// What the conjuncts `x < c` and `c < x` of an AND tree say of each integer node x they
// compare with a constant: x's own [vmin, vmax] narrowed by them (empty when lo > hi).
struct ConjunctBound {
  UOpPtr x;
  Wide lo, hi;
};
std::vector<ConjunctBound> conjunct_bounds(const UOpPtr& guard);
// min(a, b) and max(a, b) of integers, decided by their bounds where they can be (P + 1
// against 16 for P <= 15: 16 needs no select); a null `a` gives b.
UOpPtr min_by_bounds(const UOpPtr& a, const UOpPtr& b);
UOpPtr max_by_bounds(const UOpPtr& a, const UOpPtr& b);
// The IDIV and MOD nodes `u` reaches: what range_merge and valid_index keep from growing.
size_t divmod_count(const UOpPtr& u);
// graph_rewrite(root, symbolic()).
UOpPtr simplify(const UOpPtr& root);

// The value of `op` applied to constant sources, as a CONST of `dtype` (the
// result dtype: Bool for comparisons; the target for CAST and BITCAST).
// nullopt where folding is refused: integer division or modulo by zero, a shift
// by a negative count or by the bit width or more, an op the dtype does not
// have (AND on floats, EXP2 on ints), vector dtypes. Throws loom::Error when the
// sources are not constants or their number does not fit the op.
std::optional<UOpPtr> fold_constant(Op op, DType dtype, const std::vector<UOpPtr>& consts);

// A strict, deterministic, structural order on nodes (never by address): <0 when
// `a` sorts before `b`, 0 only for the same node. Variables first (by name), then
// ranges (by axis id), then other ops in enum order, constants last; within an op
// by arg (buffers by slot), dtype, then sources.
int structural_compare(const UOpPtr& a, const UOpPtr& b);

// `a` is the RANGE r itself, or r cast to an integer type that holds every value of r.
bool is_range_ref(const UOpPtr& a, const UOpPtr& r);

// A CONST's integer value, wrapped to dtype dt.
int64_t const_of(DType dt, const UOpPtr& c);

}  // namespace loom
