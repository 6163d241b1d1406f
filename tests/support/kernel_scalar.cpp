#include "support/kernel_scalar.hpp"

#include "ir/float_math.hpp"
#include "ir/int_limits.hpp"
#include "support/half_reference.hpp"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

namespace loom::kernel_scalar {

namespace {
[[noreturn]] void fail(const std::string& what) { throw Error("kernel interpreter: " + what); }

std::string op_on(Op op, DType dt) { return std::string(op_name(op)) + " on " + to_string(dt); }

int64_t wrap(Scalar s, int64_t v) {
  switch (s) {
    case Scalar::Bool: return v & 1;
    case Scalar::UInt8: return v & 0xff;
    case Scalar::Int32: return static_cast<int32_t>(static_cast<uint32_t>(v));  // modular since C++20
    default: return v;
  }
}

// Halves: through float32, then rounded once (support/half_reference.hpp, from the IEEE definition).
double round_to(Scalar s, double v) {
  if (s == Scalar::BFloat16 || s == Scalar::Float16) return half_ref::round_half(DType{s}, v);
  return s == Scalar::Float32 ? static_cast<double>(static_cast<float>(v)) : v;
}

// Truncate toward zero, saturate at the target's range, NaN gives 0 (fptosi.sat).
int64_t float_to_int(double x, DType to) {
  if (to.is_bool()) return x != 0;  // NaN != 0 is true
  if (std::isnan(x)) return 0;
  const double t = std::trunc(x);
  if (t <= static_cast<double>(int_lowest(to))) return int_lowest(to);
  if (t >= static_cast<double>(int_highest(to)))
    return int_highest(to);  // Int64: 2^63 is the first out of range
  return static_cast<int64_t>(t);
}

// One rounding, straight from the integer (int64 -> double -> float would round twice).
double int_to_float(int64_t v, DType to) {
  if (to.is_half()) return half_ref::round_half(to, static_cast<float>(v));
  return to.scalar == Scalar::Float32 ? static_cast<double>(static_cast<float>(v)) : static_cast<double>(v);
}

uint64_t to_bits(const Value& v) {
  switch (v.dtype.scalar) {
    case Scalar::Float32: return std::bit_cast<uint32_t>(static_cast<float>(v.f));
    case Scalar::Float64: return std::bit_cast<uint64_t>(v.f);
    case Scalar::BFloat16:
    case Scalar::Float16: return half_ref::half_bits(v.dtype, v.f);
    case Scalar::Int32: return static_cast<uint32_t>(v.i);
    default: return static_cast<uint64_t>(v.i) & (v.dtype.itemsize() == 8 ? ~uint64_t{0} : 0xff);
  }
}

Value from_bits(DType dt, uint64_t bits) {
  if (dt.scalar == Scalar::Float32) return of_float(dt, std::bit_cast<float>(static_cast<uint32_t>(bits)));
  if (dt.scalar == Scalar::Float64) return of_float(dt, std::bit_cast<double>(bits));
  if (dt.is_half())
    return Value{dt.base(), 0, half_ref::ieee_widen(static_cast<uint16_t>(bits), half_ref::format_of(dt))};
  return of_int(dt, static_cast<int64_t>(bits));
}

double float_max(double a, double b) {  // llvm.maximum: NaN propagates, -0 < +0
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
  if (a == b) return std::signbit(a) ? b : a;
  return a > b ? a : b;
}

Value float_binary(Op op, DType dt, double a, double b) {
  switch (op) {
    case Op::ADD: return of_float(dt, a + b);
    case Op::SUB: return of_float(dt, a - b);
    case Op::MUL: return of_float(dt, a * b);
    case Op::FDIV: return of_float(dt, a / b);
    case Op::MAX: return of_float(dt, float_max(a, b));
    case Op::POW: return of_float(dt, std::pow(a, b));
    case Op::LDEXP: return of_float(dt, scaled_by_pow2(a, b));
    case Op::CMPLT: return of_int(DType::Bool, a < b);   // ordered: false with NaN
    case Op::CMPEQ: return of_int(DType::Bool, a == b);  // ordered
    case Op::CMPNE: return of_int(DType::Bool, a != b);  // unordered: true with NaN
    default: fail(op_on(op, dt) + " is not defined");
  }
}

int64_t shift(Op op, DType dt, int64_t a, int64_t count) {
  if (count < 0 || count >= dt.bits()) return op == Op::SHR && a < 0 ? -1 : 0;
  if (op == Op::SHL) return static_cast<int64_t>(static_cast<uint64_t>(a) << count);
  return a >> count;  // arithmetic on the sign-extended value; unsigned values are >= 0
}

Value int_binary(Op op, DType dt, int64_t a, int64_t b) {
  const uint64_t ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
  switch (op) {
    case Op::ADD: return of_int(dt, static_cast<int64_t>(ua + ub));
    case Op::SUB: return of_int(dt, static_cast<int64_t>(ua - ub));
    case Op::MUL: return of_int(dt, static_cast<int64_t>(ua * ub));
    case Op::IDIV:  // by zero gives 0; INT64_MIN / -1 wraps to INT64_MIN
      return of_int(dt, b == 0 ? 0 : b == -1 ? static_cast<int64_t>(0 - ua) : a / b);
    case Op::MOD: return of_int(dt, b == 0 || b == -1 ? 0 : a % b);
    case Op::MAX: return of_int(dt, a > b ? a : b);
    case Op::AND: return of_int(dt, a & b);
    case Op::OR: return of_int(dt, a | b);
    case Op::XOR: return of_int(dt, a ^ b);
    case Op::SHL:
    case Op::SHR: return of_int(dt, shift(op, dt, a, b));
    case Op::CMPLT: return of_int(DType::Bool, a < b);  // canonical values: unsigned types compare right
    case Op::CMPEQ: return of_int(DType::Bool, a == b);
    case Op::CMPNE: return of_int(DType::Bool, a != b);
    default: fail(op_on(op, dt) + " is not defined");
  }
}
}  // namespace

Value of_int(DType dt, int64_t v) {
  if (dt.is_float()) return Value{dt.base(), 0, int_to_float(v, dt)};
  return Value{dt.base(), wrap(dt.scalar, v), 0};
}

Value of_float(DType dt, double v) {
  if (dt.is_float()) return Value{dt.base(), 0, round_to(dt.scalar, v)};
  return Value{dt.base(), float_to_int(v, dt), 0};
}

Value zero(DType dt) { return of_int(dt, 0); }

Value of_const(const UOp& c) {
  if (const double* d = std::get_if<double>(&c.arg)) return of_float(c.dtype, *d);
  return of_int(c.dtype, c.arg_int());
}

bool truthy(const Value& v) {
  if (!v.dtype.is_bool()) fail("a condition must be bool, got " + to_string(v.dtype));
  return v.i != 0;
}

Value unary(Op op, const Value& a) {
  if (op == Op::NEG)
    return a.dtype.is_float() ? of_float(a.dtype, -a.f)
                              : of_int(a.dtype, static_cast<int64_t>(0 - static_cast<uint64_t>(a.i)));
  if (!a.dtype.is_float()) fail(op_on(op, a.dtype) + " is not defined (float only)");
  switch (op) {
    case Op::EXP: return of_float(a.dtype, std::exp(a.f));
    case Op::EXP2: return of_float(a.dtype, std::exp2(a.f));
    case Op::LOG2: return of_float(a.dtype, std::log2(a.f));
    case Op::SIN: return of_float(a.dtype, std::sin(a.f));
    case Op::COS: return of_float(a.dtype, std::cos(a.f));
    case Op::TANH: return of_float(a.dtype, std::tanh(a.f));
    case Op::ERF: return of_float(a.dtype, std::erf(a.f));
    case Op::SIGMOID: return of_float(a.dtype, 1 / (1 + std::exp(-a.f)));
    case Op::SQRT: return of_float(a.dtype, std::sqrt(a.f));
    case Op::RECIP: return of_float(a.dtype, 1.0 / a.f);
    case Op::TRUNC: return of_float(a.dtype, std::trunc(a.f));
    default: fail(std::string(op_name(op)) + " is not a unary op");
  }
}

Value binary(Op op, const Value& a, const Value& b) {
  if (a.dtype != b.dtype)
    fail(std::string(op_name(op)) + " on " + to_string(a.dtype) + " and " + to_string(b.dtype) +
         ": operands must have one dtype");
  return a.dtype.is_float() ? float_binary(op, a.dtype, a.f, b.f) : int_binary(op, a.dtype, a.i, b.i);
}

Value mulacc(const Value& a, const Value& b, const Value& c) {
  return binary(Op::ADD, binary(Op::MUL, a, b), c);
}

Value cast(const Value& a, DType to) {
  if (to.is_bool()) return of_int(to, a.dtype.is_float() ? a.f != 0 : a.i != 0);  // NaN gives true
  if (a.dtype.is_float()) return of_float(to, a.f);  // float: rounds; int: truncates and saturates
  return of_int(to, a.i);                            // int: wraps or extends; float: rounds once
}

Value bitcast(const Value& a, DType to) {
  if (a.dtype.itemsize() != to.itemsize())
    fail("BITCAST from " + to_string(a.dtype) + " to " + to_string(to) + ": sizes differ");
  return from_bits(to, to_bits(a));
}

Value reduce_identity(Op op, DType dt) {
  switch (op) {
    case Op::ADD: return zero(dt);
    case Op::MUL: return of_int(dt, 1);
    case Op::MAX:
      return dt.is_float() ? of_float(dt, -std::numeric_limits<double>::infinity())
                           : of_int(dt, int_lowest(dt));
    default: fail("REDUCE with " + op_on(op, dt) + ": expected ADD, MUL or MAX");
  }
}

Value load(DType dt, const void* p) {
  uint64_t bits = 0;
  std::memcpy(&bits, p, static_cast<size_t>(dt.itemsize()));  // little-endian host
  return from_bits(dt.base(), bits);
}

void store(void* p, const Value& v) {
  const uint64_t bits = to_bits(v);
  std::memcpy(p, &bits, static_cast<size_t>(v.dtype.itemsize()));
}

}  // namespace loom::kernel_scalar
