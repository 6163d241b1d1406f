#pragma once
// Float32 elementary functions as UOp forms: range reduction and polynomials
// built from + - * MULACC, compares, selects and bit moves, so a kernel that
// uses them vectorises to the full SIMD width (no libm call per lane). The
// codegen/transcendental.cpp lowers EXP, EXP2, LOG2, SIN, COS, TANH, SIGMOID, ERF and
// POW to them. docs/api.md states each one's error bound, which
// tests/src/test_tensor_elementwise_math.cpp measures.
#include "ir/uop.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace loom {

// max(lo, min(x, hi)) as two compare-and-selects that let NaN through (each one
// machine instruction on x86: maxps/minps with the operands in this order).
UOpPtr clamp_keeping_nan(const UOpPtr& x, double lo, double hi);

// LDEXP's value (docs/kernel-ir.md): x * 2^n for a whole n, rounded once to T. Past
// +-1100 n saturates: every float's result there is 0 or infinite already.
template <class T>
T scaled_by_pow2(T x, T n) {
  if (std::isnan(n)) return n;
  return std::ldexp(x, static_cast<int>(std::clamp<double>(std::floor(n), -1100, 1100)));
}

// The Float32 functions; x is a scalar Float32 UOp.
UOpPtr exp_f32(const UOpPtr& x);      // e^x, one Cody-Waite reduction
UOpPtr exp2_f32(const UOpPtr& x);     // 2^x
UOpPtr log2_f32(const UOpPtr& x);     // FreeBSD log2f's method
UOpPtr tanh_f32(const UOpPtr& x);     // via e^(-2|x|) - 1, one reduction
UOpPtr sigmoid_f32(const UOpPtr& x);  // from e^-|x|: never inf / inf
UOpPtr erf_f32(const UOpPtr& x);      // a series near 0, 1 - erfc beyond (fitted polynomial)
// sum_j coefficients[j] T_j(s), the Chebyshev series, by Clenshaw's recurrence (stable at any
// degree); s a Float32 or Float64 UOp, scalar or a tensor's.
UOpPtr clenshaw(const std::vector<double>& coefficients, const UOpPtr& s);
// erf's Maclaurin series 2/sqrt(pi) sum_{n <= last} (-1)^n x^(2n+1) / (n! (2n+1)), for |x| < 0.5
// (the terms fall by 4x at least: no cancellation); x Float32 or Float64, scalar or a tensor's.
UOpPtr erf_series(const UOpPtr& x, int last);
// sin and cos: Payne-Hanek reduction of every float and polynomials, in Float64 (the
// reduction needs more than Float32's bits, and cos's bound is 0.501 ulp).
UOpPtr sin_f32(const UOpPtr& x);
UOpPtr cos_f32(const UOpPtr& x);
UOpPtr pow_f32(const UOpPtr& x, const UOpPtr& y);  // computes in Float64 (4 lanes per AVX2 register)

}  // namespace loom
