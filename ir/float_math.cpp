// Float32 exp and exp2 from UOps (see float_math.hpp).
//
//   exp2(x) = p(r) * 2^n        n = round(x), r = x - n (exact), |r| <= 1/2
//   exp(x)  = q(r) * 2^n        n = round(x log2 e), r = x - n ln2 (Cody-Waite), |r| <= ln2/2
//
// Both arguments are clamped past the ends of the range first (NaN passes), so
// |n| <= 152. n comes from one float add: x + 1.5*2^23 rounds x to an integer in
// the low bits of the mantissa (for |x| < 2^22), and taking 1.5*2^23 away again
// leaves it as a float. The product with 2^n is LDEXP, which rounds once, so results
// near overflow and in the subnormal range round once.
#include "ir/float_math.hpp"

#include <cmath>
#include <limits>
#include <numbers>
#include <vector>

namespace loom {

namespace {

constexpr double kRoundShift = 0x1.8p23;         // x + this has round(x) in its low mantissa bits
constexpr int64_t kRoundShiftBits = 0x4B400000;  // its bits as an Int32

// A constant for a form over `like`: scalar in a kernel, broadcast to like's
// shape in a tensor graph (where an elementwise op takes its shape from its operands).
UOpPtr constant(const UOpPtr& like, DType dt, double v) {
  const UOpPtr c = const_like(dt, v);
  if (!like->shape() || like->shape()->empty()) return c;
  const Shape ones(like->shape()->size(), 1);
  return UOp::make(Op::EXPAND, dt, {UOp::make(Op::RESHAPE, dt, {c}, ones)}, *like->shape());
}
UOpPtr f32(const UOpPtr& like, double v) { return constant(like, DType::Float32, v); }
UOpPtr i32(const UOpPtr& like, int64_t v) { return constant(like, DType::Int32, static_cast<double>(v)); }
UOpPtr mulacc(const UOpPtr& a, const UOpPtr& b, const UOpPtr& c) { return alu(Op::MULACC, {a, b, c}); }
UOpPtr bits_of(const UOpPtr& x) { return UOp::make(Op::BITCAST, DType::Int32, {x}); }
// The NaN of an invalid operation (log of a negative, 0/0): on x86 its sign bit is set,
// and libm returns the same, so code that reads a NaN's sign (tanh copies x's) agrees.
UOpPtr invalid_nan(const UOpPtr& like) { return f32(like, -std::numeric_limits<double>::quiet_NaN()); }

// 2^k for an Int32 k in [-126, 127]: the biased exponent in place.
UOpPtr pow2(const UOpPtr& k) {
  return UOp::make(Op::BITCAST, DType::Float32, {alu(Op::SHL, {k + i32(k, 127), i32(k, 23)})});
}

// p * 2^n for a whole Float32 n, rounding once: LDEXP, one instruction on AVX-512
// (vscalefps), 2^n made as two exact halves elsewhere (codegen/llvm_emit.cpp).
UOpPtr scale_by_pow2(const UOpPtr& p, const UOpPtr& n) { return alu(Op::LDEXP, {p, n}); }

// (e^(s r) - 1) / r by its Taylor polynomial of degree `degree` - 1 in Horner form, so
// r * it is e^(s r) - 1 to degree `degree`.
UOpPtr expm1_quotient(const UOpPtr& r, double s, int degree) {
  double factorial = 1;
  for (int k = 2; k <= degree; ++k) factorial *= k;
  UOpPtr p = f32(r, std::pow(s, degree) / factorial);
  for (int k = degree - 1; k >= 1; --k) {
    factorial /= k + 1;
    p = mulacc(r, p, f32(r, std::pow(s, k) / factorial));
  }
  return p;
}

// e^(s r) by its Taylor polynomial of degree 7 (exp2's, s = ln2). For |s r| <= 0.35 the
// first term left out, (s r)^8 / 8!, is below 0.05 ulp of the result.
UOpPtr exp_taylor(const UOpPtr& r, double s) { return mulacc(r, expm1_quotient(r, s, 7), f32(r, 1)); }

// e^r for |r| <= ln2/2 (exp's) as 1 + r (1 + r q(r)), q of degree 4 fitted for the least
// maximum relative error (3.1e-9, 0.05 ulp, against 5.6e-9 for Taylor's degree 7). q goes
// by Estrin's scheme (pairs of terms, then r^4), the last two steps by Horner's, so 1 and
// r are added exactly inside fused multiply-adds: the chain of dependent operations is 5
// long instead of 7, at 0.72 ulp of error instead of 0.75 (simulated over 200k points). A
// vector exp waits on its chain more than on its ports, so the shorter one is faster
// (docs/performance.md). exp2 keeps Taylor's form: its 2^(k + 1/2) are correctly rounded
// by it, which tests compare exactly.
constexpr double kExpQuotient[] = {0x1.fffffb97a3a06p-2, 0x1.555491033a2bep-3, 0x1.5558f2f5da798p-5,
                                   0x1.123a1fe9e768ep-7, 0x1.6a23d13fb9810p-10};
UOpPtr exp_minimax(const UOpPtr& r) {
  const auto c = [&](int k) { return f32(r, kExpQuotient[k - 2]); };
  const UOpPtr r2 = r * r, r4 = r2 * r2;
  const UOpPtr q = mulacc(r4, c(6), mulacc(r2, mulacc(r, c(5), c(4)), mulacc(r, c(3), c(2))));
  const UOpPtr one = f32(r, 1);
  return mulacc(r, mulacc(r, q, one), one);
}

// n = round(x log2 e) and r = x - n ln2 (Cody and Waite): ln2_hi has 9 significant bits,
// so n * ln2_hi is exact for |n| <= 2^15 and x - n ln2_hi cancels exactly; r is then
// within an ulp of x - n ln2. `shifted` holds n in its low mantissa bits.
struct Reduced {
  UOpPtr shifted, n, r;
};
Reduced reduce_by_ln2(const UOpPtr& x) {
  constexpr double ln2_hi = 0.693359375, ln2_lo = -2.12194440054690583e-4;
  const UOpPtr shifted = mulacc(x, f32(x, std::numbers::log2e), f32(x, kRoundShift));
  const UOpPtr n = shifted - f32(x, kRoundShift);
  return {shifted, n, mulacc(n, f32(x, -ln2_lo), mulacc(n, f32(x, -ln2_hi), x))};
}
UOpPtr integer_in(const UOpPtr& shifted) { return bits_of(shifted) - i32(shifted, kRoundShiftBits); }

}  // namespace

UOpPtr clamp_keeping_nan(const UOpPtr& x, double lo, double hi) {
  const UOpPtr low = constant(x, x->dtype, lo), high = constant(x, x->dtype, hi);
  const UOpPtr above_low = where(x < low, low, x);
  return where(high < above_low, high, above_low);
}

// exp2: 2^-151 rounds to 0 and 2^129 overflows, so the clamp changes no result.
UOpPtr exp2_f32(const UOpPtr& x) {
  const UOpPtr xc = clamp_keeping_nan(x, -151, 129);
  const UOpPtr n = (xc + f32(x, kRoundShift)) - f32(x, kRoundShift);
  return scale_by_pow2(exp_taylor(xc - n, std::numbers::ln2), n);
}

// exp: e^-104 rounds to 0 and e^89 overflows. Computing 2^(x log2 e) instead would
// lose about |x|/2 ulps to the rounding of the product.
UOpPtr exp_f32(const UOpPtr& x) {
  const Reduced d = reduce_by_ln2(clamp_keeping_nan(x, -104, 89));
  return scale_by_pow2(exp_minimax(d.r), d.n);
}

// e^y - 1 = 2^n (e^r - 1) + (2^n - 1) for y <= 0, with e^r - 1 = r * q(r): relatively
// accurate near 0 (n = 0, r = y), and one rounding in the last multiply-add. Below -20
// the result is -1 either way, so y is clamped there (|n| <= 29, 2^n normal).
UOpPtr expm1_nonpositive(const UOpPtr& y) {
  const Reduced d = reduce_by_ln2(where(y < f32(y, -20), f32(y, -20), y));
  const UOpPtr s = pow2(integer_in(d.shifted));
  return mulacc(s, d.r * expm1_quotient(d.r, 1, 8), s - f32(y, 1));
}

// tanh(|x|) = -t / (t + 2) with t = e^(-2|x|) - 1, in [-1, 0]: no cancellation (t + 2 >= 1),
// exactly 1 once t rounds to -1, never NaN for a number; x's sign bit replaces the
// magnitude's last (tanh(-0) = -0, tanh(0) = 0 though -t/(t + 2) is -0 there).
UOpPtr tanh_f32(const UOpPtr& x) {
  const UOpPtr sign = i32(x, -0x80000000LL), bits = bits_of(x);
  const UOpPtr a = UOp::make(Op::BITCAST, DType::Float32, {alu(Op::AND, {bits, i32(x, 0x7fffffff)})});
  const UOpPtr t = expm1_nonpositive(a * f32(x, -2));
  const UOpPtr magnitude = -t / (t + f32(x, 2));
  return UOp::make(
      Op::BITCAST, DType::Float32,
      {alu(Op::OR, {alu(Op::AND, {bits_of(magnitude), i32(x, 0x7fffffff)}), alu(Op::AND, {bits, sign})})});
}

// sigmoid(x) = 1/(1 + e) for x >= 0 and e/(1 + e) for x < 0, with e = e^-|x| <= 1: never
// inf/inf, and e^x's subnormal tail survives for very negative x (NaN passes: x < 0 is false,
// -x is NaN).
UOpPtr sigmoid_f32(const UOpPtr& x) {
  const UOpPtr negative = x < f32(x, 0), one = f32(x, 1);
  const UOpPtr e = exp_f32(where(negative, x, -x));
  return where(negative, e, one) / (one + e);
}

UOpPtr clenshaw(const std::vector<double>& coefficients, const UOpPtr& s) {
  const UOpPtr two_s = s + s;
  UOpPtr b1 = constant(s, s->dtype, coefficients.back()), b2;
  for (size_t j = coefficients.size() - 2; j >= 1; --j) {
    UOpPtr b = two_s * b1 + constant(s, s->dtype, coefficients[j]);
    if (b2) b = b - b2;
    b2 = b1;
    b1 = b;
  }
  return s * b1 + constant(s, s->dtype, coefficients[0]) - b2;
}

UOpPtr erf_series(const UOpPtr& x, int last) {
  auto term = [](int n) {
    const double sign = n % 2 ? -1 : 1;
    return sign * 2 / std::sqrt(std::numbers::pi) / (std::tgamma(n + 1) * (2 * n + 1));
  };
  const UOpPtr x2 = x * x;
  UOpPtr p = constant(x, x->dtype, term(last));
  for (int n = last - 1; n >= 0; --n) p = p * x2 + constant(x, x->dtype, term(n));
  return x * p;
}

// erf(x) for Float32, as the front end builds Float64's (src/tensor_activation.cpp): for |x| <
// 0.5 the series 2/sqrt(pi) sum_n (-1)^n x^(2n+1) / (n! (2n+1)) to n = 7 (below 2^-30 of the
// result; x itself, so erf(-0) = -0); beyond, sign(x) (1 - erfc(|x|)) with erfc(z) = e^(-z^2)
// t Q(t), t = 2 / (2 + z), Q a Chebyshev fit in s = (t - mid) / half fitted by tools/fit_erf.py
// (relative error of t Q 1.3e-8) for z in [0.5, 4] (erf rounds to 1 past 4). NaN takes the
// second branch and stays NaN; ±inf clamps to ±1.
UOpPtr erf_f32(const UOpPtr& x) {
  constexpr double z_max = 4, t_lo = 1.0 / 3.0, t_hi = 0.8;
  static const std::vector<double> fit{0.57478646612577393633,      0.17901825098848688033,
                                       0.015589331930882489999,     0.00029159002516387973008,
                                       -0.000070672754178294408265, -2.5698423918475812284e-6,
                                       5.3111382323040234282e-7,    7.151613735268246226e-9};
  const UOpPtr a = umax(x, -x);
  const UOpPtr z = clamp_keeping_nan(a, 0.5, z_max);
  const UOpPtr t = f32(z, 2) / (f32(z, 2) + z);
  const double mid = (t_lo + t_hi) / 2, half = (t_hi - t_lo) / 2;
  const UOpPtr s = (t - f32(t, mid)) * f32(t, 1 / half);
  const UOpPtr erfc = exp_f32(-(z * z)) * t * clenshaw(fit, s);
  const UOpPtr magnitude = f32(x, 1) - erfc;
  return where(a < f32(a, 0.5), erf_series(x, 7), where(x < f32(x, 0), -magnitude, magnitude));
}

// log2(x) = k + log2(m) with m in [sqrt(2)/2, sqrt(2)) and f = m - 1 exact, as FreeBSD's
// log2f does it: log(1 + f) = f - f^2/2 + s (f^2/2 + R(s^2)) with s = f / (2 + f) and R a
// minimax polynomial; f - f^2/2 is split into a 12-bit head, whose product with log2 e's
// 12-bit head is exact, and the rest, so the product by log2 e adds no rounding that
// counts. Subnormal x is scaled by 2^25 first; x < 0, 0, inf and NaN are set at the end.
UOpPtr log2_f32(const UOpPtr& x) {
  constexpr double lg1 = 0xaaaaaa.0p-24, lg2 = 0xccce13.0p-25, lg3 = 0x91e9ee.0p-25, lg4 = 0xf89e26.0p-26;
  constexpr double log2e_hi = 0x1.716p+0, log2e_lo = -0x1.7135a8p-13;
  const UOpPtr tiny = x < f32(x, 0x1p-126);
  const UOpPtr bits = bits_of(where(tiny, x * f32(x, 0x1p25), x));
  const UOpPtr mantissa = alu(Op::AND, {bits, i32(x, 0x007fffff)});
  const UOpPtr above_sqrt2 = alu(Op::AND, {mantissa + i32(x, 0x4afb0d), i32(x, 0x800000)});  // 0 or 2^23
  const UOpPtr m = UOp::make(Op::BITCAST, DType::Float32,
                             {alu(Op::OR, {mantissa, alu(Op::XOR, {above_sqrt2, i32(x, 0x3f800000)})})});
  const UOpPtr k = alu(Op::SHR, {bits, i32(x, 23)}) + alu(Op::SHR, {above_sqrt2, i32(x, 23)}) -
                   where(tiny, i32(x, 127 + 25), i32(x, 127));
  const UOpPtr f = m - f32(x, 1), half_f2 = f32(x, 0.5) * f * f;
  const UOpPtr s = f / (f + f32(x, 2)), z = s * s, w = z * z;
  const UOpPtr poly = z * mulacc(w, f32(x, lg3), f32(x, lg1)) + w * mulacc(w, f32(x, lg4), f32(x, lg2));
  const UOpPtr hi =
      UOp::make(Op::BITCAST, DType::Float32, {alu(Op::AND, {bits_of(f - half_f2), i32(x, -0x1000)})});
  const UOpPtr lo = ((f - hi) - half_f2) + s * (half_f2 + poly);
  const UOpPtr result = ((lo + hi) * f32(x, log2e_lo) + lo * f32(x, log2e_hi) + hi * f32(x, log2e_hi)) +
                        cast(k, DType::Float32);
  constexpr double inf = std::numeric_limits<double>::infinity();
  const UOpPtr signed_out = where(x < f32(x, 0), invalid_nan(x), result);
  return where(x < f32(x, inf), where(eq(x, f32(x, 0)), f32(x, -inf), signed_out), x);
}

namespace {

UOpPtr abs_f32(const UOpPtr& x) {
  return UOp::make(Op::BITCAST, DType::Float32, {alu(Op::AND, {bits_of(x), i32(x, 0x7fffffff)})});
}

// Float64 helpers of pow, which computes in Float64 (see pow_f32).
UOpPtr f64(const UOpPtr& like, double v) { return constant(like, DType::Float64, v); }
UOpPtr i64(const UOpPtr& like, int64_t v) { return constant(like, DType::Int64, static_cast<double>(v)); }
UOpPtr bits64(const UOpPtr& x) { return UOp::make(Op::BITCAST, DType::Int64, {x}); }
UOpPtr from_bits64(const UOpPtr& i) { return UOp::make(Op::BITCAST, DType::Float64, {i}); }

// log2(a) for a Float64 a >= 0 that came from a Float32, to about 2^-50 relative: a = 2^k m
// with m in [sqrt(2)/2, sqrt(2)), log2(m) = s * sum_j 2 log2(e) z^j / (2j + 1), s = f/(2+f),
// z = s^2 <= 0.0295 (nine terms: the tenth is below 2^-50). 0 gives -inf, inf and NaN themselves.
UOpPtr log2_f64(const UOpPtr& a) {
  const UOpPtr bits = bits64(a);
  const UOpPtr mantissa = alu(Op::AND, {bits, i64(a, 0x000fffffffffffffLL)});
  const UOpPtr above_sqrt2 = alu(Op::AND, {mantissa + i64(a, 0x95f619980c433LL), i64(a, 1LL << 52)});
  const UOpPtr m =
      from_bits64(alu(Op::OR, {mantissa, alu(Op::XOR, {above_sqrt2, i64(a, 0x3ff0000000000000LL)})}));
  const UOpPtr k = alu(Op::SHR, {bits, i64(a, 52)}) + alu(Op::SHR, {above_sqrt2, i64(a, 52)}) - i64(a, 1023);
  const UOpPtr f = m - f64(a, 1), s = f / (f + f64(a, 2)), z = s * s;
  UOpPtr series = f64(a, 2 * std::numbers::log2e / 17);
  for (int j = 7; j >= 0; --j) series = mulacc(z, series, f64(a, 2 * std::numbers::log2e / (2 * j + 1)));
  const UOpPtr value = mulacc(s, series, cast(cast(k, DType::Int32), DType::Float64));
  constexpr double inf = std::numeric_limits<double>::infinity();
  return where(a < f64(a, inf), where(eq(a, f64(a, 0)), f64(a, -inf), value), a);
}

// 2^t for a Float64 t, to about 2^-50 relative, over the range a Float32 result needs: t is
// clamped to [-200, 200] (NaN passes), n = round(t), r = t - n exact, 2^r by its Taylor
// polynomial of degree 11 (the next term is below 2^-45 of it), 2^n exact.
UOpPtr exp2_f64(const UOpPtr& t) {
  constexpr double round_shift = 0x1.8p52;
  const UOpPtr tc = clamp_keeping_nan(t, -200, 200);
  const UOpPtr shifted = tc + f64(t, round_shift);
  const UOpPtr r = tc - (shifted - f64(t, round_shift));
  double factorial = 39916800;  // 11!
  UOpPtr p = f64(t, std::pow(std::numbers::ln2, 11) / factorial);
  for (int k = 10; k >= 0; --k) {
    factorial /= k + 1;
    p = mulacc(r, p, f64(t, std::pow(std::numbers::ln2, k) / factorial));
  }
  const UOpPtr n = bits64(shifted) - i64(t, 0x4338000000000000LL);  // minus round_shift's bits
  return p * from_bits64(alu(Op::SHL, {n + i64(t, 1023), i64(t, 52)}));
}

}  // namespace

// pow(x, y) = ±2^(y log2|x|). The product's error becomes a relative error of the result
// times |y log2|x|| (up to 150), so Float32 cannot hold it: both steps compute in Float64 to
// ~2^-45 and the result rounds once to Float32. Then C's special cases: 1 for y = 0 or x = 1
// (even with NaN) and for |x| = 1, y = ±inf; NaN for a finite x < 0 and a y that is not an
// integer; the sign of x for an odd integer y (-0 and -inf too). Every other case (0, inf,
// NaN operands) comes out of the formula itself: log2 0 = -inf, 2^inf = inf, 2^-inf = 0.
UOpPtr pow_f32(const UOpPtr& x, const UOpPtr& y) {
  const UOpPtr a = cast(abs_f32(x), DType::Float64);
  const UOpPtr yd = cast(y, DType::Float64);
  const UOpPtr magnitude = cast(exp2_f64(yd * log2_f64(a)), DType::Float32);
  const UOpPtr whole = eq(alu(Op::TRUNC, {y}), y), half = y * f32(y, 0.5);
  const UOpPtr odd = land(whole, ne(alu(Op::TRUNC, {half}), half));
  const UOpPtr negative = x < f32(x, 0), x_sign = alu(Op::AND, {bits_of(x), i32(x, -0x80000000LL)});
  const UOpPtr signed_magnitude = UOp::make(
      Op::BITCAST, DType::Float32, {alu(Op::OR, {bits_of(magnitude), where(odd, x_sign, i32(x, 0))})});
  constexpr double inf = std::numeric_limits<double>::infinity();
  const UOpPtr unit = eq(a, f64(x, 1));
  const UOpPtr one = alu(
      Op::OR, {alu(Op::OR, {eq(y, f32(y, 0)), eq(x, f32(x, 1))}), land(unit, eq(abs_f32(y), f32(y, inf)))});
  const UOpPtr not_real = land(land(negative, ne(x, f32(x, -inf))), ne(alu(Op::TRUNC, {y}), y));
  return where(one, f32(x, 1), where(not_real, invalid_nan(x), signed_magnitude));
}

namespace {

// 2/pi in 24-bit chunks: 2/pi = sum_j kTwoOverPi[j] 2^(-24 (j + 1)).
constexpr int64_t kTwoOverPi[] = {0xa2f983, 0x6e4e44, 0x1529fc, 0x2757d1, 0xf534dd,
                                  0xc0db62, 0x95993c, 0x439041, 0xfe5163};
constexpr int kSkippable = 4;  // chunks a Float32 exponent can make whole multiples of 4
constexpr int kTerms = 5;      // chunks used after them: 120 bits of 2/pi

// round(v) for a Float64 |v| < 2^51: the add rounds v to an integer, the subtraction is exact.
UOpPtr round_f64(const UOpPtr& v) { return (v + f64(v, 0x1.8p52)) - f64(v, 0x1.8p52); }

// The angle |x| as (q + r) quarter turns modulo a whole turn.
struct QuarterTurns {
  UOpPtr q;  // Int64 whose two low bits are the quadrant
  UOpPtr r;  // Float64 in [-1/2, 1/2] (and a trace)
};

// |x| 2/pi modulo 4 for a Float32 |x|, by Payne and Hanek's method in Float64, exact enough
// for every float: |x| = m 2^e with a 24-bit integer m, so each term, m times a 24-bit chunk
// of 2/pi, is exact. Chunk j's term is a multiple of 4 when e - 24 (j + 1) >= 2, so the
// leading such chunks are skipped (chosen by selects on e, no table: it vectorises). Then
// term0 < 2^50, term1 < 2^26, term2 < 4 (for large e; smaller for small e). Their integer
// parts go to q; their fractions, term2's down to 2^-46, sum exactly (multiples of 2^-46, or
// for small e with cancellation only towards 0, which is exact), so near a multiple of pi/2
// r keeps its relative precision; the small rest adds with relative rounding only. 2/pi's
// bits past the five chunks used are below 2^-70 quarter turns.
QuarterTurns reduce_quarter_turns(const UOpPtr& ax) {
  const UOpPtr bits = bits_of(ax);
  const UOpPtr biased = alu(Op::SHR, {bits, i32(ax, 23)});  // ax >= 0: the sign bit is clear
  const UOpPtr normal = ne(biased, i32(ax, 0));
  const UOpPtr mantissa = alu(Op::AND, {bits, i32(ax, 0x7fffff)});
  const UOpPtr m = cast(where(normal, alu(Op::OR, {mantissa, i32(ax, 0x800000)}), mantissa), DType::Float64);
  const UOpPtr e = where(normal, biased, i32(ax, 1)) - i32(ax, 150);  // |x| = m 2^e
  std::vector<UOpPtr> skip(kSkippable + 1);  // skip[j]: e asks to skip at least j chunks
  for (int j = 1; j <= kSkippable; ++j) skip[j] = i32(ax, 24 * j + 1) < e;  // e >= 24 (j - 1) + 26
  UOpPtr skipped_bits = i32(ax, 0);
  for (int j = 1; j <= kSkippable; ++j) skipped_bits = where(skip[j], i32(ax, 24 * j), skipped_bits);
  // m 2^k0 with k0 = e - skipped_bits - 24 >= -173: exact, and the terms stay normal.
  const UOpPtr k0 = cast(e - skipped_bits - i32(ax, 24), DType::Int64);
  const UOpPtr scaled = m * from_bits64(alu(Op::SHL, {k0 + i64(ax, 1023), i64(ax, 52)}));
  std::vector<UOpPtr> terms;
  for (int t = 0; t < kTerms; ++t) {
    const double below = std::ldexp(1.0, -24 * t);  // chunk t + j sits 24 t bits below chunk j
    UOpPtr chunk = f64(ax, static_cast<double>(kTwoOverPi[t]) * below);
    for (int j = 1; j <= kSkippable; ++j)
      chunk = where(skip[j], f64(ax, static_cast<double>(kTwoOverPi[j + t]) * below), chunk);
    terms.push_back(scaled * chunk);
  }
  const UOpPtr w0 = round_f64(terms[0]), w1 = alu(Op::TRUNC, {terms[1]});
  const UOpPtr hi2 = (terms[2] + f64(ax, 96)) - f64(ax, 96);   // rounded to a multiple of 2^-46
  const UOpPtr s = ((terms[0] - w0) + (terms[1] - w1)) + hi2;  // in [-1/2, 11/2)
  const UOpPtr n = round_f64(s);
  const UOpPtr tail = ((terms[2] - hi2) + terms[3]) + terms[4];
  // w0 + w1 + n < 2^51 is a whole number >= 0: plus 2^52, it is the mantissa's low bits.
  return {bits64(((w0 + w1) + n) + f64(ax, 0x1p52)), (s - n) + tail};
}

// sin a (top = 13) or cos a (top = 12) for |a| <= pi/4 by its Taylor polynomial through
// a^top: the first term left out is below 2^-44 of the result.
UOpPtr sin_or_cos_polynomial(const UOpPtr& a, int top) {
  const UOpPtr z = a * a;
  double factorial = 1;
  for (int k = 2; k <= top; ++k) factorial *= k;
  const auto coefficient = [](int k, double k_factorial) { return (k / 2 % 2 ? -1 : 1) / k_factorial; };
  UOpPtr p = f64(a, coefficient(top, factorial));
  for (int k = top - 2; k >= 0; k -= 2) {
    factorial /= (k + 1) * (k + 2);
    p = mulacc(z, p, f64(a, coefficient(k, factorial)));
  }
  return top % 2 ? a * p : p;
}

// sin x (quarter_turns = 0) or cos x = sin(x + pi/2) (quarter_turns = 1) for a Float32 x:
// |x| reduced to quarter turns q + r, then the polynomial of r pi/2 that quadrant
// q + quarter_turns asks for, its sign, and for sin the sign of x (so sin(-0) = -0). In
// Float64 throughout, so the reduction's tail and the polynomial leave the Float32 result
// within 0.5 ulp and a trace. inf and NaN give NaN.
UOpPtr sin_cos_f32(const UOpPtr& x, int quarter_turns) {
  const UOpPtr ax = abs_f32(x);
  const QuarterTurns d = reduce_quarter_turns(ax);
  const UOpPtr a = d.r * f64(x, std::numbers::pi / 2);
  const UOpPtr q = d.q + i64(x, quarter_turns);
  const UOpPtr odd = ne(alu(Op::AND, {q, i64(x, 1)}), i64(x, 0));
  const UOpPtr polynomial = where(odd, sin_or_cos_polynomial(a, 12), sin_or_cos_polynomial(a, 13));
  const UOpPtr quadrant_sign = alu(Op::SHL, {alu(Op::AND, {q, i64(x, 2)}), i64(x, 62)});  // quadrants 2, 3
  UOpPtr out = cast(from_bits64(alu(Op::XOR, {bits64(polynomial), quadrant_sign})), DType::Float32);
  if (quarter_turns == 0)
    out = UOp::make(Op::BITCAST, DType::Float32,
                    {alu(Op::XOR, {bits_of(out), alu(Op::AND, {bits_of(x), i32(x, -0x80000000LL)})})});
  return where(ax < f32(x, std::numeric_limits<double>::infinity()), out,
               f32(x, std::numeric_limits<double>::quiet_NaN()));
}

}  // namespace

UOpPtr sin_f32(const UOpPtr& x) { return sin_cos_f32(x, 0); }
UOpPtr cos_f32(const UOpPtr& x) { return sin_cos_f32(x, 1); }

}  // namespace loom
