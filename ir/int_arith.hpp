#pragma once
// Exact integer helpers shared by constant folding, range analysis and the
// simplifier: the values a dtype holds, two's-complement wrapping without C++
// undefined behaviour, and 128-bit arithmetic to ask whether an exact result
// fits a dtype (when it does, the hardware's wrapping arithmetic gives it exactly).
#include <loom/dtype.hpp>

#include <cstdint>
#include <limits>
#include <utility>

namespace loom {

__extension__ typedef __int128 Wide;  // exact products and sums of int64 values

// [min, max] of a scalar integer or bool dtype (int64's range for anything else).
inline std::pair<int64_t, int64_t> int_range(DType dt) {
  switch (dt.scalar) {
    case Scalar::Bool: return {0, 1};
    case Scalar::UInt8: return {0, 255};
    case Scalar::Int32: return {std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
    default: return {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()};
  }
}

// A scalar integer value (not a vector, not a pointer): what index arithmetic is made of.
inline bool is_int_scalar(DType dt) { return dt.is_int() && dt.lanes == 1 && !dt.ptr; }

inline bool fits(DType dt, Wide v) {
  const auto [lo, hi] = int_range(dt);
  return v >= lo && v <= hi;
}

// `v` modulo 2^bits as `dt` holds it: sign-extended for Int32/Int64, zero-extended
// for UInt8 and Bool (1 bit). Conversions of unsigned to signed are modular in C++20.
inline int64_t wrap_int(DType dt, uint64_t v) {
  switch (dt.scalar) {
    case Scalar::Bool: return static_cast<int64_t>(v & 1u);
    case Scalar::UInt8: return static_cast<int64_t>(v & 0xffu);
    case Scalar::Int32: return static_cast<int32_t>(static_cast<uint32_t>(v));
    default: return static_cast<int64_t>(v);
  }
}

// Ring operations modulo 2^bits of `dt` (no signed overflow anywhere).
inline int64_t wrap_add(DType dt, int64_t a, int64_t b) {
  return wrap_int(dt, static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
inline int64_t wrap_mul(DType dt, int64_t a, int64_t b) {
  return wrap_int(dt, static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}
inline int64_t wrap_neg(DType dt, int64_t a) { return wrap_int(dt, 0u - static_cast<uint64_t>(a)); }

}  // namespace loom
