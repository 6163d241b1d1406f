// Elementwise arithmetic with PyTorch's promotion, comparisons, logic and bitwise
// ops, and the selections built on them (abs, sign, clamp, where). Transcendentals
// are in tensor_elementwise_math.cpp, floor division and % in tensor_elementwise_division.cpp.
#include "src/composites.hpp"
#include "src/tensor_ops.hpp"

#include <cmath>
#include <limits>

namespace loom {

using namespace detail;

namespace {
// Rejects a dtype an op does not take, naming the op and what it expected.
void refuse_bool(const UOpPtr& x, const char* op, const char* instead) {
  if (x->dtype.is_bool()) throw Error(fmt::format("{}: not defined for a Bool tensor ({})", op, instead));
}

void require_bool(const Tensor& t, const char* op) {
  if (!uop(t, op)->dtype.is_bool())
    throw Error(fmt::format("{}: expected a Bool tensor, got {} (compare first, e.g. t.ne(0))", op,
                            scalar_name(t.dtype().scalar)));
}

// Bool: logical; integers: bitwise; floats have no bits to combine.
Tensor bitwise(Op op, const Tensor& a, const Tensor& b, const char* name) {
  const DType dt = promote(uop(a, name)->dtype, uop(b, name)->dtype);
  if (dt.is_float())
    throw Error(fmt::format("{}: expected Bool or integer tensors, got {} and {}", name,
                            scalar_name(a.dtype().scalar), scalar_name(b.dtype().scalar)));
  return binary(op, a, b, dt, name);
}

// Float minimum keeps NaN: -max(-x, -y) (llvm.maximum propagates it); integers select,
// since negation wraps at INT_MIN.
UOpPtr min_of(const UOpPtr& x, const UOpPtr& y) {
  return x->dtype.is_float() ? -umax(-x, -y) : where(x < y, x, y);
}

// An integer clamp bound: rounded inward (lo up, hi down), then saturated to dt's range.
double int_bound(double v, DType dt, bool is_lo) {
  const double r = is_lo ? std::ceil(v) : std::floor(v);
  const double lo = dt == DType::UInt8 ? 0 : dt == DType::Int32 ? -2147483648.0 : -0x1p63;
  const double hi = dt == DType::UInt8 ? 255 : dt == DType::Int32 ? 2147483647.0 : 0x1p63 - 1024;
  return std::clamp(r, lo, hi);
}
}  // namespace

// ---- arithmetic ---------------------------------------------------------------------------------
Tensor operator+(const Tensor& a, const Tensor& b) {
  return binary(Op::ADD, a, b, arithmetic_dtype(a, b, "add"), "add");
}
Tensor operator-(const Tensor& a, const Tensor& b) {
  return binary(Op::SUB, a, b, arithmetic_dtype(a, b, "sub"), "sub");
}
Tensor operator*(const Tensor& a, const Tensor& b) {
  return binary(Op::MUL, a, b, arithmetic_dtype(a, b, "mul"), "mul");
}
Tensor operator/(const Tensor& a, const Tensor& b) {
  return binary(Op::FDIV, a, b, float_dtype(promoted(a, b, "div")), "div");
}
Tensor operator-(const Tensor& a) { return a.neg(); }

Tensor Tensor::neg() const {
  const UOpPtr& x = uop(*this, "neg");
  refuse_bool(x, "neg", "use logical_not");
  return make_tensor(alu(Op::NEG, {x}));
}
Tensor Tensor::square() const { return *this * *this; }

// max(x, -x): +0 for -0, NaN stays NaN, and INT_MIN stays INT_MIN (it wraps, as in PyTorch).
Tensor Tensor::abs() const {
  const UOpPtr& x = uop(*this, "abs");
  refuse_bool(x, "abs", "as in PyTorch on the CPU");
  return make_tensor(x->dtype.is_unsigned() ? x : umax(x, -x));
}

// PyTorch's (0 < x) - (x < 0): sign(-0) = 0 and sign(NaN) = 0 (NumPy would give NaN); Bool is itself.
Tensor Tensor::sign() const {
  const UOpPtr& x = uop(*this, "sign");
  if (x->dtype.is_bool()) return make_tensor(x);
  const UOpPtr zero = const_as(x, 0);
  const UOpPtr positive = cast_uop(zero < x, x->dtype);
  return make_tensor(x->dtype.is_unsigned() ? positive : positive - cast_uop(x < zero, x->dtype));
}

// Floats as PyTorch: x for x > 0, else x < 0 ? 0 : x (so -0.0 and NaN return themselves),
// and a derivative of 1 exactly where x > 0 (relu'(0) = 0): the second branch is detached, as
// max(x, 0) would split the gradient of the tie at 0. Integers: max(x, 0).
UOpPtr detail::relu_of(const UOpPtr& x) {
  const UOpPtr zero = const_as(x, 0);
  const UOpPtr rest = UOp::make(Op::DETACH, x->dtype, {loom::where(x < zero, zero, x)});
  return loom::where(zero < x, x, rest);
}

Tensor Tensor::relu() const {
  const UOpPtr& x = uop(*this, "relu");
  refuse_bool(x, "relu", "cast it to a number first");
  if (!x->dtype.is_float()) return make_tensor(umax(x, const_as(x, 0)));
  return make_tensor(relu_of(x));
}

Tensor Tensor::maximum(const Tensor& other) const {
  return binary(Op::MAX, *this, other, promoted(*this, other, "maximum"), "maximum");
}
Tensor Tensor::minimum(const Tensor& other) const {
  auto [x, y] = operands(*this, other, promoted(*this, other, "minimum"), "minimum");
  return make_tensor(min_of(x, y));
}

// min(max(x, lo), hi), as torch.clamp: a NaN in x stays NaN, and lo > hi gives hi everywhere.
// Floats select (x < lo ? lo : x, then hi < that ? hi : it), so -0.0 stays -0.0 as in PyTorch
// and the derivative is 1 on [lo, hi] bounds included, as PyTorch's (max and min would split
// it at the bounds). Integer tensors keep their dtype: the bounds round inward and saturate
// to its range.
Tensor Tensor::clamp(double lo, double hi) const {
  const UOpPtr& x = uop(*this, "clamp");
  refuse_bool(x, "clamp", "cast it to a number first");
  if (x->dtype.is_float()) {
    if (std::isnan(lo) || std::isnan(hi))  // a NaN bound makes every element NaN, as in PyTorch
      return make_tensor(const_as(x, std::numeric_limits<double>::quiet_NaN()));
    const UOpPtr l = const_as(x, lo), h = const_as(x, hi);
    const UOpPtr above_lo = loom::where(x < l, l, x);
    return make_tensor(loom::where(h < above_lo, h, above_lo));
  }
  if (std::isnan(lo) || std::isnan(hi))
    throw Error(fmt::format("clamp: a NaN bound ({}, {}) cannot apply to a {} tensor", lo, hi,
                            scalar_name(x->dtype.scalar)));
  lo = int_bound(lo, x->dtype, true);
  hi = int_bound(hi, x->dtype, false);
  return make_tensor(min_of(umax(x, const_as(x, lo)), const_as(x, hi)));
}

// One bound of clamp, as torch.clamp_min and clamp_max (clamp(min=...) in PyTorch): the same
// selects, rules and derivative, without the other bound's compare.
Tensor Tensor::clamp_min(double lo) const {
  const UOpPtr& x = uop(*this, "clamp_min");
  if (!x->dtype.is_float() || std::isnan(lo)) return clamp(lo, std::numeric_limits<double>::infinity());
  const UOpPtr l = const_as(x, lo);
  return make_tensor(loom::where(x < l, l, x));
}
Tensor Tensor::clamp_max(double hi) const {
  const UOpPtr& x = uop(*this, "clamp_max");
  if (!x->dtype.is_float() || std::isnan(hi)) return clamp(-std::numeric_limits<double>::infinity(), hi);
  const UOpPtr h = const_as(x, hi);
  return make_tensor(loom::where(h < x, h, x));
}

// ---- comparisons --------------------------------------------------------------------------------
Tensor Tensor::lt(const Tensor& o) const {
  return binary(Op::CMPLT, *this, o, promoted(*this, o, "lt"), "lt");
}
Tensor Tensor::gt(const Tensor& o) const {
  return binary(Op::CMPLT, o, *this, promoted(*this, o, "gt"), "gt");
}
Tensor Tensor::eq(const Tensor& o) const {
  return binary(Op::CMPEQ, *this, o, promoted(*this, o, "eq"), "eq");
}
Tensor Tensor::ne(const Tensor& o) const {
  return binary(Op::CMPNE, *this, o, promoted(*this, o, "ne"), "ne");
}
// a <= b is (a < b) | (a == b), not !(b < a), which would be true for NaN.
Tensor Tensor::le(const Tensor& o) const {
  auto [x, y] = operands(*this, o, promoted(*this, o, "le"), "le");
  return make_tensor(alu(Op::OR, {x < y, loom::eq(x, y)}));
}
Tensor Tensor::ge(const Tensor& o) const { return o.le(*this); }

Tensor operator<(const Tensor& a, const Tensor& b) { return a.lt(b); }
Tensor operator<=(const Tensor& a, const Tensor& b) { return a.le(b); }
Tensor operator>(const Tensor& a, const Tensor& b) { return a.gt(b); }
Tensor operator>=(const Tensor& a, const Tensor& b) { return a.ge(b); }

// ---- logic and bits -----------------------------------------------------------------------------
Tensor Tensor::logical_and(const Tensor& other) const {
  require_bool(*this, "logical_and");
  require_bool(other, "logical_and");
  return binary(Op::AND, *this, other, DType::Bool, "logical_and");
}
Tensor Tensor::logical_or(const Tensor& other) const {
  require_bool(*this, "logical_or");
  require_bool(other, "logical_or");
  return binary(Op::OR, *this, other, DType::Bool, "logical_or");
}
// x != true: the simplifier's canonical Bool negation.
Tensor Tensor::logical_not() const {
  require_bool(*this, "logical_not");
  const UOpPtr& x = uop(*this, "logical_not");
  return make_tensor(loom::ne(x, const_as(x, 1)));
}

Tensor operator&(const Tensor& a, const Tensor& b) { return bitwise(Op::AND, a, b, "bitwise_and (&)"); }
Tensor operator|(const Tensor& a, const Tensor& b) { return bitwise(Op::OR, a, b, "bitwise_or (|)"); }
// Bool: logical not; integers: every bit flipped (x ^ all ones).
Tensor operator~(const Tensor& a) {
  const UOpPtr& x = uop(a, "bitwise_not (~)");
  if (x->dtype.is_bool()) return a.logical_not();
  if (x->dtype.is_float())
    throw Error(fmt::format("bitwise_not (~): expected a Bool or integer tensor, got {}",
                            scalar_name(x->dtype.scalar)));
  return make_tensor(alu(Op::XOR, {x, const_as(x, x->dtype.is_unsigned() ? 255 : -1)}));
}

// ---- selection and conversion -------------------------------------------------------------------
Tensor Tensor::where(const Tensor& a, const Tensor& b) const { return loom::where(*this, a, b); }
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  const UOpPtr &c = uop(cond, "where"), &x = uop(a, "where"), &y = uop(b, "where");
  Shape s = broadcast_shape(broadcast_shape(*c->shape(), *x->shape(), "where"), *y->shape(), "where");
  DType dt = promote(x->dtype, y->dtype);
  UOpPtr cb = c->dtype.is_bool() ? c : ne(c, const_as(c, 0));
  return make_tensor(
      loom::where(expand_uop(cb, s), cast_uop(expand_uop(x, s), dt), cast_uop(expand_uop(y, s), dt)));
}
Tensor Tensor::cast(DType dt) const { return make_tensor(cast_uop(uop(*this, "cast"), dt.base())); }

Tensor relu(const Tensor& t) { return t.relu(); }

}  // namespace loom
