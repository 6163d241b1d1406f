// matmul with numpy's rules: a broadcast multiply [.., m, n, k] summed over k,
// so the kernel is one REDUCE over k with both operands read in place.
#include "src/autocast.hpp"
#include "src/tensor_ops.hpp"

namespace loom {

using namespace detail;

namespace {
// The batch dimensions (all but the last two) of both operands, broadcast.
Shape batch_shape(const Shape& a, const Shape& b, const Shape& a_user, const Shape& b_user) {
  const Shape ab(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
  try {
    return broadcast_shape(ab, bb, "matmul");
  } catch (const Error&) {
    throw Error(fmt::format("matmul: batch dimensions {} and {} of {} @ {} cannot be broadcast together",
                            str(ab), str(bb), str(a_user), str(b_user)));
  }
}

Shape concat(Shape s, std::initializer_list<Dim> tail) {
  s.insert(s.end(), tail);
  return s;
}
}  // namespace

// A 1-D left operand is a row [1, k] and a 1-D right operand a column [k, 1]; the added axis is
// removed from the result. The dtype is that of a * b (Bool @ Bool counts in Int32).
Tensor Tensor::matmul(const Tensor& other) const {
  // Under Autocast: bf16- or f16-rounded operands, multiplied and summed in Float32, the result
  // rounded once to the autocast dtype (the half matmul below).
  if (autocasts({this, &other})) {
    // The operands are rounded while the scope is on: out of it, autocast_dtype() is empty.
    const Tensor a = autocast_operand(*this), b = autocast_operand(other);
    const Autocast off(*autocast_dtype(), false);
    return a.matmul(b);
  }
  const UOpPtr &x = uop(*this, "matmul"), &y = uop(other, "matmul");
  const Shape &xu = *x->shape(), &yu = *y->shape();
  if (xu.empty() || yu.empty())
    throw Error(
        fmt::format("matmul: both operands need at least one dimension, got {} @ {}", str(xu), str(yu)));
  const Shape xs = xu.size() == 1 ? Shape{1, xu[0]} : xu;
  const Shape ys = yu.size() == 1 ? Shape{yu[0], 1} : yu;
  const Dim m = xs[xs.size() - 2], k = xs.back(), n = ys.back();
  if (k != ys[ys.size() - 2])
    throw Error(fmt::format("matmul: inner dimensions do not match: {} @ {} ({} vs {})", str(xu), str(yu),
                            k.str(), ys[ys.size() - 2].str()));
  const Shape batch = batch_shape(xs, ys, xu, yu);
  const DType out_dt = arithmetic_dtype(*this, other, "matmul");
  // Halves multiply and accumulate in Float32 (their products are exact there) and round once.
  const DType dt = out_dt.is_half() ? DType::Float32 : out_dt;
  // x as [.., m, 1, k] and y^T as [.., 1, n, k], both expanded to [.., m, n, k].
  const Shape wide = concat(batch, {m, n, k});
  Shape x_rows(xs.begin(), xs.end() - 1);
  const UOpPtr a = expand_uop(reshape_uop(cast_uop(x, dt), concat(x_rows, {1, k})), wide);
  std::vector<int> order(ys.size());
  std::iota(order.begin(), order.end(), 0);
  std::swap(order[order.size() - 1], order[order.size() - 2]);
  const Shape yt_rows(ys.begin(), ys.end() - 2);
  const UOpPtr yt = uop(make_tensor(reshape_uop(y, ys)).permute(order), "matmul");
  const UOpPtr b = expand_uop(reshape_uop(cast_uop(yt, dt), concat(yt_rows, {1, n, k})), wide);
  const int64_t k_axis = static_cast<int64_t>(wide.size()) - 1;
  const UOpPtr prod = UOp::make(Op::REDUCE_AXIS, dt, {a * b}, ReduceArg{Op::ADD, {k_axis}});
  Shape out = concat(batch, {});
  if (xu.size() > 1) out.push_back(m);
  if (yu.size() > 1) out.push_back(n);
  return make_tensor(cast_uop(reshape_uop(prod, out), out_dt));
}

Tensor matmul(const Tensor& a, const Tensor& b) { return a.matmul(b); }

}  // namespace loom
