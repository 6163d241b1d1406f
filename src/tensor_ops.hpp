#pragma once
// Helpers every Tensor op file shares: validation with messages that name the
// op, broadcasting, and building tensor-level UOps. src/ only.
#include "src/engine.hpp"
#include "src/tensor_node.hpp"

#include <loom/half.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <numeric>
#include <string>

namespace loom::detail {

using loom::str;  // "[4, T=17, 64]" (include/loom/dim.hpp)
// The elements of a tensor of this shape (symbolic when a size is).
inline Dim count(const Shape& s) { return std::accumulate(s.begin(), s.end(), Dim{1}, std::multiplies<>()); }

template <class T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, float>)
    return DType::Float32;
  else if constexpr (std::is_same_v<T, double>)
    return DType::Float64;
  else if constexpr (std::is_same_v<T, int32_t>)
    return DType::Int32;
  else if constexpr (std::is_same_v<T, int64_t>)
    return DType::Int64;
  else if constexpr (std::is_same_v<T, uint8_t>)
    return DType::UInt8;
  else if constexpr (std::is_same_v<T, bfloat16>)
    return DType::BFloat16;
  else if constexpr (std::is_same_v<T, float16>)
    return DType::Float16;
  else {
    static_assert(std::is_same_v<T, bool>,
                  "loom tensors hold float, double, bfloat16, float16, int32_t, int64_t, uint8_t or bool");
    return DType::Bool;
  }
}

// A tensor's element count and byte size must fit in int64 (loom indexes with
// it); a shape past that is an error naming the op that asked for it.
inline void check_shape(const Shape& s, const char* op, DType dt) {
  for (const Dim& d : s)
    if (d.min() < 0) throw Error(fmt::format("{}: shape {} has a negative size", op, str(s)));
  int64_t n = 1, bytes = 0;  // at the largest values of the variables
  for (const Dim& d : s)
    if (__builtin_mul_overflow(n, d.max(), &n))
      throw Error(
          fmt::format("{}: shape {} has more elements than int64 can count (at most 2^63 - 1)", op, str(s)));
  if (__builtin_mul_overflow(n, int64_t{dt.itemsize()}, &bytes))
    throw Error(fmt::format("{}: shape {} of {} is {} elements, more than 2^63 bytes", op, str(s),
                            scalar_name(dt.scalar), n));
}

inline int norm_axis(int axis, size_t ndim, const char* op) {
  const int n = static_cast<int>(ndim);
  const int m = std::max(n, 1);  // a 0-d tensor takes axis 0 or -1, as in PyTorch
  if (axis < -m || axis >= m)
    throw Error(fmt::format("{}: axis {} is out of range for a tensor of {} dimension{} (expected {} to {})",
                            op, axis, n, n == 1 ? "" : "s", -std::max(n, 1), std::max(n, 1) - 1));
  return axis < 0 ? axis + std::max(n, 1) : axis;
}

inline UOpPtr reshape_uop(const UOpPtr& u, const Shape& shape) {
  if (*u->shape() == shape) return u;
  const UOpPtr& base = u->op == Op::RESHAPE ? u->src[0] : u;  // a reshape of a reshape is one reshape
  if (*base->shape() == shape) return base;
  return UOp::make(Op::RESHAPE, u->dtype, {base}, shape);
}

inline UOpPtr expand_uop(const UOpPtr& u, const Shape& shape) {
  Shape padded(shape.size() - u->shape()->size(), 1);
  padded.insert(padded.end(), u->shape()->begin(), u->shape()->end());
  UOpPtr r = reshape_uop(u, padded);
  return padded == shape ? r : UOp::make(Op::EXPAND, u->dtype, {r}, shape);
}

inline UOpPtr cast_uop(const UOpPtr& u, DType dt) {
  return u->dtype == dt ? u : UOp::make(Op::CAST, dt, {u});
}

inline UOpPtr const_tensor(double v, DType dt, const Shape& shape) {
  return expand_uop(const_like(dt, v), shape);
}
// `v` as a constant of u's dtype and shape.
inline UOpPtr const_as(const UOpPtr& u, double v) { return const_tensor(v, u->dtype, *u->shape()); }

inline Shape broadcast_shape(const Shape& a, const Shape& b, const char* op) {
  Shape out(std::max(a.size(), b.size()));
  for (size_t i = 0; i < out.size(); ++i) {
    const Dim da = i < out.size() - a.size() ? Dim(1) : a[i - (out.size() - a.size())];
    const Dim db = i < out.size() - b.size() ? Dim(1) : b[i - (out.size() - b.size())];
    if (da != db && da != 1 && db != 1)
      throw Error(fmt::format("{}: shapes {} and {} cannot be broadcast together (axis {}: {} vs {})", op,
                              str(a), str(b), static_cast<int64_t>(i) - static_cast<int64_t>(out.size()), da,
                              db));
    out[i] = da == 1 ? db : da;
  }
  return out;
}

inline const UOpPtr& uop(const Tensor& t, const char* op) {
  if (!t.defined()) throw Error(fmt::format("{}: the tensor is undefined (default-constructed)", op));
  return t.node()->uop;
}

// Both operands broadcast to one shape and cast to `dt`.
inline std::pair<UOpPtr, UOpPtr> operands(const Tensor& a, const Tensor& b, DType dt, const char* op) {
  const UOpPtr &x = uop(a, op), &y = uop(b, op);
  Shape s = broadcast_shape(*x->shape(), *y->shape(), op);
  return {cast_uop(expand_uop(x, s), dt), cast_uop(expand_uop(y, s), dt)};
}

// The promoted dtype of two operands of `op` (checked defined, so an error names `op`).
inline DType promoted(const Tensor& a, const Tensor& b, const char* op) {
  return promote(uop(a, op)->dtype, uop(b, op)->dtype);
}

inline DType arithmetic_dtype(const Tensor& a, const Tensor& b, const char* op) {
  DType dt = promoted(a, b, op);
  return dt.is_bool() ? DType::Int32 : dt;  // arithmetic on Bool computes as Int32
}

inline Tensor binary(Op op, const Tensor& a, const Tensor& b, DType dt, const char* name) {
  auto [x, y] = operands(a, b, dt, name);
  return make_tensor(alu(op, {x, y}));
}

inline DType float_dtype(DType dt) { return dt.is_float() ? dt : DType::Float32; }

// A size as a scalar tensor of `dt` (a count to divide by): a constant, or the
// symbolic size's expression, whose variables each run passes (docs/symbolic.md).
inline Tensor size_scalar(const Dim& n, DType dt) {
  return n.is_symbolic() ? make_tensor(cast_uop(n.expr(), dt))
                         : Tensor::scalar(static_cast<double>(n.value()), dt);
}
// a / b as a scalar tensor of `dt`: for numbers the quotient rounded once, as before sizes
// could be symbolic; for symbolic sizes the quotient of the two counts, computed per run.
inline Tensor size_ratio(const Dim& a, const Dim& b, DType dt) {
  if (!a.is_symbolic() && !b.is_symbolic())
    return Tensor::scalar(static_cast<double>(a.value()) / static_cast<double>(b.value()), dt);
  return size_scalar(a, dt) / size_scalar(b, dt);
}

// Halves compute in Float32 and round once (src/half_compute.hpp).
inline Tensor unary_float(const Tensor& t, const char* op, auto build) {
  UOpPtr x = uop(t, op);
  if (x->dtype.is_half()) return make_tensor(cast_uop(build(cast_uop(x, DType::Float32)), x->dtype));
  return make_tensor(build(cast_uop(x, float_dtype(x->dtype))));
}

}  // namespace loom::detail
