// The lazy Tensor front end: each op validates its input (errors name the op,
// the shapes/axes and what was expected) and builds tensor-level UOps.
// Composite ops are built from the primitives of docs/ir.md here, so
// the gradient and codegen need rules only for the primitives.
#include "src/tensor_ops.hpp"

#include "runtime/executor.hpp"
#include "schedule/schedule.hpp"
#include "src/autograd.hpp"
#include "src/in_place.hpp"
#include "src/tensor_views.hpp"

#include <cmath>
#include <cstring>
#include <limits>

namespace loom {

using namespace detail;

// ---- creation ----------------------------------------------------------------------
template <class T>
Tensor Tensor::from_vector(const std::vector<T>& data, Shape shape) {
  check_shape(shape, "from_vector", dtype_of<T>());
  if (count(shape) != static_cast<int64_t>(data.size()))
    throw Error(fmt::format("from_vector: {} values do not fill shape {} ({} elements)", data.size(),
                            str(shape), count(shape)));
  constexpr DType dt = dtype_of<T>();
  UOpPtr buf = detail::allocate_buffer(dt, static_cast<int64_t>(data.size()));
  auto* dst = static_cast<T*>(detail::buffer_data(buf));
  if constexpr (std::is_same_v<T, bool>)
    std::copy(data.begin(), data.end(), dst);  // vector<bool> is packed
  else if (!data.empty())
    std::memcpy(dst, data.data(), data.size() * sizeof(T));
  return make_tensor(reshape_uop(buf, shape));
}

Tensor Tensor::eye(int64_t n, DType dtype) {
  if (n < 0) throw Error(fmt::format("eye: size {} is negative", n));
  check_shape({n, n}, "eye", dtype);
  UOpPtr i = UOp::make(Op::IOTA, DType::Int32, {}, Shape{n});
  UOpPtr rows = expand_uop(reshape_uop(i, {n, 1}), {n, n}), cols = expand_uop(reshape_uop(i, {1, n}), {n, n});
  return make_tensor(cast_uop(loom::eq(rows, cols), dtype));
}

Tensor zeros_like(const Tensor& t) { return Tensor::zeros(t.shape(), t.dtype()); }
Tensor ones_like(const Tensor& t) { return Tensor::ones(t.shape(), t.dtype()); }
Tensor full_like(const Tensor& t, double value) { return Tensor::full(t.shape(), value, t.dtype()); }

Tensor Tensor::clone() const {
  const UOpPtr& x = uop(*this, "clone");
  return make_tensor(UOp::make(Op::CONTIGUOUS, x->dtype, {x}));
}

// Lazy, like every op: the tensor now holds ASSIGN(its buffer, value), and the
// engine writes into that buffer at realize when no other graph can observe it.
// A view writes through to its base (src/tensor_views.hpp).
namespace {
// `value` as PyTorch's copy_ writes it into a tensor of `shape` and `dtype`: broadcast to the
// shape (never the other way) and cast to the dtype.
UOpPtr copied_value(const Shape& shape, DType dtype, const UOpPtr& value) {
  const Shape& from = *value->shape();
  bool broadcasts = from.size() <= shape.size();
  for (size_t i = 1; broadcasts && i <= from.size(); ++i)
    broadcasts = from[from.size() - i] == 1 || from[from.size() - i] == shape[shape.size() - i];
  if (!broadcasts)
    throw Error(fmt::format(
        "assign: a value of shape {} cannot be written into a tensor of shape {} (expected a shape "
        "that broadcasts to it)",
        str(from), str(shape)));
  return cast_uop(expand_uop(value, shape), dtype);
}
}  // namespace

Tensor& Tensor::assign(const Tensor& value) {
  const UOpPtr& cur = uop(*this, "assign");
  const UOpPtr v = copied_value(*cur->shape(), cur->dtype, uop(value, "assign"));
  if (v == cur) return *this;
  if (node_->view) {
    detail::assign_through_view(*node_, v);
    return *this;
  }
  detail::forget_graph_behind(cur);  // the buffer's value changes: its old graph no longer describes it
  node_->backward_done = false;
  const UOpPtr target = cur->op == Op::ASSIGN ? cur->src[0] : cur;
  if (!is_buffer_view(target)) {  // nothing realized yet: the tensor simply becomes the value
    detail::point_at(*node_, v, detail::NewUOp::value);
    return *this;
  }
  // A view of another buffer is copied, never aliased.
  UOpPtr copy = is_buffer_view(v) ? UOp::make(Op::CONTIGUOUS, v->dtype, {v}) : v;
  detail::point_at(*node_, UOp::make(Op::ASSIGN, v->dtype, {target, copy}), detail::NewUOp::value);
  detail::note_assign(node_);
  return *this;
}

// loom::set_num_threads is the runtime's own (runtime/executor.cpp).
int get_num_threads() { return num_threads(); }

Tensor Tensor::scalar(double value, DType dtype) { return make_tensor(const_like(dtype, value)); }
Tensor Tensor::full(Shape shape, double value, DType dtype) {
  check_shape(shape, "full", dtype);
  return make_tensor(const_tensor(value, dtype, shape));
}
Tensor Tensor::zeros(Shape shape, DType dtype) {
  check_shape(shape, "zeros", dtype);
  return full(std::move(shape), 0.0, dtype);
}
Tensor Tensor::ones(Shape shape, DType dtype) {
  check_shape(shape, "ones", dtype);
  return full(std::move(shape), 1.0, dtype);
}
Tensor Tensor::arange(int64_t stop) { return arange(0, stop, 1); }
namespace {
// Elements of arange(start, stop, step), computed without overflow.
int64_t arange_count(int64_t start, int64_t stop, int64_t step) {
  if (step == 0) throw Error(fmt::format("arange: step must be non-zero (start {}, stop {})", start, stop));
  const __int128 span = static_cast<__int128>(stop) - start;
  const __int128 n = span == 0 || (span > 0) != (step > 0) ? 0 : (span - (step > 0 ? 1 : -1)) / step + 1;
  if (n > std::numeric_limits<int64_t>::max())
    throw Error(
        fmt::format("arange: {} to {} by {} has more elements than int64 can count", start, stop, step));
  return static_cast<int64_t>(n);
}
}  // namespace

Tensor Tensor::arange(int64_t start, int64_t stop, int64_t step) {
  const int64_t n = arange_count(start, stop, step);
  const int64_t last = n == 0 ? start : start + (n - 1) * step;  // between start and stop: no overflow
  const auto [lo, hi] = std::minmax(start, last);
  if (n > 0 && (lo < std::numeric_limits<int32_t>::min() || hi > std::numeric_limits<int32_t>::max()))
    throw Error(
        fmt::format("arange: the values {} to {} leave the Int32 range of arange(start, stop, step); "
                    "use arange({}, {}, {}, DType::Int64)",
                    start, last, start, stop, step));
  check_shape({n}, "arange", DType::Int32);
  UOpPtr i = UOp::make(Op::IOTA, DType::Int32, {}, Shape{n});
  return make_tensor(i * const_tensor(static_cast<double>(step), DType::Int32, {n}) +
                     const_tensor(static_cast<double>(start), DType::Int32, {n}));
}

Tensor Tensor::arange(int64_t start, int64_t stop, int64_t step, DType dtype) {
  if (dtype == DType::Int32) return arange(start, stop, step);
  if (dtype.is_bool()) throw Error("arange: dtype Bool is not supported (expected a number dtype)");
  const int64_t n = arange_count(start, stop, step);
  const int64_t last = n == 0 ? start : start + (n - 1) * step;
  if (dtype == DType::UInt8 && n > 0 && (std::min(start, last) < 0 || std::max(start, last) > 255))
    throw Error(fmt::format("arange: the values {} to {} leave the UInt8 range [0, 255]", start, last));
  check_shape({n}, "arange", dtype);
  auto exact = [n](int64_t v) {  // an Int64 constant of shape (n), exact beyond 2^53
    return expand_uop(reshape_uop(const_int(DType::Int64, v), {1}), {n});
  };
  UOpPtr i = UOp::make(Op::IOTA, DType::Int64, {}, Shape{n});
  return make_tensor(cast_uop(i * exact(step) + exact(start), dtype));
}

Tensor Tensor::arange(const Dim& stop) { return arange(0, stop, 1, DType::Int32); }
Tensor Tensor::arange(int64_t start, const Dim& stop, int64_t step) {
  return arange(start, stop, step, DType::Int32);
}

// A symbolic stop: start, start + step, ... below stop for the bound value, the count an
// expression over the variable. A positive step, and a stop at least start for every value
// the variable may take, so the count is never negative.
Tensor Tensor::arange(int64_t start, const Dim& stop, int64_t step, DType dtype) {
  if (!stop.is_symbolic()) return arange(start, stop.value(), step, dtype);
  if (step <= 0)
    throw Error(fmt::format("arange: a symbolic stop {} takes a positive step, got {}", stop, step));
  if (stop.min() < start)
    throw Error(fmt::format("arange: the symbolic stop {} may be below start {} (its least value is {})",
                            stop, start, stop.min()));
  if (dtype.is_bool()) throw Error("arange: dtype Bool is not supported (expected a number dtype)");
  // The widest the values get, checked as a numeric arange would check it.
  (void)arange_count(start, stop.max(), step);
  const int64_t last = stop.max() == start ? start : start + (stop.max() - start - 1) / step * step;
  if (dtype == DType::Int32 &&
      (start < std::numeric_limits<int32_t>::min() || last > std::numeric_limits<int32_t>::max()))
    throw Error(fmt::format(
        "arange: the values {} to {} (at {}'s largest value) leave the Int32 range; use DType::Int64", start,
        last, stop));
  if (dtype == DType::UInt8 && (start < 0 || last > 255))
    throw Error(
        fmt::format("arange: the values {} to {} (at {}'s largest value) leave the UInt8 range [0, 255]",
                    start, last, stop));
  const Dim n = (stop - start + (step - 1)) / step;
  check_shape({n}, "arange", dtype);
  auto exact = [&n](int64_t v) { return expand_uop(reshape_uop(const_int(DType::Int64, v), {1}), {n}); };
  const UOpPtr i = UOp::make(Op::IOTA, DType::Int64, {}, Shape{n});
  return make_tensor(cast_uop(i * exact(step) + exact(start), dtype));
}

// ---- properties ------------------------------------------------------------------------
const detail::TensorNode& Tensor::checked(const char* op) const {
  if (!node_) throw Error(fmt::format("{}: the tensor is undefined (default-constructed)", op));
  return *node_;
}
const Shape& Tensor::shape() const { return *checked("shape").uop->shape(); }
DType Tensor::dtype() const { return checked("dtype").uop->dtype; }
int64_t Tensor::numel() const { return count(shape()); }
int64_t Tensor::ndim() const { return static_cast<int64_t>(shape().size()); }

Tensor Tensor::scalar_like(double v, bool is_float) const { return scalar_for(*this, v, is_float); }
Tensor scalar_for(const Tensor& like, double v, bool is_float) {
  if (!like.defined())
    throw Error(
        fmt::format("an operator between a tensor and the number {}: the tensor is undefined "
                    "(default-constructed)",
                    v));
  return Tensor::scalar(v, promote_with_scalar(like.dtype(), is_float));
}

// ---- realization and reading -------------------------------------------------------------------------
Tensor& Tensor::realize() & {
  checked("realize");
  detail::realize_nodes({node_});
  return *this;
}
Tensor Tensor::realize() && {
  checked("realize");
  detail::realize_nodes({node_});
  return std::move(*this);
}
Tensor Tensor::contiguous() const {
  const UOpPtr& x = uop(*this, "contiguous");
  return make_tensor(UOp::make(Op::CONTIGUOUS, x->dtype, {x}));
}

void realize(std::vector<Tensor> tensors) {
  std::vector<std::shared_ptr<detail::TensorNode>> nodes;
  for (const auto& t : tensors) {
    uop(t, "realize");
    nodes.push_back(t.node());
  }
  detail::realize_nodes(nodes);
}

std::vector<unsigned char> Tensor::read_bytes(DType expected, const char* op) const {
  const detail::TensorNode& n = checked(op);
  if (!(n.uop->dtype == expected))
    throw Error(fmt::format(
        "{}: the tensor has dtype {} but {} was asked for; use cast({}) or the matching type", op,
        scalar_name(n.uop->dtype.scalar), scalar_name(expected.scalar), scalar_name(expected.scalar)));
  detail::realize_nodes({node_});
  const UOpPtr& view = node_->uop;
  const UOpPtr& buf = view->op == Op::RESHAPE ? view->src[0] : view;
  const size_t bytes = static_cast<size_t>(count(*view->shape())) * expected.itemsize();
  const auto* p = static_cast<const unsigned char*>(detail::buffer_data(buf));
  return std::vector<unsigned char>(p, p + bytes);
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  auto bytes = read_bytes(dtype_of<T>(), "to_vector");
  std::vector<T> out(bytes.size() / sizeof(T));
  if constexpr (std::is_same_v<T, bool>) {
    for (size_t i = 0; i < out.size(); ++i) out[i] = bytes[i] != 0;
  } else if (!out.empty()) {
    std::memcpy(out.data(), bytes.data(), bytes.size());
  }
  return out;
}

template <class T>
T Tensor::item() const {
  if (numel() != 1)
    throw Error(fmt::format("item: the tensor of shape {} has {} elements; item() needs exactly one",
                            str(shape()), numel()));
  auto bytes = read_bytes(dtype_of<T>(), "item");
  if constexpr (std::is_same_v<T, bool>) return bytes.at(0) != 0;
  T v;
  std::memcpy(&v, bytes.data(), sizeof(T));
  return v;
}

#define LOOM_INSTANTIATE(T)                                             \
  template Tensor Tensor::from_vector<T>(const std::vector<T>&, Shape); \
  template std::vector<T> Tensor::to_vector<T>() const;                 \
  template T Tensor::item<T>() const;
LOOM_INSTANTIATE(float)
LOOM_INSTANTIATE(double)
LOOM_INSTANTIATE(int32_t)
LOOM_INSTANTIATE(int64_t)
LOOM_INSTANTIATE(uint8_t)
LOOM_INSTANTIATE(bool)
LOOM_INSTANTIATE(bfloat16)
LOOM_INSTANTIATE(float16)
#undef LOOM_INSTANTIATE

}  // namespace loom
