#pragma once
// bfloat16 and float16 rounding written from the IEEE 754 definition (scale,
// round the significand to nearest even, encode), independent of
// include/loom/half.hpp's and the emitter's bit formulations, so the kernel and
// reference interpreters and the tests check those against it. Tests-only.
#include "ir/uop.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

namespace loom::half_ref {

// A binary interchange format: p significant bits (the leading one included) and
// `ebits` exponent bits.
struct Format {
  int p, ebits;
  int bias() const { return (1 << (ebits - 1)) - 1; }
};
inline constexpr Format kBF16{8, 8}, kF16{11, 5};
inline Format format_of(DType dt) { return dt.scalar == Scalar::BFloat16 ? kBF16 : kF16; }

// x's bits rounded to `f` from the definition: |x| = n 2^q with q the weight of the
// last kept bit (the exponent of x's leading bit, or emin for subnormals, minus p - 1),
// n = round-half-even(|x| / 2^q), and a result past the largest finite value is inf.
// NaN: sign, all-ones exponent, the quiet bit, then the top payload bits. The scalings
// are exact powers of two and the rounding is the FPU's default (to nearest, ties to
// even) on a double holding at most 2^25: adding and removing 2^52 leaves the integer
// nearest. No libm and builtins only (the test files build at -O0, and a library
// function parsed there stays unoptimised), so 2^33 calls take seconds.
inline double pow2(int k) { return __builtin_bit_cast(double, static_cast<uint64_t>(k + 1023) << 52); }
inline uint16_t ieee_round(uint32_t w, Format f) {
  const uint32_t sign = (w >> 31) << 15, inf = ((1u << f.ebits) - 1) << (f.p - 1);
  const uint32_t e32 = (w >> 23) & 0xff, m32 = w & 0x7fffff;
  if (e32 == 0xff && m32 != 0)
    return static_cast<uint16_t>(sign | inf | (1u << (f.p - 2)) | (m32 >> (24 - f.p)));
  if (e32 == 0xff) return static_cast<uint16_t>(sign | inf);
  if (e32 == 0 && m32 == 0) return static_cast<uint16_t>(sign);
  const double a = __builtin_fabs(static_cast<double>(__builtin_bit_cast(float, w)));  // exact
  // The leading bit's exponent: float's field, or for a float subnormal m 2^-149, 31 - clz(m) - 149.
  const int lead = e32 == 0 ? 31 - __builtin_clz(m32) - 149 : static_cast<int>(e32) - 127;
  const int emin = 1 - f.bias(), q = (lead > emin ? lead : emin) - (f.p - 1);
  volatile double scaled = a * pow2(-q) + 0x1p52;  // volatile: the two steps round as written
  const double n = scaled - 0x1p52;
  const double largest = (pow2(f.p) - 1) * pow2(f.bias() - (f.p - 1));
  if (n * pow2(q) > largest) return static_cast<uint16_t>(sign | inf);
  const auto count = static_cast<uint32_t>(n);
  if (count < (1u << (f.p - 1))) return static_cast<uint16_t>(sign | count);  // subnormal (or 0)
  const bool carried = count == (1u << f.p);
  const uint32_t biased = static_cast<uint32_t>(q + (f.p - 1) + f.bias()) + (carried ? 1 : 0);
  const uint32_t mantissa = (carried ? count >> 1 : count) - (1u << (f.p - 1));
  return static_cast<uint16_t>(sign | (biased << (f.p - 1)) | mantissa);
}

// 16-bit pattern -> float from the definition: (-1)^s 2^(e - bias) (1 + m / 2^(p-1)),
// subnormals 2^emin m / 2^(p-1); a NaN keeps its payload, quiet.
inline float ieee_widen(uint16_t h, Format f) {
  const int mbits = f.p - 1;
  const uint32_t e = (h >> mbits) & ((1u << f.ebits) - 1), m = h & ((1u << mbits) - 1);
  const bool negative = (h >> 15) != 0;
  if (e == (1u << f.ebits) - 1) {
    if (m == 0) return negative ? -INFINITY : INFINITY;
    const uint32_t payload = (m << (23 - mbits)) | (f.ebits == 8 ? 0 : 0x400000);  // f16: quieted
    return __builtin_bit_cast(float, (negative ? 0x80000000u : 0) | 0x7f800000u | payload);
  }
  const double v =
      e == 0 ? std::ldexp(static_cast<double>(m), 1 - f.bias() - mbits)
             : std::ldexp(1.0 + std::ldexp(static_cast<double>(m), -mbits), static_cast<int>(e) - f.bias());
  return static_cast<float>(negative ? -v : v);
}

// v (a double holding a float32 or wider value) converted to the half dtype `dt` as
// CAST does: to float32 first, then rounded once; returned exactly as a double.
inline double round_half(DType dt, double v) {
  const Format f = format_of(dt);
  return ieee_widen(ieee_round(__builtin_bit_cast(uint32_t, static_cast<float>(v)), f), f);
}
inline uint16_t half_bits(DType dt, double v) {
  return ieee_round(__builtin_bit_cast(uint32_t, static_cast<float>(v)), format_of(dt));
}

}  // namespace loom::half_ref
