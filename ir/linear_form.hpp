#pragma once
// An integer expression seen as a linear form  Σ coef·base + constant: the view
// the simplifier takes of index arithmetic. Flattening looks through ADD, SUB,
// NEG and MUL by a constant; every other node is a base. Coefficients are kept
// modulo 2^bits of the dtype, exactly as the hardware computes them.
#include "ir/int_arith.hpp"
#include "ir/uop.hpp"

#include <optional>
#include <utility>
#include <vector>

namespace loom {

struct Term {
  UOpPtr base;
  int64_t coef;
};

struct LinearForm {
  DType dtype;
  std::vector<Term> terms;  // distinct bases, non-zero coefficients
  int64_t constant = 0;
};

// A scalar integer ADD, SUB, NEG, or MUL with a CONST source.
bool is_linear(const UOpPtr& u);

// The form of `u`: like terms combined, (x/c)*c + x%c recombined into x and
// ((x/c)%d)*c + x%c into x%(c*d), terms sorted by structural_compare of bases.
LinearForm linear_form(const UOpPtr& u);

// The canonical node: ((t0 + t1) + ...) + constant, each term `base` or `base*coef`.
UOpPtr build(const LinearForm& f);

// build(linear_form(u)) for a linear `u`, in O(1) when u = a + t with `a` already
// canonical and t a constant or a term that sorts after all of a's terms (the
// common case in a bottom-up rewrite, whose sources are canonical). With other
// sources the result is still equal in value, only perhaps not canonical.
UOpPtr canonical_sum(const UOpPtr& u);

// The form times k (k exact; coefficients wrap), and the form of one term.
LinearForm scaled(const LinearForm& f, int64_t k);
LinearForm single_term(DType dt, const UOpPtr& base, int64_t coef, int64_t constant = 0);

// [lo, hi] of the exact (unwrapped) value Σ coef·base + constant over the bases'
// bounds, or nullopt when it may leave the dtype's range. When it is present the
// node's wrapping arithmetic computes the exact value, so integer identities
// (division, comparison) may be applied to it.
std::optional<std::pair<int64_t, int64_t>> exact_bounds(const LinearForm& f);

}  // namespace loom
