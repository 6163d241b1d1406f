// Floor division and % that floor like Python (the remainder takes the divisor's
// sign), built on the IR's truncating IDIV/MOD for integers and on an exact
// truncated remainder for floats. Integer division or modulo by zero gives 0
// (the IR's rule, docs/semantics.md), where PyTorch raises.
#include "src/tensor_ops.hpp"

#include <limits>

namespace loom {

using namespace detail;

namespace {
struct FloorDivMod {
  UOpPtr quotient, remainder;
};

// The remainder r and the divisor b have opposite signs (both non-zero); false with a NaN.
UOpPtr signs_differ(const UOpPtr& r, const UOpPtr& b) {
  const UOpPtr zero = const_as(r, 0);
  return alu(Op::OR, {land(r < zero, zero < b), land(zero < r, b < zero)});
}

// IDIV/MOD truncate; where the remainder is non-zero with the divisor's opposite sign, the
// floor is one lower and the remainder one divisor further. By zero both are 0 (no fix-up
// applies), and INT_MIN / -1 is INT_MIN with remainder 0, as the IR defines them.
FloorDivMod int_floor_divmod(const UOpPtr& a, const UOpPtr& b) {
  const UOpPtr q = alu(Op::IDIV, {a, b}), r = alu(Op::MOD, {a, b});
  if (a->dtype.is_unsigned()) return {q, r};
  const UOpPtr fix = signs_differ(r, b);
  return {where(fix, q - const_as(q, 1), q), where(fix, r + b, r)};
}

// Veltkamp's split of a Float64 into two halves of 26 bits, whose products are exact.
std::pair<UOpPtr, UOpPtr> split(const UOpPtr& x) {
  const UOpPtr c = x * const_as(x, 134217729.0);  // 2^27 + 1
  const UOpPtr hi = c - (c - x);
  return {hi, x - hi};
}

// a - b*t exactly, for an integral t: Dekker's product b*t = p + e (no FMA needed), then
// (a - p) is exact by Sterbenz's lemma and the result is representable. Needs |b|, |t| < 2^995.
UOpPtr exact_residual(const UOpPtr& a, const UOpPtr& b, const UOpPtr& t) {
  const auto [bh, bl] = split(b);
  const auto [th, tl] = split(t);
  const UOpPtr p = b * t;
  const UOpPtr e = (((bh * th - p) + bh * tl) + bl * th) + bl * tl;
  return (a - p) - e;
}

// Floats, in Float64: t = trunc(a/b) is the truncated quotient or, where a/b rounded up to an
// integer, one further from zero; either way m = a - b*t, made exact, lies within one |b| of 0,
// so one floor step (move a remainder of the divisor's opposite sign by b) gives Python's
// floor quotient and remainder, the remainder rounded once, as torch.remainder's fmod + b is.
// Exact while |a/b| < 2^53; beyond, t is not the quotient to the unit and the remainder is
// inexact (it may leave [0, b)), and NaN with the quotient once |a/b| >= 2^996 (PyTorch's fmod
// is exact for all). For b = 0 the remainder is NaN and the quotient a/b (±inf or NaN); for an
// infinite a both are NaN; for an infinite b and a finite a the results are Python's (a, or b
// with quotient -1).
FloorDivMod float_floor_divmod(const UOpPtr& a, const UOpPtr& b) {
  const UOpPtr zero = const_as(a, 0);
  const UOpPtr t = alu(Op::TRUNC, {a / b});
  const UOpPtr m = exact_residual(a, where(eq(t, zero), zero, b), t);  // t = 0: no inf * 0
  const UOpPtr fix = signs_differ(m, b);
  const UOpPtr q = where(fix, t - const_as(a, 1), t), r = where(fix, m + b, m);
  const UOpPtr undefined = land(ne(r, r), ne(b, zero));  // a = ±inf or NaN: quotient NaN too
  return {where(undefined, const_as(a, std::numeric_limits<double>::quiet_NaN()), q), r};
}

FloorDivMod floor_divmod(const Tensor& x, const Tensor& y, const char* name) {
  const DType dt = arithmetic_dtype(x, y, name);
  auto [a, b] = operands(x, y, dt, name);
  if (!dt.is_float()) return int_floor_divmod(a, b);
  const FloorDivMod f = float_floor_divmod(cast_uop(a, DType::Float64), cast_uop(b, DType::Float64));
  return {cast_uop(f.quotient, dt), cast_uop(f.remainder, dt)};
}
}  // namespace

Tensor Tensor::floor_div(const Tensor& other) const {
  return make_tensor(floor_divmod(*this, other, "floor_div").quotient);
}
Tensor operator%(const Tensor& a, const Tensor& b) {
  return make_tensor(floor_divmod(a, b, "remainder (%)").remainder);
}

}  // namespace loom
