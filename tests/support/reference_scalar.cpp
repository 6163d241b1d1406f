#include "support/reference_scalar.hpp"

#include "support/half_reference.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace loom::ref {

namespace {
bool is_signed(DType dt) { return dt.scalar == Scalar::Int32 || dt.scalar == Scalar::Int64; }
// Two's complement arithmetic is done in uint64, where overflow is defined.
uint64_t bits_of(int64_t v) { return static_cast<uint64_t>(v); }
int64_t from_bits(uint64_t v) { return static_cast<int64_t>(v); }

[[noreturn]] void unsupported(Op op, DType dt, std::string_view expected) {
  throw Error(
      fmt::format("reference interpreter: {} on {}: expected {}", op_name(op), to_string(dt), expected));
}

// SHL and SHR: a count outside [0, bits) gives 0, or -1 for SHR of a negative signed value
// (an arithmetic shift by the whole width leaves only sign bits).
int64_t shift(Op op, DType dt, int64_t a, int64_t count) {
  const bool in_range = count >= 0 && count < dt.bits();
  if (op == Op::SHL) return in_range ? wrap_int(dt, from_bits(bits_of(a) << count)) : 0;
  if (in_range) return a >> count;  // a is sign-extended if signed, non-negative if not
  return is_signed(dt) && a < 0 ? -1 : 0;
}

// IDIV and MOD truncate (UInt8 and Bool are stored non-negative, so this is unsigned
// division for them); by zero gives 0, and INT_MIN / -1 wraps to INT_MIN.
int64_t divide(Op op, DType dt, int64_t a, int64_t b) {
  if (b == 0) return 0;
  if (b == -1) return op == Op::IDIV ? wrap_int(dt, from_bits(0 - bits_of(a))) : 0;
  return op == Op::IDIV ? a / b : a % b;
}

// llvm.maximum: a NaN operand gives NaN, and -0 counts as less than +0.
template <class T>
T maximum(T a, T b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
  if (a == b) return std::signbit(a) ? b : a;
  return a > b ? a : b;
}

// T is float for Float32, so every op rounds to float exactly once; the <cmath>
// overloads for float are exp2f, log2f, sinf, tanhf, sqrtf, truncf and powf.
template <class T>
T float_op(Op op, DType dt, T a, T b, T c) {
  switch (op) {
    case Op::NEG: return -a;
    case Op::EXP: return std::exp(a);
    case Op::EXP2: return std::exp2(a);
    case Op::LOG2: return std::log2(a);
    case Op::SIN: return std::sin(a);
    case Op::COS: return std::cos(a);
    case Op::TANH: return std::tanh(a);
    case Op::ERF: return std::erf(a);
    case Op::SIGMOID: return static_cast<T>(1 / (1 + std::exp(-static_cast<double>(a))));
    case Op::SQRT: return std::sqrt(a);
    case Op::RECIP: return T(1) / a;
    case Op::TRUNC: return std::trunc(a);
    case Op::ADD: return a + b;
    case Op::SUB: return a - b;
    case Op::MUL: return a * b;
    case Op::FDIV: return a / b;
    case Op::MAX: return maximum(a, b);
    case Op::POW: return std::pow(a, b);
    case Op::MULACC: {  // unfused: the product rounds before the add
      const T product = a * b;
      return product + c;
    }
    case Op::IDIV:
    case Op::MOD:
    case Op::AND:
    case Op::OR:
    case Op::XOR:
    case Op::SHL:
    case Op::SHR: unsupported(op, dt, "an integer or Bool dtype");
    default: unsupported(op, dt, "an elementwise arithmetic op");
  }
}
}  // namespace

int64_t wrap_int(DType dt, int64_t v) {
  switch (dt.scalar) {
    case Scalar::Bool: return v & 1;
    case Scalar::UInt8: return v & 0xFF;
    case Scalar::Int32: return static_cast<int32_t>(static_cast<uint32_t>(bits_of(v)));
    case Scalar::Int64: return v;
    default:
      throw Error(
          fmt::format("reference interpreter: wrap_int of {}: expected an integer dtype", to_string(dt)));
  }
}

double round_float(DType dt, double v) {
  if (dt.is_half()) return half_ref::round_half(dt, v);  // through float32, rounded once
  return dt.scalar == Scalar::Float32 ? static_cast<double>(static_cast<float>(v)) : v;
}

double float_alu(Op op, DType dt, double a, double b, double c) {
  if (dt.is_half())  // computes in float32, the result rounded once (docs/semantics.md)
    return round_float(
        dt, float_op<float>(op, dt, static_cast<float>(a), static_cast<float>(b), static_cast<float>(c)));
  if (dt.scalar == Scalar::Float32)
    return float_op<float>(op, dt, static_cast<float>(a), static_cast<float>(b), static_cast<float>(c));
  if (dt.scalar == Scalar::Float64) return float_op<double>(op, dt, a, b, c);
  unsupported(op, dt, "a float dtype");
}

int64_t int_alu(Op op, DType dt, int64_t a, int64_t b, int64_t c) {
  switch (op) {
    case Op::NEG: return wrap_int(dt, from_bits(0 - bits_of(a)));
    case Op::ADD: return wrap_int(dt, from_bits(bits_of(a) + bits_of(b)));
    case Op::SUB: return wrap_int(dt, from_bits(bits_of(a) - bits_of(b)));
    case Op::MUL: return wrap_int(dt, from_bits(bits_of(a) * bits_of(b)));
    case Op::MULACC: return wrap_int(dt, from_bits(bits_of(a) * bits_of(b) + bits_of(c)));
    case Op::IDIV:
    case Op::MOD: return divide(op, dt, a, b);
    case Op::MAX: return std::max(a, b);  // normalised values: signed, or unsigned for UInt8 and Bool
    case Op::AND: return a & b;
    case Op::OR: return a | b;
    case Op::XOR: return a ^ b;
    case Op::SHL:
    case Op::SHR: return shift(op, dt, a, b);
    case Op::EXP:
    case Op::EXP2:
    case Op::LOG2:
    case Op::SIN:
    case Op::COS:
    case Op::TANH:
    case Op::SIGMOID:
    case Op::ERF:
    case Op::SQRT:
    case Op::RECIP:
    case Op::TRUNC:
    case Op::FDIV:
    case Op::POW: unsupported(op, dt, "a float dtype");
    default: unsupported(op, dt, "an elementwise arithmetic op");
  }
}

bool float_compare(Op op, double a, double b) {
  switch (op) {
    case Op::CMPLT: return a < b;
    case Op::CMPNE: return a != b;
    case Op::CMPEQ: return a == b;
    default: unsupported(op, DType::Float64, "a comparison");
  }
}

bool int_compare(Op op, int64_t a, int64_t b) {
  switch (op) {
    case Op::CMPLT: return a < b;
    case Op::CMPNE: return a != b;
    case Op::CMPEQ: return a == b;
    default: unsupported(op, DType::Int64, "a comparison");
  }
}

int64_t cast_float_to_int(DType to, double v) {
  if (to.is_bool()) return v != 0;  // NaN != 0 holds
  if (std::isnan(v)) return 0;
  const double t = std::trunc(v);
  switch (to.scalar) {
    case Scalar::UInt8: return static_cast<int64_t>(std::clamp(t, 0.0, 255.0));
    case Scalar::Int32: return static_cast<int64_t>(std::clamp(t, -2147483648.0, 2147483647.0));
    case Scalar::Int64:  // 2^63 itself is out of range; -2^63 is the minimum
      if (t >= 0x1p63) return std::numeric_limits<int64_t>::max();
      if (t < -0x1p63) return std::numeric_limits<int64_t>::min();
      return static_cast<int64_t>(t);
    default: unsupported(Op::CAST, to, "an integer or Bool target");
  }
}

int64_t cast_int_to_int(DType to, int64_t v) { return to.is_bool() ? v != 0 : wrap_int(to, v); }

double cast_int_to_float(DType to, int64_t v) {
  // Int64 -> float converts directly: going through double would round twice.
  if (to.is_half()) return round_float(to, static_cast<float>(v));  // through float32, as CAST
  return to.scalar == Scalar::Float32 ? static_cast<double>(static_cast<float>(v)) : static_cast<double>(v);
}

double cast_float_to_float(DType to, double v) { return round_float(to, v); }

}  // namespace loom::ref
