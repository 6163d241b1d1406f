// The numeric rules of docs/kernel-ir.md as UOps, so the emitter's instructions are
// plain and the rules vectorise with the rest of the kernel (llvm.fptosi.sat on a
// vector is a call per lane on x86; docs/performance.md).
//
//   Before:  IDIV(a, b)                  i32, b may be 0 or -1 (a may be INT_MIN)
//   After:   WHERE(b == 0, 0, IDIV(a, WHERE(b == 0 | (a == INT_MIN & b == -1), 1, b)))
//
//   Before:  SHL(a, c)                   i32, c anywhere
//   After:   WHERE(out, 0, SHL(a, WHERE(out, 0, c)))        out = c < 0 | 31 < c
//            (SHR on a signed type: WHERE(out, SHR(a, 31), ...), the sign)
//
//   Before:  CAST(x) to i32              x: f32
//   After:   WHERE(in, CAST(WHERE(in, x, 0)), WHERE(-2^31 < x, INT_MAX, WHERE(x != x, 0, INT_MIN)))
//            in = -2^31 < x & x < 2^31   (false for NaN)
//
//   Before:  MAX(a, b)                   f32
//   After:   WHERE(b != b, b, WHERE(a == b & a == 0, a + b, WHERE(a < b, b, a)))
//            (NaN propagates; max(-0, +0) = +0, as llvm.maximum)
//
// An op range analysis shows safe (an IDIV by the constant 16, a shift by a
// constant) is left as it is. The guarded operand is rebuilt from the same
// builder when the emitter asks (unlowered_numerics): UOps are hash-consed, so
// "is this the guard" is a pointer comparison.
#include "codegen/numeric_lowering.hpp"

#include "codegen/vector_ops.hpp"
#include "ir/int_limits.hpp"
#include "ir/pattern.hpp"

#include <cstdint>
#include <limits>

namespace loom {

namespace {

UOpPtr splat_int(DType dt, int64_t v) { return broadcast(const_int(dt.base(), v), dt.lanes); }
UOpPtr splat_float(DType dt, double v) { return broadcast(const_float(dt.base(), v), dt.lanes); }
UOpPtr lor(const UOpPtr& a, const UOpPtr& b) { return alu(Op::OR, {a, b}); }

// ---- division ---------------------------------------------------------------------
bool may_be_zero(const UOp& b) { return b.vmin() <= 0 && b.vmax() >= 0; }

// INT_MIN / -1 overflows (sdiv's undefined case); unsigned division cannot.
bool may_overflow(const UOp& a, const UOp& b) {
  return !b.dtype.is_unsigned() && b.vmin() <= -1 && b.vmax() >= -1 && a.vmin() <= int_lowest(b.dtype);
}

// The divisor `b`, or 1 where dividing `a` by `b` is undefined: by 1, INT_MIN / -1
// gives the contract's INT_MIN (MOD 0).
UOpPtr division_guard(const UOpPtr& a, const UOpPtr& b) {
  const DType dt = b->dtype;
  UOpPtr unsafe;
  if (may_be_zero(*b)) unsafe = eq(b, splat_int(dt, 0));
  if (may_overflow(*a, *b)) {
    const UOpPtr overflow = land(eq(a, splat_int(dt, int_lowest(dt))), eq(b, splat_int(dt, -1)));
    unsafe = unsafe ? lor(unsafe, overflow) : overflow;
  }
  return unsafe ? where(unsafe, splat_int(dt, 1), b) : b;
}

// Division or modulo by 0 gives 0.
UOpPtr lower_division(const UOp& u) {
  const UOpPtr &a = u.src[0], &b = u.src[1];
  const UOpPtr q = UOp::make(u.op, u.dtype, {a, division_guard(a, b)});
  return may_be_zero(*b) ? where(eq(b, splat_int(u.dtype, 0)), splat_int(u.dtype, 0), q) : q;
}

std::string division_unlowered(const UOp& u) {
  const UOpPtr &a = u.src[0], &d = u.src[1];
  if (!may_be_zero(*d) && !may_overflow(*a, *d)) return "";
  if (d->op == Op::WHERE && division_guard(a, d->src[2]) == d) return "";
  return may_be_zero(*d) ? "the divisor may be 0" : "the quotient may overflow (INT_MIN / -1)";
}

// ---- shifts ---------------------------------------------------------------------------
// Is the count `c` outside [0, bits)? Null when range analysis says never.
UOpPtr shift_out_of_range(const UOpPtr& c) {
  const DType dt = c->dtype;
  const int bits = dt.base().bits();
  UOpPtr out;
  if (c->vmin() < 0) out = c < splat_int(dt, 0);
  if (c->vmax() >= bits) {
    const UOpPtr above = splat_int(dt, bits - 1) < c;
    out = out ? lor(out, above) : above;
  }
  return out;
}

UOpPtr shift_guard(const UOpPtr& c) {
  const UOpPtr out = shift_out_of_range(c);
  return out ? where(out, splat_int(c->dtype, 0), c) : c;
}

// A count outside [0, bits) shifts every bit out: 0, or the sign for an
// arithmetic right shift.
UOpPtr lower_shift(const UOp& u) {
  const UOpPtr &a = u.src[0], &c = u.src[1];
  const DType dt = u.dtype;
  const UOpPtr out = shift_out_of_range(c);
  const UOpPtr shifted = UOp::make(u.op, dt, {a, shift_guard(c)});
  const bool arithmetic = u.op == Op::SHR && !dt.is_unsigned();
  const UOpPtr beyond =
      arithmetic ? UOp::make(Op::SHR, dt, {a, splat_int(dt, dt.base().bits() - 1)}) : splat_int(dt, 0);
  return where(out, beyond, shifted);
}

std::string shift_unlowered(const UOp& u) {
  const UOpPtr& c = u.src[1];
  if (!shift_out_of_range(c)) return "";
  if (c->op == Op::WHERE && shift_guard(c->src[2]) == c) return "";
  return "the count may lie outside [0, bits)";
}

// ---- float to integer casts --------------------------------------------------------
// Exact in every float type: 0, 256 and powers of two up to 2^63.
double cast_floor(DType to) { return static_cast<double>(int_lowest(to)); }
double cast_ceiling(DType to) { return static_cast<double>(int_highest(to)) + 1.0; }

// Does x truncate into `to`'s range? Every x in (lowest - 1, lowest] truncates to
// lowest, which saturation gives too, so "lowest < x" suffices; false for NaN.
UOpPtr cast_in_range(const UOpPtr& x, DType to) {
  const DType from = x->dtype;
  return land(splat_float(from, cast_floor(to)) < x, x < splat_float(from, cast_ceiling(to)));
}

UOpPtr cast_guard(const UOpPtr& x, DType to) {
  return where(cast_in_range(x, to), x, splat_float(x->dtype, 0.0));
}

// Truncates toward zero, saturates at `to`'s range, NaN gives 0 (llvm.fptosi.sat).
UOpPtr lower_float_cast(const UOp& u) {
  const UOpPtr& x = u.src[0];
  const DType to = u.dtype;
  const UOpPtr below = to.is_unsigned() ? splat_int(to, 0)  // NaN gives 0 = lowest already
                                        : where(ne(x, x), splat_int(to, 0), splat_int(to, int_lowest(to)));
  const UOpPtr saturated =
      where(splat_float(x->dtype, cast_floor(to)) < x, splat_int(to, int_highest(to)), below);
  return where(cast_in_range(x, to), UOp::make(Op::CAST, to, {cast_guard(x, to)}), saturated);
}

bool float_to_int(const UOp& u) {
  return u.op == Op::CAST && u.src[0]->dtype.is_float() && !u.dtype.is_float() && !u.dtype.is_bool();
}

std::string cast_unlowered(const UOp& u) {
  const UOpPtr& x = u.src[0];
  if (x->op == Op::CONST) {
    const double v = x->const_value();
    if (v > cast_floor(u.dtype) && v < cast_ceiling(u.dtype)) return "";
  }
  if (x->op == Op::WHERE && cast_guard(x->src[1], u.dtype) == x) return "";
  return "a NaN or out-of-range float has no plain conversion";
}

// ---- float max ----------------------------------------------------------------------
UOpPtr lower_float_max(const UOp& u) {
  const UOpPtr &a = u.src[0], &b = u.src[1];
  const UOpPtr zero = splat_float(u.dtype, 0.0);
  const UOpPtr larger = where(a < b, b, a);                                // a when a is NaN
  const UOpPtr zeros = where(land(eq(a, b), eq(a, zero)), a + b, larger);  // -0 + +0 = +0
  return where(ne(b, b), b, zeros);
}

// What half_widening (codegen/half_widening.cpp) should have rewritten: arithmetic on a
// half, or a CAST between a half and anything but Float32. No plain instruction does either.
std::string unwidened_half(const UOp& u) {
  bool half = u.dtype.is_half();
  for (const UOpPtr& s : u.src) half = half || s->dtype.is_half();
  if (!half) return "";
  if (u.op == Op::CAST) {
    const bool f32 = u.dtype.base() == DType::Float32 || u.src[0]->dtype.base() == DType::Float32;
    return f32 ? "" : "a half converts to and from Float32 only; half_widening must run first";
  }
  if (is_alu(u.op) && u.op != Op::WHERE)
    return "arithmetic on a half computes in Float32; half_widening must run first";
  return "";
}

}  // namespace

std::string unlowered_numerics(const UOp& u, bool float_max_instruction) {
  if (const std::string why = unwidened_half(u); !why.empty()) return why;
  switch (u.op) {
    case Op::IDIV:
    case Op::MOD: return u.dtype.is_float() ? "" : division_unlowered(u);
    case Op::SHL:
    case Op::SHR: return u.dtype.is_float() ? "" : shift_unlowered(u);
    case Op::MAX:
      if (float_max_instruction && u.dtype.scalar == Scalar::Float32) return "";
      return u.dtype.is_float() ? "float MAX propagates NaN and orders -0 below +0, no plain instruction does"
                                : "";
    case Op::CAST: return float_to_int(u) ? cast_unlowered(u) : "";
    default: return "";
  }
}

namespace {

struct MaxInstruction {
  bool present;
};

UOpPtr lower(const UOpPtr& u, bool float_max_instruction) {
  if (unlowered_numerics(*u, float_max_instruction).empty() || !unwidened_half(*u).empty()) return nullptr;
  switch (u->op) {
    case Op::IDIV:
    case Op::MOD: return lower_division(*u);
    case Op::SHL:
    case Op::SHR: return lower_shift(*u);
    case Op::MAX: return lower_float_max(*u);
    case Op::CAST: return lower_float_cast(*u);
    default: return nullptr;
  }
}

const PatternMatcher& numeric_rules() {
  static const PatternMatcher pm(
      "numeric_lowering", {{UPat::ops({Op::IDIV, Op::MOD, Op::SHL, Op::SHR, Op::MAX, Op::CAST}, "u"),
                            [](const Match& m) { return lower(m["u"], m.ctx<MaxInstruction>().present); }}});
  return pm;
}

}  // namespace

UOpPtr lower_numerics(const UOpPtr& kernel, bool float_max_instruction) {
  MaxInstruction ctx{float_max_instruction};
  return graph_rewrite(kernel, numeric_rules(), ctx);
}

}  // namespace loom
