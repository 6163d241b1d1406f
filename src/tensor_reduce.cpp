// Reductions: REDUCE_AXIS with the dtype rules of docs/semantics.md, and the
// composites built on it (min, mean, argmax, softmax, logsumexp).
#include "src/autocast.hpp"
#include "src/half_compute.hpp"
#include "src/tensor_ops.hpp"

#include <cmath>
#include <limits>

namespace loom {

using namespace detail;

// ---- reductions ---------------------------------------------------------------------------------
namespace {
// The axes to reduce: normalised, sorted, unique; every axis when `axes` is empty; none for a 0-d tensor.
std::vector<int64_t> reduce_axes(const Shape& in, const std::vector<int>& axes, const char* name) {
  std::vector<int64_t> ax;
  for (int a : axes) ax.push_back(norm_axis(a, in.size(), name));
  if (in.empty()) return {};
  if (axes.empty())
    for (size_t i = 0; i < in.size(); ++i) ax.push_back(static_cast<int64_t>(i));
  std::sort(ax.begin(), ax.end());
  ax.erase(std::unique(ax.begin(), ax.end()), ax.end());
  return ax;
}

Shape without_axes(const Shape& in, const std::vector<int64_t>& ax) {
  Shape out;
  for (size_t i = 0; i < in.size(); ++i)
    if (!std::binary_search(ax.begin(), ax.end(), static_cast<int64_t>(i))) out.push_back(in[i]);
  return out;
}

// MAX has no identity a user could expect, so reducing nothing is an error (as in PyTorch).
void check_not_empty(const Shape& in, const std::vector<int64_t>& ax, const char* name) {
  for (int64_t a : ax)
    if (in[a] == 0)
      throw Error(
          fmt::format("{}: cannot reduce axis {} of size 0 in shape {} (the reduction has no identity)", name,
                      a, str(in)));
}

// REDUCE_AXIS over `axes` (all when empty), then a reshape that drops them unless keepdim.
Tensor reduce(const Tensor& t, Op op, const std::vector<int>& axes, bool keepdim, const char* name) {
  const UOpPtr& x = uop(t, name);
  const Shape& in = *x->shape();
  const std::vector<int64_t> ax = reduce_axes(in, axes, name);
  if (in.empty()) return t;  // a 0-d tensor reduces to itself
  if (op == Op::MAX) check_not_empty(in, ax, name);
  // Half sums and products accumulate in Float32 and round once (PyTorch's CPU kernels); MAX is exact.
  const bool widen = x->dtype.is_half() && op != Op::MAX;
  UOpPtr r = widen ? cast_uop(UOp::make(Op::REDUCE_AXIS, DType::Float32, {cast_uop(x, DType::Float32)},
                                        ReduceArg{op, ax}),
                              x->dtype)
                   : UOp::make(Op::REDUCE_AXIS, x->dtype, {x}, ReduceArg{op, ax});
  return make_tensor(keepdim ? r : reshape_uop(r, without_axes(in, ax)));
}

// An order-reversing involution, so min(x) = r(max(r(x))) and argmin(x) = argmax(r(x)). Floats
// negate (NaN stays NaN and still wins); integers and Bool flip every bit (~x = -1 - x), which,
// unlike negation, cannot overflow at INT_MIN.
UOpPtr reverse_order(const UOpPtr& x) {
  if (x->dtype.is_float()) return alu(Op::NEG, {x});
  const double ones = x->dtype.is_bool() ? 1 : x->dtype == DType::UInt8 ? 255 : -1;
  return alu(Op::XOR, {x, const_tensor(ones, x->dtype, *x->shape())});
}

// Small integer products widen like sums (PyTorch widens them to Int64; loom to Int32, as for sum).
// Under Autocast a half input sums in Float32 and stays Float32 (src/autocast.hpp).
Tensor widened(const Tensor& t) {
  if (t.dtype().is_half()) return autocast_float32(t);
  const DType dt = t.dtype();
  return dt.is_bool() || dt == DType::UInt8 ? t.cast(DType::Int32) : t;
}

// The first index of the maximum along `axis`, NaN counting as the maximum (as in PyTorch):
// max(where(x is the max, n - i, 0)) is n - (first such i).
Tensor first_argmax(const UOpPtr& x, int axis, const char* name) {
  const Shape& in = *x->shape();
  const int a = norm_axis(axis, in.size(), name);
  if (in.empty()) return make_tensor(const_like(DType::Int32, 0));
  const int64_t n = in[a];
  const UOpPtr m = expand_uop(uop(reduce(make_tensor(x), Op::MAX, {a}, true, name), name), in);
  UOpPtr is_max = eq(x, m);
  if (x->dtype.is_float()) is_max = alu(Op::OR, {is_max, ne(x, x)});  // x != x: NaN
  Shape along(in.size(), 1);
  along[a] = n;
  const UOpPtr i = expand_uop(reshape_uop(UOp::make(Op::IOTA, DType::Int32, {}, Shape{n}), along), in);
  const UOpPtr n_in = const_tensor(static_cast<double>(n), DType::Int32, in);
  const UOpPtr score = where(is_max, n_in - i, const_tensor(0, DType::Int32, in));
  const UOpPtr best = uop(reduce(make_tensor(score), Op::MAX, {a}, false, name), name);
  return make_tensor(const_tensor(static_cast<double>(n), DType::Int32, *best->shape()) - best);
}

// A float copy of `t` (integers compute in Float32, as exp and log do) and its normalised axis.
std::pair<Tensor, int> float_along(const Tensor& t, int axis, const char* name) {
  uop(t, name);
  const Tensor input = autocast_float32(t);
  const UOpPtr& x = uop(input, name);
  return {make_tensor(cast_uop(x, float_dtype(x->dtype))), norm_axis(axis, x->shape()->size(), name)};
}

bool empty_along(const Tensor& t, int axis) { return t.ndim() > 0 && t.shape()[axis] == 0; }
}  // namespace

Tensor Tensor::sum(std::vector<int> axes, bool keepdim) const {
  uop(*this, "sum");
  return reduce(widened(*this), Op::ADD, axes, keepdim, "sum");
}
Tensor Tensor::prod(std::vector<int> axes, bool keepdim) const {
  uop(*this, "prod");
  return reduce(widened(*this), Op::MUL, axes, keepdim, "prod");
}
Tensor Tensor::max(std::vector<int> axes, bool keepdim) const {
  return reduce(*this, Op::MAX, axes, keepdim, "max");
}
Tensor Tensor::min(std::vector<int> axes, bool keepdim) const {
  const Tensor m = reduce(make_tensor(reverse_order(uop(*this, "min"))), Op::MAX, axes, keepdim, "min");
  return make_tensor(reverse_order(m.node()->uop));
}

// Counts of nonzero (zero) elements, so reducing nothing gives any = false and all = true, as
// in PyTorch; NaN is nonzero.
Tensor Tensor::any(std::vector<int> axes, bool keepdim) const {
  return uop(*this, "any"), ne(0).sum(std::move(axes), keepdim).gt(0);
}
Tensor Tensor::all(std::vector<int> axes, bool keepdim) const {
  return uop(*this, "all"), eq(0).sum(std::move(axes), keepdim).eq(0);
}

// torch.linalg.vector_norm's orders: inf (max |x|), -inf (min |x|), 0 (the nonzero count), 1,
// 2, and any p as (sum |x|^p)^(1/p). The gradient is 0 where the norm is 0, and for p < 1 at
// the zero elements too, as PyTorch's, not the 0 * inf of a root's derivative at 0: the roots
// are taken of 1 there.
Tensor Tensor::norm(double p, std::vector<int> dims, bool keepdim) const {
  const UOpPtr& x = uop(*this, "norm");
  if (!x->dtype.is_float())
    throw Error(
        fmt::format("norm: expected a float tensor, got {} (as in PyTorch)", scalar_name(x->dtype.scalar)));
  if (std::isnan(p)) throw Error("norm: the order p is NaN");
  const Tensor a = abs();
  if (p == std::numeric_limits<double>::infinity()) return a.max(std::move(dims), keepdim);
  if (p == -std::numeric_limits<double>::infinity()) return a.min(std::move(dims), keepdim);
  if (p == 0) return a.ne(0).cast(dtype()).sum(std::move(dims), keepdim);
  if (p == 1) return a.sum(std::move(dims), keepdim);
  // x^q taken of 1 where x is 0, so no inf derivative meets the zero that selects it away.
  const auto power = [](const Tensor& v, double q) {
    const Tensor nonzero = v.gt(0);
    return loom::where(nonzero, loom::where(nonzero, v, 1).pow(q), 0);
  };
  if (p == 2) return power(square().sum(std::move(dims), keepdim), 0.5);
  return power(power(a, p).sum(std::move(dims), keepdim), 1 / p);
}

// sum / n in the float dtype; an empty axis gives 0 / 0 = NaN, as in PyTorch.
Tensor Tensor::mean(std::vector<int> axes, bool keepdim) const {
  uop(*this, "mean");
  const Tensor input = autocast_float32(*this);
  const UOpPtr& x = uop(input, "mean");
  const Shape& in = *x->shape();
  Dim n = 1;
  for (int64_t a : reduce_axes(in, axes, "mean")) n *= in[a];
  const DType compute = x->dtype.is_half() ? DType::Float32 : float_dtype(x->dtype);  // halves: rounded once
  const Tensor s = reduce(make_tensor(cast_uop(x, compute)), Op::ADD, axes, keepdim, "mean");
  const Tensor m = s / size_scalar(n, s.dtype());
  return x->dtype.is_half() ? m.cast(x->dtype) : m;
}

Tensor Tensor::argmax(int axis) const { return first_argmax(uop(*this, "argmax"), axis, "argmax"); }
Tensor Tensor::argmin(int axis) const {
  return first_argmax(reverse_order(uop(*this, "argmin")), axis, "argmin");
}

// Subtracting the row's max keeps exp's argument <= 0: no overflow for any finite input. The
// shift is detached: the result does not depend on it, so its gradient (which would need the
// ties of the max) is zero anyway. Each element is multiplied by the reciprocal of its row's
// sum, as PyTorch's CPU kernel does: one division per row instead of one per element (a
// rounding more, within 1.5 ulps of the quotient).
// A half input computes in Float32 and rounds once (src/half_compute.hpp).
Tensor Tensor::softmax(int axis) const {
  auto [input, a] = float_along(*this, axis, "softmax");
  if (empty_along(input, a)) return input;
  return rounded_once(input, [a = a](const Tensor& x) {
    const Tensor e = (x - x.max(a, true).detach()).exp();
    return e * e.sum(a, true).reciprocal();
  });
}
Tensor Tensor::log_softmax(int axis) const {
  auto [input, a] = float_along(*this, axis, "log_softmax");
  if (empty_along(input, a)) return input;
  return rounded_once(input, [a = a](const Tensor& x) {
    const Tensor shifted = x - x.max(a, true).detach();
    return shifted - shifted.exp().sum(a, true).log();
  });
}

// As PyTorch: an infinite max is replaced by 0 before the shift, so a row of -inf gives -inf
// (log 0) and a row holding +inf gives +inf, instead of inf - inf = NaN.
Tensor Tensor::logsumexp(int axis) const {
  auto [input, a] = float_along(*this, axis, "logsumexp");
  if (empty_along(input, a)) {
    Shape out = input.shape();
    out.erase(out.begin() + a);
    return Tensor::full(out, -std::numeric_limits<double>::infinity(), input.dtype());
  }
  if (is_half(input)) return rounded_once(input, [a = a](const Tensor& x) { return x.logsumexp(a); });
  const Tensor& x = input;
  const DType dt = x.dtype();
  const UOpPtr m = uop(x.max(a, true).detach(), "logsumexp");  // a shift the result does not depend on
  const double inf = std::numeric_limits<double>::infinity();
  const Shape& ms = *m->shape();
  const UOpPtr is_inf =
      alu(Op::OR, {loom::eq(m, const_tensor(inf, dt, ms)), loom::eq(m, const_tensor(-inf, dt, ms))});
  const Tensor shift = make_tensor(loom::where(is_inf, const_tensor(0, dt, ms), m));
  const Tensor r = (x - shift).exp().sum(a, true).log() + shift;
  return x.ndim() == 0 ? r : r.squeeze(a);
}

// PyTorch's two-pass form (its gradient 2 (x - mean) / max(0, N - correction); PyTorch's divides by
// N - correction unclamped, docs/semantics.md): sum((x - mean)^2) / max(0, N - correction), N the count of
// the reduced elements; a non-positive divisor gives inf (NaN where the squares sum to 0).
Tensor Tensor::var(std::vector<int> dims, double correction, bool keepdim) const {
  const UOpPtr& x = uop(*this, "var");
  if (!x->dtype.is_float())
    throw Error(
        fmt::format("var: expected a float tensor, got {} (as in PyTorch)", scalar_name(x->dtype.scalar)));
  const Shape& in = *x->shape();
  std::vector<int64_t> seen;
  for (int d : dims) {
    const int64_t a = norm_axis(d, in.size(), "var");
    if (std::find(seen.begin(), seen.end(), a) != seen.end())
      throw Error(fmt::format("var: dim {} appears more than once in the dims [{}] of shape {}", a,
                              fmt::join(dims, ", "), str(in)));
    seen.push_back(a);
  }
  Dim n = 1;
  for (int64_t a : reduce_axes(in, dims, "var")) n *= in[a];
  const Tensor input = autocast_float32(*this);
  if (is_half(input))  // computed in Float32, rounded once (src/half_compute.hpp)
    return rounded_once(input, [&](const Tensor& x) { return x.var(dims, correction, keepdim); });
  const Tensor deviation = input - input.mean(dims, true);
  const Tensor squares = (deviation * deviation).sum(dims, keepdim);
  // max(0, N - correction); a symbolic N is at least 1 (its bounds) but may be below a correction.
  if (n.is_symbolic())
    return squares /
           (size_scalar(n, squares.dtype()) - correction).maximum(Tensor::scalar(0.0, squares.dtype()));
  return squares /
         Tensor::scalar(std::max(0.0, static_cast<double>(n.value()) - correction), squares.dtype());
}

Tensor Tensor::std(std::vector<int> dims, double correction, bool keepdim) const {
  if (defined() && !dtype().is_float())
    throw Error(
        fmt::format("std: expected a float tensor, got {} (as in PyTorch)", scalar_name(dtype().scalar)));
  const Tensor input = autocast_float32(*this);
  if (is_half(input))  // sqrt of the Float32 variance, rounded once (src/half_compute.hpp)
    return rounded_once(input, [&](const Tensor& x) { return x.std(dims, correction, keepdim); });
  // sqrt of a safe 1 where the variance is 0, so its gradient there is 0 as PyTorch's (sqrt'(0)
  // would make it inf * 0 = NaN); the value there is 0.
  const Tensor v = input.var(std::move(dims), correction, keepdim);
  const Tensor zero = v.eq(0);
  return loom::where(zero, 0, loom::where(zero, 1, v).sqrt());
}

}  // namespace loom
