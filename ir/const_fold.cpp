// Constant folding of one ALU op, CAST or BITCAST, with the semantics of
// docs/kernel-ir.md ("ALU semantics"): integers wrap at their width (computed in
// uint64, never as signed overflow), float32 results round to float after each
// op, IDIV/MOD truncate. Folds the hardware would trap on, or whose result the
// contract leaves to the run-time path (division by zero, out-of-range shifts),
// are refused so the program keeps its own behaviour.
#include "ir/float_math.hpp"
#include "ir/int_arith.hpp"
#include "ir/symbolic.hpp"

#include <loom/half.hpp>

#include <bit>
#include <cmath>
#include <string>

namespace loom {

namespace {
// ---- integers (and bools, as 0/1) ---------------------------------------------------
int64_t int_of(const UOpPtr& c) { return wrap_int(c->dtype, static_cast<uint64_t>(c->const_int())); }

std::optional<int64_t> int_divmod(Op op, DType dt, int64_t x, int64_t y) {
  if (y == 0) return std::nullopt;                           // the run-time path owns division by zero
  if (y == -1) return op == Op::IDIV ? wrap_neg(dt, x) : 0;  // INT_MIN / -1 = INT_MIN, no C++ UB
  return wrap_int(dt, static_cast<uint64_t>(op == Op::IDIV ? x / y : x % y));
}

std::optional<int64_t> int_shift(Op op, DType dt, int64_t x, int64_t k) {
  if (k < 0 || k >= dt.bits()) return std::nullopt;
  if (op == Op::SHL) return wrap_int(dt, static_cast<uint64_t>(x) << k);
  return x >> k;  // arithmetic on the sign-extended value; UInt8 and Bool values are non-negative
}

std::optional<int64_t> int_binary(Op op, DType dt, int64_t x, int64_t y) {
  switch (op) {
    case Op::ADD: return wrap_add(dt, x, y);
    case Op::SUB: return wrap_add(dt, x, wrap_neg(dt, y));
    case Op::MUL: return wrap_mul(dt, x, y);
    case Op::IDIV:
    case Op::MOD: return int_divmod(op, dt, x, y);
    case Op::MAX: return std::max(x, y);
    case Op::CMPLT: return x < y;
    case Op::CMPNE: return x != y;
    case Op::CMPEQ: return x == y;
    case Op::AND: return x & y;
    case Op::OR: return x | y;
    case Op::XOR: return x ^ y;
    case Op::SHL:
    case Op::SHR: return int_shift(op, dt, x, y);
    default: return std::nullopt;  // FDIV, POW, LDEXP: float-only
  }
}

std::optional<int64_t> fold_int(Op op, DType dt, const std::vector<UOpPtr>& c) {
  if (op == Op::NEG) return wrap_neg(dt, int_of(c[0]));
  if (op == Op::TRUNC) return int_of(c[0]);
  if (op == Op::MULACC) return wrap_add(dt, wrap_mul(dt, int_of(c[0]), int_of(c[1])), int_of(c[2]));
  if (is_binary(op)) return int_binary(op, dt, int_of(c[0]), int_of(c[1]));
  return std::nullopt;  // EXP EXP2 LOG2 SIN COS TANH SIGMOID ERF SQRT RECIP: float-only
}

// ---- floats, computed in T (float for Float32 and the halves: then rounded once)
// ----------------------------------------
template <class T>
T maximum(T x, T y) {  // llvm.maximum: NaN propagates, +0 > -0
  if (std::isnan(x) || std::isnan(y)) return std::numeric_limits<T>::quiet_NaN();
  if (x == y) return std::signbit(x) ? y : x;
  return x > y ? x : y;
}

template <class T>
std::optional<T> float_unary(Op op, T x) {
  switch (op) {
    case Op::NEG: return -x;
    case Op::EXP: return std::exp(x);
    case Op::EXP2: return std::exp2(x);
    case Op::LOG2: return std::log2(x);
    case Op::SIN: return std::sin(x);
    case Op::COS: return std::cos(x);
    case Op::TANH: return std::tanh(x);
    case Op::ERF: return std::erf(x);
    case Op::SIGMOID: return static_cast<T>(1 / (1 + std::exp(-static_cast<double>(x))));
    case Op::SQRT: return std::sqrt(x);
    case Op::RECIP: return T(1) / x;
    case Op::TRUNC: return std::trunc(x);
    default: return std::nullopt;
  }
}

template <class T>
std::optional<T> float_binary(Op op, T x, T y) {
  switch (op) {
    case Op::ADD: return x + y;
    case Op::SUB: return x - y;
    case Op::MUL: return x * y;
    case Op::FDIV: return x / y;
    case Op::POW: return std::pow(x, y);
    case Op::LDEXP: return scaled_by_pow2(x, y);
    case Op::MAX: return maximum(x, y);
    case Op::CMPLT: return T(x < y);   // ordered
    case Op::CMPEQ: return T(x == y);  // ordered
    case Op::CMPNE: return T(x != y);  // unordered: true with NaN
    default: return std::nullopt;      // IDIV MOD AND OR XOR SHL SHR: not float ops
  }
}

template <class T>
std::optional<double> fold_float(Op op, const std::vector<UOpPtr>& c) {
  auto v = [&](size_t i) { return static_cast<T>(c[i]->const_value()); };
  std::optional<T> r;
  if (is_unary(op))
    r = float_unary(op, v(0));
  else if (is_binary(op))
    r = float_binary(op, v(0), v(1));
  else if (op == Op::MULACC)
    r = static_cast<T>(v(0) * v(1)) + v(2);  // unfused: a*b rounds, then +c
  if (!r) return std::nullopt;
  return static_cast<double>(*r);
}

// ---- CAST and BITCAST ------------------------------------------------------------------
int64_t saturate(DType to, double v) {  // float -> int: truncate, saturate, NaN -> 0
  if (std::isnan(v)) return 0;
  const auto [lo, hi] = int_range(to);
  const double t = std::trunc(v);
  if (t <= static_cast<double>(lo)) return lo;
  if (t >= static_cast<double>(hi)) return hi;  // int64: hi rounds up to 2^63, so >= is exact
  return static_cast<int64_t>(t);
}

UOpPtr cast_const(DType to, const UOpPtr& c) {
  const DType from = c->dtype;
  if (from.is_float()) {
    const double v = c->const_value();
    if (to.is_float()) return const_float(to, v);      // f64 -> f32 rounds to nearest
    if (to.is_bool()) return const_int(to, v != 0.0);  // NaN != 0
    return const_int(to, saturate(to, v));
  }
  const int64_t x = int_of(c);
  if (to.is_bool()) return const_int(to, x != 0);
  if (to.scalar == Scalar::Float32 || to.is_half())
    return const_float(to, static_cast<float>(x));  // one rounding (halves: through float, as CAST)
  if (to.is_float()) return const_float(to, static_cast<double>(x));
  return const_int(to, wrap_int(to, static_cast<uint64_t>(x)));  // narrowing wraps, widening extends
}

std::optional<UOpPtr> bitcast_const(DType to, const UOpPtr& c) {
  const DType from = c->dtype;
  if (from.itemsize() != to.itemsize() || from.is_bool() || to.is_bool()) return std::nullopt;
  // A half's bits are those of its value rounded to it (a half CONST holds a value
  // the half represents exactly).
  const auto half_from = [](Scalar s, double v) {
    return s == Scalar::BFloat16 ? half_bits::bf16_from_f32(static_cast<float>(v))
                                 : half_bits::f16_from_f32(static_cast<float>(v));
  };
  uint64_t bits = 0;
  if (from.scalar == Scalar::Float32)
    bits = std::bit_cast<uint32_t>(static_cast<float>(c->const_value()));
  else if (from.scalar == Scalar::Float64)
    bits = std::bit_cast<uint64_t>(c->const_value());
  else if (from.is_half())
    bits = half_from(from.scalar, c->const_value());
  else
    bits = static_cast<uint64_t>(int_of(c));
  if (!to.is_float()) return const_int(to, wrap_int(to, bits));
  const auto half_bits_value = [&](uint16_t h) {
    return static_cast<double>(to.scalar == Scalar::BFloat16 ? half_bits::f32_from_bf16(h)
                                                             : half_bits::f32_from_f16(h));
  };
  const double v = to.scalar == Scalar::Float32   ? std::bit_cast<float>(static_cast<uint32_t>(bits))
                   : to.scalar == Scalar::Float64 ? std::bit_cast<double>(bits)
                                                  : half_bits_value(static_cast<uint16_t>(bits));
  if (std::isnan(v)) return std::nullopt;  // a CONST would not keep the NaN's payload bits
  return const_float(to, v);
}

int arity(Op op) {
  if (is_unary(op) || op == Op::CAST || op == Op::BITCAST) return 1;
  if (is_binary(op)) return 2;
  if (is_ternary(op)) return 3;
  throw Error("fold_constant: " + std::string(op_name(op)) + " is not an ALU op, CAST or BITCAST");
}

void check_sources(Op op, DType dtype, const std::vector<UOpPtr>& c) {
  const int n = arity(op);
  if (static_cast<int>(c.size()) != n)
    throw Error("fold_constant: " + std::string(op_name(op)) + " expects " + std::to_string(n) +
                " constant sources, got " + std::to_string(c.size()));
  for (const auto& s : c)
    if (!s || s->op != Op::CONST)
      throw Error("fold_constant: " + std::string(op_name(op)) + " expects CONST sources, got " +
                  (s ? std::string(op_name(s->op)) : std::string("null")));
  const size_t first = op == Op::WHERE ? 1 : 0;
  for (size_t i = first + 1; i < c.size(); ++i)
    if (c[i]->dtype != c[first]->dtype)
      throw Error("fold_constant: " + std::string(op_name(op)) + " operands differ in dtype: " +
                  to_string(c[first]->dtype) + " and " + to_string(c[i]->dtype));
  const DType expect = is_comparison(op) ? DType::Bool : c[first]->dtype;
  if (op != Op::CAST && op != Op::BITCAST && dtype != expect)
    throw Error("fold_constant: " + std::string(op_name(op)) + " of " + to_string(c[first]->dtype) +
                " gives " + to_string(expect) + ", asked for " + to_string(dtype));
}
}  // namespace

std::optional<UOpPtr> fold_constant(Op op, DType dtype, const std::vector<UOpPtr>& consts) {
  check_sources(op, dtype, consts);
  if (dtype.lanes != 1 || dtype.ptr || consts[0]->dtype.lanes != 1) return std::nullopt;
  if (op == Op::CAST) return cast_const(dtype, consts[0]);
  if (op == Op::BITCAST) return bitcast_const(dtype, consts[0]);
  if (op == Op::WHERE) return consts[0]->const_value() != 0 ? consts[1] : consts[2];
  const DType in = consts[0]->dtype;
  if (in.is_float()) {
    const auto r =
        in.scalar == Scalar::Float64 ? fold_float<double>(op, consts) : fold_float<float>(op, consts);
    if (!r) return std::nullopt;
    return is_comparison(op) ? const_int(dtype, *r != 0.0) : const_float(dtype, *r);
  }
  const auto r = fold_int(op, in, consts);
  if (!r) return std::nullopt;
  return const_int(dtype, *r);
}

}  // namespace loom
