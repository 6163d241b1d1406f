#pragma once
// Element types: the eight scalar kinds of the public API, plus the vector width
// (lanes) and pointer-ness that kernel-level UOps need. BFloat16 and Float16 are
// storage types: arithmetic on them computes in Float32 and rounds once
// (docs/semantics.md, "Half-precision dtypes").
#include <loom/dim.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace loom {

// New kinds go at the end: the numbering is part of cache keys and graph files.
enum class Scalar : uint8_t { Bool, UInt8, Int32, Int64, Float32, Float64, BFloat16, Float16 };

struct DType {
  Scalar scalar = Scalar::Float32;
  uint16_t lanes = 1;  // >1 for SIMD vectors (VECTORIZE, upcast loads), at most kMaxLanes
  bool ptr = false;    // a pointer to `scalar` elements (buffer params, INDEX)

  static const DType Bool, UInt8, Int32, Int64, Float32, Float64, BFloat16, Float16;

  // Lanes a vector dtype holds at most: a register tile's products summed in pairs (6 x 2
  // registers of 16 float32 accumulators, 2 terms each: 384).
  static constexpr int kMaxLanes = 1024;

  constexpr DType vec(int n) const { return DType{scalar, static_cast<uint16_t>(n), ptr}; }
  constexpr DType ptr_to() const { return DType{scalar, lanes, true}; }
  constexpr DType base() const { return DType{scalar, 1, false}; }
  constexpr DType deref() const { return DType{scalar, lanes, false}; }  // what a pointer points at
  constexpr bool is_float() const {
    return scalar == Scalar::Float32 || scalar == Scalar::Float64 || is_half();
  }
  // BFloat16 or Float16: 2-byte storage whose arithmetic happens in Float32.
  constexpr bool is_half() const { return scalar == Scalar::BFloat16 || scalar == Scalar::Float16; }
  constexpr bool is_int() const {
    return scalar == Scalar::UInt8 || scalar == Scalar::Int32 || scalar == Scalar::Int64;
  }
  constexpr bool is_bool() const { return scalar == Scalar::Bool; }
  constexpr bool is_unsigned() const { return scalar == Scalar::UInt8 || scalar == Scalar::Bool; }
  constexpr int itemsize() const {
    switch (scalar) {
      case Scalar::Bool:
      case Scalar::UInt8: return 1;
      case Scalar::BFloat16:
      case Scalar::Float16: return 2;
      case Scalar::Int32:
      case Scalar::Float32: return 4;
      case Scalar::Int64:
      case Scalar::Float64: return 8;
    }
    return 0;  // unreachable for a valid Scalar; -Wswitch names a new kind left out here
  }
  constexpr int bits() const { return scalar == Scalar::Bool ? 1 : itemsize() * 8; }
  // Rank in PyTorch's promotion lattice; BFloat16 and Float16 share a rank (promote()).
  constexpr int priority() const {
    switch (scalar) {
      case Scalar::Bool: return 0;
      case Scalar::UInt8: return 1;
      case Scalar::Int32: return 2;
      case Scalar::Int64: return 3;
      case Scalar::BFloat16:
      case Scalar::Float16: return 4;
      case Scalar::Float32: return 5;
      case Scalar::Float64: return 6;
    }
    return 0;
  }
  friend constexpr bool operator==(const DType&, const DType&) = default;
};

inline constexpr DType DType::Bool{Scalar::Bool};
inline constexpr DType DType::UInt8{Scalar::UInt8};
inline constexpr DType DType::Int32{Scalar::Int32};
inline constexpr DType DType::Int64{Scalar::Int64};
inline constexpr DType DType::Float32{Scalar::Float32};
inline constexpr DType DType::Float64{Scalar::Float64};
inline constexpr DType DType::BFloat16{Scalar::BFloat16};
inline constexpr DType DType::Float16{Scalar::Float16};

// Short names used in the IR text form and in error messages: "f32", "i64x8", "f32*".
std::string to_string(DType dt);
std::string_view scalar_name(Scalar s);
// Inverse of to_string; throws loom::Error on an unknown name.
DType parse_dtype(std::string_view text);

// PyTorch's promotion lattice (docs/semantics.md): Bool < UInt8 < Int32 < Int64 <
// {BFloat16, Float16} < Float32 < Float64, where BFloat16 with Float16 gives Float32
// (neither holds the other's values).
constexpr DType promote(DType a, DType b) {
  if (a.is_half() && b.is_half() && a.scalar != b.scalar) return DType::Float32;
  return a.priority() >= b.priority() ? a.base() : b.base();
}
// The dtype of `t op scalar` where the scalar is a C++ integer (is_float=false) or floating value.
constexpr DType promote_with_scalar(DType t, bool scalar_is_float) {
  if (scalar_is_float) return t.is_float() ? t.base() : DType::Float32;
  return t.is_bool() ? DType::Int32 : t.base();
}

}  // namespace loom
