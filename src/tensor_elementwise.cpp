// Elementwise ops: arithmetic with PyTorch's promotion, comparisons, transcendentals
// built from EXP2/LOG2/SIN/SQRT, where and cast.
#include "src/tensor_ops.hpp"

#include <cmath>

namespace loom {

using namespace detail;

// ---- elementwise ----------------------------------------------------------------------------
Tensor operator+(const Tensor& a, const Tensor& b) { return binary(Op::ADD, a, b, arithmetic_dtype(a, b), "add"); }
Tensor operator-(const Tensor& a, const Tensor& b) { return binary(Op::SUB, a, b, arithmetic_dtype(a, b), "sub"); }
Tensor operator*(const Tensor& a, const Tensor& b) { return binary(Op::MUL, a, b, arithmetic_dtype(a, b), "mul"); }
Tensor operator/(const Tensor& a, const Tensor& b) {
  return binary(Op::FDIV, a, b, float_dtype(promote(a.dtype(), b.dtype())), "div");
}
Tensor operator-(const Tensor& a) { return a.neg(); }

Tensor Tensor::neg() const {
  const UOpPtr& x = uop(*this, "neg");
  if (x->dtype.is_bool()) throw Error("neg: negation of a Bool tensor is not supported (use logical_not)");
  return make_tensor(alu(Op::NEG, {x}));
}
// exp(x) = 2^(x*log2(e)), log(x) = log2(x)*ln(2): codegen needs only EXP2 and LOG2.
Tensor Tensor::exp() const {
  return unary_float(*this, "exp", [](const UOpPtr& x) { return alu(Op::EXP2, {x * const_tensor(1.0 / std::log(2.0), x->dtype, *x->shape())}); });
}
Tensor Tensor::log() const {
  return unary_float(*this, "log", [](const UOpPtr& x) { return alu(Op::LOG2, {x}) * const_tensor(std::log(2.0), x->dtype, *x->shape()); });
}
Tensor Tensor::exp2() const { return unary_float(*this, "exp2", [](const UOpPtr& x) { return alu(Op::EXP2, {x}); }); }
Tensor Tensor::log2() const { return unary_float(*this, "log2", [](const UOpPtr& x) { return alu(Op::LOG2, {x}); }); }
Tensor Tensor::sqrt() const { return unary_float(*this, "sqrt", [](const UOpPtr& x) { return alu(Op::SQRT, {x}); }); }
Tensor Tensor::relu() const {
  const UOpPtr& x = uop(*this, "relu");
  if (x->dtype.is_bool()) throw Error("relu: not defined for a Bool tensor");
  return make_tensor(umax(x, const_tensor(0, x->dtype, *x->shape())));
}
Tensor Tensor::maximum(const Tensor& other) const {
  return binary(Op::MAX, *this, other, promote(dtype(), other.dtype()), "maximum");
}
Tensor Tensor::minimum(const Tensor& other) const {
  DType dt = promote(dtype(), other.dtype());
  auto [x, y] = operands(*this, other, dt, "minimum");
  // -max(-x, -y) keeps NaN propagation on floats; on integers negation wraps, so select.
  if (dt.is_float()) return make_tensor(-umax(-x, -y));
  return make_tensor(loom::where(x < y, x, y));
}
Tensor Tensor::lt(const Tensor& o) const { return binary(Op::CMPLT, *this, o, promote(dtype(), o.dtype()), "lt"); }
Tensor Tensor::gt(const Tensor& o) const { return binary(Op::CMPLT, o, *this, promote(dtype(), o.dtype()), "gt"); }
Tensor Tensor::eq(const Tensor& o) const { return binary(Op::CMPEQ, *this, o, promote(dtype(), o.dtype()), "eq"); }
Tensor Tensor::ne(const Tensor& o) const { return binary(Op::CMPNE, *this, o, promote(dtype(), o.dtype()), "ne"); }
// a <= b is (a < b) | (a == b), not !(b < a), which would be true for NaN.
Tensor Tensor::le(const Tensor& o) const {
  auto [x, y] = operands(*this, o, promote(dtype(), o.dtype()), "le");
  return make_tensor(alu(Op::OR, {x < y, loom::eq(x, y)}));
}
Tensor Tensor::ge(const Tensor& o) const { return o.le(*this); }

Tensor Tensor::where(const Tensor& a, const Tensor& b) const { return loom::where(*this, a, b); }
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  const UOpPtr &c = uop(cond, "where"), &x = uop(a, "where"), &y = uop(b, "where");
  Shape s = broadcast_shape(broadcast_shape(*c->shape(), *x->shape(), "where"), *y->shape(), "where");
  DType dt = promote(x->dtype, y->dtype);
  UOpPtr cb = c->dtype.is_bool() ? c : ne(c, const_tensor(0, c->dtype, *c->shape()));
  return make_tensor(loom::where(expand_uop(cb, s), cast_uop(expand_uop(x, s), dt), cast_uop(expand_uop(y, s), dt)));
}
Tensor Tensor::cast(DType dt) const { return make_tensor(cast_uop(uop(*this, "cast"), dt.base())); }

Tensor exp(const Tensor& t) { return t.exp(); }
Tensor log(const Tensor& t) { return t.log(); }
Tensor sqrt(const Tensor& t) { return t.sqrt(); }
Tensor relu(const Tensor& t) { return t.relu(); }

}  // namespace loom
