#pragma once
// loom::bfloat16 and loom::float16: the element types of DType::BFloat16 and
// DType::Float16 as C++ values (from_vector, to_vector, item). Each holds its
// 16 bits; conversion from float rounds to nearest, ties to even, and keeps a
// NaN a NaN (sign and top payload bits kept, quiet bit set, as the CPU's
// vcvtneps2bf16 and vcvtps2ph do); conversion to float is exact
// (docs/semantics.md, "Half-precision dtypes").
#include <cstdint>

namespace loom {

namespace half_bits {

// float -> bfloat16 bits: bfloat16 is float's top 16 bits, so rounding adds
// just under half of the dropped 16 bits' weight, plus 1 when the kept part is
// odd (ties to even); a carry moves into the exponent and, at the top, to inf.
constexpr uint16_t bf16_from_f32(float f) {
  const uint32_t w = __builtin_bit_cast(uint32_t, f);
  if ((w & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((w >> 16) | 0x40u);
  return static_cast<uint16_t>((w + 0x7fffu + ((w >> 16) & 1u)) >> 16);
}

constexpr float f32_from_bf16(uint16_t h) {
  return __builtin_bit_cast(float, static_cast<uint32_t>(h) << 16);
}

// float -> float16 bits: 5 exponent bits (bias 15) and 10 mantissa bits, with
// subnormals below 2^-14 (multiples of 2^-24).
constexpr uint16_t f16_from_f32(float f) {
  const uint32_t w = __builtin_bit_cast(uint32_t, f);
  const uint32_t sign = (w >> 16) & 0x8000u, a = w & 0x7fffffffu;
  uint32_t r = 0;
  if (a > 0x7f800000u) {
    r = 0x7e00u | ((a >> 13) & 0x3ffu);  // NaN: quiet, top payload bits
  } else if (a >= 0x477ff000u) {
    r = 0x7c00u;                  // 65520 and above (half way past 65504, which is odd) round to inf
  } else if (a >= 0x38800000u) {  // normal: rebias the exponent 127 -> 15, round off 13 bits
    r = (a - 0x38000000u + 0xfffu + ((a >> 13) & 1u)) >> 13;
  } else {  // subnormal or 0: the integer count of 2^-24, rounded
    const uint32_t m = (a & 0x7fffffu) | (a >= 0x800000u ? 0x800000u : 0u);
    const uint32_t e = a >= 0x800000u ? a >> 23 : 1u;
    const uint32_t s = 126u - e < 31u ? 126u - e : 31u;  // |f| = m 2^(e-150) = (m >> s) 2^-24
    const uint32_t q = m >> s, rem = m & ((1u << s) - 1u), half = 1u << (s - 1u);
    r = q + ((rem > half || (rem == half && (q & 1u))) ? 1u : 0u);
  }
  return static_cast<uint16_t>(sign | r);
}

// float16 bits -> float, exactly (a NaN becomes quiet, keeping its payload).
constexpr float f32_from_f16(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1fu) return __builtin_bit_cast(float, sign | 0x7f800000u | (m << 13) | (m ? 0x400000u : 0u));
  if (e != 0) return __builtin_bit_cast(float, sign | ((e + 112u) << 23) | (m << 13));
  const float mag = static_cast<float>(m) * 0x1p-24f;  // exact: m < 2^10
  return sign ? -mag : mag;
}

}  // namespace half_bits

struct bfloat16 {
  uint16_t bits = 0;
  constexpr bfloat16() = default;
  constexpr explicit bfloat16(float f) : bits(half_bits::bf16_from_f32(f)) {}
  static constexpr bfloat16 from_bits(uint16_t b) {
    bfloat16 h;
    h.bits = b;
    return h;
  }
  constexpr explicit operator float() const { return half_bits::f32_from_bf16(bits); }
  constexpr explicit operator double() const { return half_bits::f32_from_bf16(bits); }
  friend constexpr bool operator==(bfloat16 a, bfloat16 b) { return float(a) == float(b); }
};

struct float16 {
  uint16_t bits = 0;
  constexpr float16() = default;
  constexpr explicit float16(float f) : bits(half_bits::f16_from_f32(f)) {}
  static constexpr float16 from_bits(uint16_t b) {
    float16 h;
    h.bits = b;
    return h;
  }
  constexpr explicit operator float() const { return half_bits::f32_from_f16(bits); }
  constexpr explicit operator double() const { return half_bits::f32_from_f16(bits); }
  friend constexpr bool operator==(float16 a, float16 b) { return float(a) == float(b); }
};

static_assert(sizeof(bfloat16) == 2 && sizeof(float16) == 2);

}  // namespace loom
