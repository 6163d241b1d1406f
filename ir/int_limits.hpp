#pragma once
// The range of an integer (or Bool) dtype's scalar, as int64: what saturating casts clamp
// to and what a signed division overflows at. Shared by codegen's numeric lowering and the
// kernel interpreter, which must agree on it.
#include <loom/dtype.hpp>

#include <cstdint>
#include <limits>

namespace loom {

inline int64_t int_lowest(DType dt) {
  switch (dt.scalar) {
    case Scalar::Int32: return std::numeric_limits<int32_t>::min();
    case Scalar::Int64: return std::numeric_limits<int64_t>::min();
    default: return 0;  // Bool, UInt8
  }
}

inline int64_t int_highest(DType dt) {
  switch (dt.scalar) {
    case Scalar::Bool: return 1;
    case Scalar::UInt8: return 255;
    case Scalar::Int32: return std::numeric_limits<int32_t>::max();
    default: return std::numeric_limits<int64_t>::max();
  }
}

}  // namespace loom
