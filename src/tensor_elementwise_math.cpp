// Transcendental and power functions, built from the IR's float primitives (EXP EXP2
// LOG2 SIN COS TANH SIGMOID SQRT RECIP POW; codegen lowers the Float32 ones but SQRT and RECIP to
// ir/float_math.hpp's code, the rest are libm's), with decompositions chosen for accuracy:
// each comment states the error it keeps, and tests/src/test_tensor_elementwise_math.cpp
// measures it against higher-precision libm. Integer inputs compute in Float32.
#include "src/composites.hpp"
#include "src/tensor_ops.hpp"

#include <bit>
#include <cmath>
#include <limits>
#include <numbers>

namespace loom {

using namespace detail;

namespace {
bool is_f32(const UOpPtr& x) { return x->dtype == DType::Float32; }

}  // namespace

// Float floor from TRUNC: one lower where truncation went up (negative non-integers).
UOpPtr detail::floor_of(const UOpPtr& x) {
  const UOpPtr t = alu(Op::TRUNC, {x});
  return where(x < t, t - const_as(x, 1), t);
}

namespace {

// max(lo, min(x, hi)) keeping NaN (llvm.maximum propagates it).
UOpPtr clamp_of(const UOpPtr& x, double lo, double hi) {
  return umax(-umax(-x, const_as(x, -hi)), const_as(x, lo));
}

// 2^n for an integral float n inside the normal exponent range, exactly: the biased
// exponent shifted into place and reinterpreted.
UOpPtr pow2(const UOpPtr& n) {
  const UOpPtr i = cast(n, is_f32(n) ? DType::Int32 : DType::Int64);
  const UOpPtr biased = i + const_as(i, is_f32(n) ? 127 : 1023);
  return UOp::make(Op::BITCAST, n->dtype, {alu(Op::SHL, {biased, const_as(i, is_f32(n) ? 23 : 52)})});
}

}  // namespace

// Float32: one EXP node, which codegen lowers to ir/float_math.hpp's e^x (one Cody-Waite
// reduction, a polynomial for e^r, an exact 2^n), so a graph holds one node per exp instead
// of the form's thirty to build, hash and differentiate. Float64: exp(x) = 2^r' * 2^n1 * 2^n2
// with n = round(x*log2(e)), r = x - n*ln2 with ln2 in two parts (Cody and Waite; n*LN2_HI is
// exact), r' = r*log2(e), |r| <= ln2/2. exp2(x*log2(e)) directly would lose about |x|/2 ulps
// to the rounding of the product; this keeps ~1 ulp over the whole range. 2^n is applied as
// two exact halves so results near overflow and in the subnormal range round once; x is
// clamped first (the clamp is past both ends of the range).
UOpPtr detail::exp_of(const UOpPtr& x) {
  if (is_f32(x)) return alu(Op::EXP, {x});
  const double ln2_hi = 6.93147180369123816490e-01, ln2_lo = 1.90821492927058770002e-10;  // 32 bits + rest
  const UOpPtr xc = clamp_of(x, -1000, 1000);
  const UOpPtr n = floor_of(xc * const_as(x, std::numbers::log2e) + const_as(x, 0.5));
  const UOpPtr r = (xc - n * const_as(x, ln2_hi)) - n * const_as(x, ln2_lo);
  const UOpPtr n1 = floor_of(n * const_as(x, 0.5));
  return (alu(Op::EXP2, {r * const_as(x, std::numbers::log2e)}) * pow2(n1)) * pow2(n - n1);
}

// log(x) = log2(x) * ln2: libm's log2 is accurate relative to its result, also near x = 1.
UOpPtr detail::log_of(const UOpPtr& x) { return alu(Op::LOG2, {x}) * const_as(x, std::numbers::ln2); }

// expm1(y) for |y| <= 1.1 by its Taylor series y + y^2 * sum_{k>=2} y^(k-2)/k!, cut where
// the next term is below 2^-60 of the result (degree 20 for Float64, 12 for Float32). Unlike
// exp(y) - 1 it keeps full relative accuracy as y goes to 0: y is exact and the y^2 part is the
// smaller one, so its roundings shrink.
namespace {
UOpPtr expm1_series(const UOpPtr& y) {
  const int degree = is_f32(y) ? 12 : 20;
  double factorial = 1;
  for (int k = 2; k <= degree; ++k) factorial *= k;
  UOpPtr series = const_as(y, 1 / factorial);
  for (int k = degree - 1; k >= 2; --k) {
    factorial /= k + 1;
    series = series * y + const_as(y, 1 / factorial);
  }
  return y + (y * y) * series;
}
}  // namespace

// log1p by Kahan's form: with u = 1 + x rounded, log(u) * x / (u - 1) recovers what the
// rounding of u lost, so the result stays accurate as x goes to 0; where u == 1 the answer is
// x itself. The divisor is 1 on the branch not taken (u == 1, u == inf), so that branch holds
// no 0/0 or inf/inf; log(inf) * inf gives log1p(inf) = inf. Its gradient is the composite's
// rule, 1 / (1 + x) (src/gradient.cpp).
UOpPtr detail::log1p_of(const UOpPtr& x) {
  const UOpPtr one = const_as(x, 1), u = x + one, exact = eq(u, one);
  const UOpPtr divisor = where(alu(Op::OR, {exact, eq(u, const_as(x, INFINITY))}), one, u - one);
  return where(exact, x, log_of(u) * (x / divisor));
}

// expm1 by its series where |x| <= 1.1 (full relative accuracy near 0) and e^x - 1 beyond,
// where the subtraction loses nothing. Each branch sees 0 where it is not taken, so neither
// overflows there. Its gradient is the composite's rule, e^x = y + 1 (src/gradient.cpp).
UOpPtr detail::expm1_of(const UOpPtr& x) {
  const UOpPtr far = const_as(x, 1.1) < umax(x, -x), zero = const_as(x, 0);
  return where(far, exp_of(where(far, x, zero)) - const_as(x, 1), expm1_series(where(far, zero, x)));
}

// tanh(|x|) in two forms (musl's split at 0.55): near 0, -t/(t + 2) with t = expm1(-2|x|),
// where (1 - u)/(1 + u) with u = exp(-2|x|) would cancel; beyond, 1 - 2u/(1 + u), whose small
// term's error hardly reaches the result and which is exactly 1 once u rounds away (no NaN
// for any x). The sign is put back last; a zero returns itself (tanh(-0) = -0).
// Float32 is TANH, one node, which codegen lowers to ir/float_math.hpp's -t/(t + 2) with
// t = expm1(-2|x|) from one range reduction: a tensor graph of an LSTM or a GELU does not
// carry (and build, key and drop every step) the form's hundred nodes per tanh.
UOpPtr detail::tanh_of(const UOpPtr& x) {
  if (is_f32(x)) return alu(Op::TANH, {x});
  const UOpPtr a = umax(x, -x), y = a * const_as(x, -2), u = exp_of(y), one = const_as(x, 1);
  const UOpPtr t = expm1_series(y);
  const UOpPtr near_zero = -t / (t + const_as(x, 2)), far = one - (u + u) / (one + u);
  const UOpPtr magnitude = where(const_as(x, 0.55) < a, far, near_zero);
  return where(eq(x, const_as(x, 0)), x, where(x < const_as(x, 0), -magnitude, magnitude));
}

// sigmoid(x) = 1/(1 + e) for x >= 0 and e/(1 + e) for x < 0, with e = exp(-|x|) <= 1: never
// inf/inf, and e^x's subnormal tail survives for very negative x. Float32 is SIGMOID, one
// node, which codegen lowers to the same form (ir/float_math.hpp's sigmoid_f32).
UOpPtr detail::sigmoid_of(const UOpPtr& x) {
  if (is_f32(x)) return alu(Op::SIGMOID, {x});
  const UOpPtr e = exp_of(where(x < const_as(x, 0), x, -x)), one = const_as(x, 1);  // -|x| (NaN stays)
  return where(x < const_as(x, 0), e, one) / (one + e);
}

// cos(x) = sin(2x) / (2 sin(x)): 2x is exact and libm's sin reduces every argument exactly, so
// both sines keep their relative accuracy for all x, near the zeros of cos too (where
// sin(x + pi/2) loses it to the rounding of the sum): three roundings, within 2.5 ulps. x = ±0
// (0/0) gives 1. In the top binade, where 2x overflows, 1 - 2 sin(x/2)^2 instead (x/2 is exact;
// within 4 ulps of 1 absolutely, so not relatively near the zeros of cos). Two SIN calls.
// Float32 is COS, which codegen lowers to ir/float_math.hpp's cos_f32 (one Payne-Hanek
// reduction, computed in Float64: within 0.5 ulp plus a trace for every float, no libm call).
UOpPtr detail::cos_of(const UOpPtr& x) {
  if (is_f32(x)) return alu(Op::COS, {x});
  const UOpPtr one = const_as(x, 1), a = umax(x, -x);
  const UOpPtr huge = eq(a + a, const_as(x, std::numeric_limits<double>::infinity()));
  const UOpPtr s1 = alu(Op::SIN, {where(huge, x * const_as(x, 0.5), x + x)}), s = alu(Op::SIN, {x});
  const UOpPtr halves = one - (s1 + s1) * s1;
  return where(eq(x, const_as(x, 0)), one, where(huge, halves, s1 / (s + s)));
}

namespace {

// a^e for integers by binary powering over e's bits, wrapping like the hardware (as
// PyTorch's integer pow does); for e < 0, PyTorch's rule: 1 for a = 1, ±1 for a = -1, else 0.
UOpPtr int_pow(const UOpPtr& a, const UOpPtr& e) {
  const bool is_signed = !e->dtype.is_unsigned();
  const int width = e->dtype.bits() - (is_signed ? 1 : 0);
  const int bits = std::min(
      width, static_cast<int>(std::bit_width(static_cast<uint64_t>(std::max<int64_t>(e->vmax(), 0)))));
  UOpPtr result = const_as(a, 1), power = a;
  for (int i = 0; i < bits; ++i) {
    if (i > 0) power = power * power;
    const UOpPtr bit_set =
        ne(alu(Op::AND, {e, const_as(e, static_cast<double>(int64_t{1} << i))}), const_as(e, 0));
    result = where(bit_set, result * power, result);
  }
  if (!is_signed) return result;
  const UOpPtr odd = ne(alu(Op::AND, {e, const_as(e, 1)}), const_as(e, 0));
  const UOpPtr minus_one = where(odd, const_as(a, -1), const_as(a, 1));
  const UOpPtr negative =
      where(eq(a, const_as(a, 1)), const_as(a, 1), where(eq(a, const_as(a, -1)), minus_one, const_as(a, 0)));
  return where(e < const_as(e, 0), negative, result);
}

// a^e for a known e >= 0: multiplications only, square-and-multiply.
UOpPtr int_pow_const(const UOpPtr& a, uint64_t e) {
  UOpPtr result, power = a;
  for (; e != 0; e >>= 1) {
    if (e & 1) result = result ? result * power : power;
    if (e > 1) power = power * power;
  }
  return result ? result : const_as(a, 1);
}

// PyTorch's special cases of a float tensor to a scalar power (x*x for 2, sqrt for 0.5, ...),
// so the results match bit for bit; any other exponent uses POW (libm's pow).
UOpPtr float_pow_const(const UOpPtr& x, double e) {
  if (e == 2) return x * x;
  if (e == 3) return x * x * x;
  if (e == 0.5) return alu(Op::SQRT, {x});
  if (e == -0.5) return alu(Op::RECIP, {alu(Op::SQRT, {x})});
  if (e == -1) return alu(Op::RECIP, {x});
  if (e == -2) return alu(Op::RECIP, {x * x});
  return alu(Op::POW, {x, const_as(x, e)});
}

// BFloat16 and Float16 compute in Float32 (docs/semantics.md), as integers do.
UOpPtr as_float(const Tensor& t, const char* op) {
  const UOpPtr& x = uop(t, op);
  return cast_uop(x, x->dtype.is_half() ? DType::Float32 : float_dtype(x->dtype));
}

// The result of a function computed by as_float: a half input's dtype again, rounded once.
Tensor float_result(const Tensor& t, const UOpPtr& r) {
  return make_tensor(t.dtype().is_half() ? cast_uop(r, t.dtype()) : r);
}
}  // namespace

Tensor Tensor::exp() const { return float_result(*this, exp_of(as_float(*this, "exp"))); }
Tensor Tensor::log() const { return float_result(*this, log_of(as_float(*this, "log"))); }
Tensor Tensor::exp2() const { return float_result(*this, alu(Op::EXP2, {as_float(*this, "exp2")})); }
Tensor Tensor::log2() const { return float_result(*this, alu(Op::LOG2, {as_float(*this, "log2")})); }
Tensor Tensor::sqrt() const { return float_result(*this, alu(Op::SQRT, {as_float(*this, "sqrt")})); }
// 1/sqrt(x) as PyTorch's CPU rsqrt: two correctly rounded steps, within 2 ulps.
Tensor Tensor::rsqrt() const {
  return float_result(*this, alu(Op::RECIP, {alu(Op::SQRT, {as_float(*this, "rsqrt")})}));
}
Tensor Tensor::reciprocal() const {
  return float_result(*this, alu(Op::RECIP, {as_float(*this, "reciprocal")}));
}
Tensor Tensor::log1p() const { return float_result(*this, log1p_of(as_float(*this, "log1p"))); }
Tensor Tensor::expm1() const { return float_result(*this, expm1_of(as_float(*this, "expm1"))); }

Tensor Tensor::sin() const { return float_result(*this, alu(Op::SIN, {as_float(*this, "sin")})); }
Tensor Tensor::cos() const { return float_result(*this, cos_of(as_float(*this, "cos"))); }
Tensor Tensor::tanh() const { return float_result(*this, tanh_of(as_float(*this, "tanh"))); }
Tensor Tensor::sigmoid() const { return float_result(*this, sigmoid_of(as_float(*this, "sigmoid"))); }

// Floats (or a float operand): POW. Integers (and Bool, as Int32): an integer result by
// binary powering, as PyTorch's int ** int.
Tensor Tensor::pow(const Tensor& exponent) const {
  const DType dt = arithmetic_dtype(*this, exponent, "pow");
  auto [a, e] = operands(*this, exponent, dt, "pow");
  return make_tensor(dt.is_float() ? alu(Op::POW, {a, e}) : int_pow(a, e));
}

// An integer tensor to a whole, non-negative power stays an integer tensor (like PyTorch with
// a Python int exponent; loom cannot tell 2 from 2.0, so both keep the dtype); a negative whole
// power is an error, as in PyTorch; a fractional power gives Float32.
Tensor Tensor::pow(double exponent) const {
  const UOpPtr& x = uop(*this, "pow");
  const bool whole = std::isfinite(exponent) && exponent == std::trunc(exponent);
  if (x->dtype.is_float() || !whole)
    return float_result(*this, float_pow_const(as_float(*this, "pow"), exponent));
  if (exponent < 0)
    throw Error(
        fmt::format("pow: a {} tensor to the negative integer power {} is not allowed (as in PyTorch); "
                    "cast it to a float dtype first",
                    scalar_name(x->dtype.scalar), exponent));
  if (exponent >= 0x1p64)
    throw Error(
        fmt::format("pow: the integer exponent {} of a {} tensor is out of range (expected below 2^64)",
                    exponent, scalar_name(x->dtype.scalar)));
  const UOpPtr a = x->dtype.is_bool() ? cast_uop(x, DType::Int32) : x;
  return make_tensor(int_pow_const(a, static_cast<uint64_t>(exponent)));
}

Tensor exp(const Tensor& t) { return t.exp(); }
Tensor log(const Tensor& t) { return t.log(); }
Tensor sqrt(const Tensor& t) { return t.sqrt(); }

}  // namespace loom
