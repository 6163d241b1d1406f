// The lazy Tensor front end: each op validates its input (errors name the op,
// the shapes/axes and what was expected) and builds tensor-level UOps.
// Composite ops are built from the primitives of shared/DESIGN.md §2 here, so
// the gradient and codegen need rules only for the primitives.
#include "src/engine.hpp"
#include "src/tensor_node.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

namespace loom {

using detail::make_tensor;

namespace {

std::string str(const Shape& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }
int64_t count(const Shape& s) { return std::accumulate(s.begin(), s.end(), int64_t{1}, std::multiplies<>()); }

template <class T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, float>) return DType::Float32;
  else if constexpr (std::is_same_v<T, double>) return DType::Float64;
  else if constexpr (std::is_same_v<T, int32_t>) return DType::Int32;
  else if constexpr (std::is_same_v<T, int64_t>) return DType::Int64;
  else if constexpr (std::is_same_v<T, uint8_t>) return DType::UInt8;
  else {
    static_assert(std::is_same_v<T, bool>, "loom tensors hold float, double, int32_t, int64_t, uint8_t or bool");
    return DType::Bool;
  }
}

void check_shape(const Shape& s, const char* op) {
  for (int64_t d : s)
    if (d < 0) throw Error(fmt::format("{}: shape {} has a negative size", op, str(s)));
}

int norm_axis(int axis, size_t ndim, const char* op) {
  const int n = static_cast<int>(ndim);
  if (axis < -n || axis >= n || (n == 0 && axis != 0 && axis != -1))
    throw Error(fmt::format("{}: axis {} is out of range for a tensor of {} dimension{} (expected {} to {})", op,
                            axis, n, n == 1 ? "" : "s", -std::max(n, 1), std::max(n, 1) - 1));
  return axis < 0 ? axis + std::max(n, 1) : axis;
}

UOpPtr reshape_uop(const UOpPtr& u, const Shape& shape) {
  if (*u->shape() == shape) return u;
  const UOpPtr& base = u->op == Op::RESHAPE ? u->src[0] : u;  // a reshape of a reshape is one reshape
  if (*base->shape() == shape) return base;
  return UOp::make(Op::RESHAPE, u->dtype, {base}, shape);
}

UOpPtr expand_uop(const UOpPtr& u, const Shape& shape) {
  Shape padded(shape.size() - u->shape()->size(), 1);
  padded.insert(padded.end(), u->shape()->begin(), u->shape()->end());
  UOpPtr r = reshape_uop(u, padded);
  return padded == shape ? r : UOp::make(Op::EXPAND, u->dtype, {r}, shape);
}

UOpPtr cast_uop(const UOpPtr& u, DType dt) { return u->dtype == dt ? u : UOp::make(Op::CAST, dt, {u}); }

UOpPtr const_tensor(double v, DType dt, const Shape& shape) { return expand_uop(const_like(dt, v), shape); }

Shape broadcast_shape(const Shape& a, const Shape& b, const char* op) {
  Shape out(std::max(a.size(), b.size()));
  for (size_t i = 0; i < out.size(); ++i) {
    const int64_t da = i < out.size() - a.size() ? 1 : a[i - (out.size() - a.size())];
    const int64_t db = i < out.size() - b.size() ? 1 : b[i - (out.size() - b.size())];
    if (da != db && da != 1 && db != 1)
      throw Error(fmt::format("{}: shapes {} and {} cannot be broadcast together (axis {}: {} vs {})", op, str(a),
                              str(b), static_cast<int64_t>(i) - static_cast<int64_t>(out.size()), da, db));
    out[i] = da == 1 ? db : da;
  }
  return out;
}

const UOpPtr& uop(const Tensor& t, const char* op) {
  if (!t.defined()) throw Error(fmt::format("{}: the tensor is undefined (default-constructed)", op));
  return t.node()->uop;
}

// Both operands broadcast to one shape and cast to `dt`.
std::pair<UOpPtr, UOpPtr> operands(const Tensor& a, const Tensor& b, DType dt, const char* op) {
  const UOpPtr &x = uop(a, op), &y = uop(b, op);
  Shape s = broadcast_shape(*x->shape(), *y->shape(), op);
  return {cast_uop(expand_uop(x, s), dt), cast_uop(expand_uop(y, s), dt)};
}

DType arithmetic_dtype(const Tensor& a, const Tensor& b) {
  DType dt = promote(a.dtype(), b.dtype());
  return dt.is_bool() ? DType::Int32 : dt;  // arithmetic on Bool computes as Int32
}

Tensor binary(Op op, const Tensor& a, const Tensor& b, DType dt, const char* name) {
  auto [x, y] = operands(a, b, dt, name);
  return make_tensor(alu(op, {x, y}));
}

DType float_dtype(DType dt) { return dt.is_float() ? dt : DType::Float32; }

Tensor unary_float(const Tensor& t, const char* op, auto build) {
  UOpPtr x = uop(t, op);
  return make_tensor(build(cast_uop(x, float_dtype(x->dtype))));
}

}  // namespace

// ---- creation ----------------------------------------------------------------------
template <class T>
Tensor Tensor::from_vector(const std::vector<T>& data, Shape shape) {
  check_shape(shape, "from_vector");
  if (count(shape) != static_cast<int64_t>(data.size()))
    throw Error(fmt::format("from_vector: {} values do not fill shape {} ({} elements)", data.size(), str(shape),
                            count(shape)));
  constexpr DType dt = dtype_of<T>();
  UOpPtr buf = detail::allocate_buffer(dt, static_cast<int64_t>(data.size()));
  auto* dst = static_cast<T*>(detail::buffer_data(buf));
  if constexpr (std::is_same_v<T, bool>) std::copy(data.begin(), data.end(), dst);  // vector<bool> is packed
  else if (!data.empty()) std::memcpy(dst, data.data(), data.size() * sizeof(T));
  return make_tensor(reshape_uop(buf, shape));
}

Tensor Tensor::scalar(double value, DType dtype) { return make_tensor(const_like(dtype, value)); }
Tensor Tensor::full(Shape shape, double value, DType dtype) {
  check_shape(shape, "full");
  return make_tensor(const_tensor(value, dtype, shape));
}
Tensor Tensor::zeros(Shape shape, DType dtype) { return full(std::move(shape), 0.0, dtype); }
Tensor Tensor::ones(Shape shape, DType dtype) { return full(std::move(shape), 1.0, dtype); }
Tensor Tensor::arange(int64_t stop) { return arange(0, stop, 1); }
Tensor Tensor::arange(int64_t start, int64_t stop, int64_t step) {
  if (step == 0) throw Error(fmt::format("arange: step must be non-zero (start {}, stop {})", start, stop));
  const int64_t n = std::max<int64_t>(0, (stop - start + step - (step > 0 ? 1 : -1)) / step);
  std::vector<int32_t> values(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) values[i] = static_cast<int32_t>(start + i * step);
  return from_vector(values, {n});
}

// ---- properties ------------------------------------------------------------------------
const detail::TensorNode& Tensor::checked(const char* op) const {
  if (!node_) throw Error(fmt::format("{}: the tensor is undefined (default-constructed)", op));
  return *node_;
}
const Shape& Tensor::shape() const { return *checked("shape").uop->shape(); }
DType Tensor::dtype() const { return checked("dtype").uop->dtype; }
int64_t Tensor::numel() const { return count(shape()); }

Tensor Tensor::scalar_like(double v, bool is_float) const { return scalar_for(*this, v, is_float); }
Tensor scalar_for(const Tensor& like, double v, bool is_float) {
  return Tensor::scalar(v, promote_with_scalar(like.dtype(), is_float));
}

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

// ---- reductions ---------------------------------------------------------------------------------
Tensor Tensor::reduce(int op_int, std::vector<int> axes, bool keepdim, const char* name) const {
  const Op op = static_cast<Op>(op_int);
  UOpPtr x = uop(*this, name);
  const Shape& in = *x->shape();
  std::vector<int64_t> ax;
  for (int a : axes) ax.push_back(norm_axis(a, in.size(), name));
  if (axes.empty())
    for (size_t i = 0; i < in.size(); ++i) ax.push_back(static_cast<int64_t>(i));
  std::sort(ax.begin(), ax.end());
  ax.erase(std::unique(ax.begin(), ax.end()), ax.end());
  if (in.empty()) return make_tensor(x);  // a 0-d tensor reduces to itself
  for (int64_t a : ax)
    if (in[a] == 0 && op == Op::MAX)
      throw Error(fmt::format("{}: cannot reduce axis {} of size 0 in shape {} (the reduction has no identity)",
                              name, a, str(in)));
  UOpPtr r = UOp::make(Op::REDUCE_AXIS, x->dtype, {x}, ReduceArg{op, ax});
  if (keepdim) return make_tensor(r);
  Shape out;
  for (size_t i = 0; i < in.size(); ++i)
    if (!std::binary_search(ax.begin(), ax.end(), static_cast<int64_t>(i))) out.push_back(in[i]);
  return make_tensor(reshape_uop(r, out));
}
Tensor Tensor::sum(std::vector<int> axes, bool keepdim) const {
  DType dt = dtype();
  Tensor x = dt.is_bool() || dt == DType::UInt8 ? cast(DType::Int32) : *this;  // PyTorch: sums of small ints are wider
  return x.reduce(static_cast<int>(Op::ADD), std::move(axes), keepdim, "sum");
}
Tensor Tensor::max(std::vector<int> axes, bool keepdim) const {
  return reduce(static_cast<int>(Op::MAX), std::move(axes), keepdim, "max");
}

// ---- movement ----------------------------------------------------------------------------------------
Tensor Tensor::reshape(Shape shape) const {
  const UOpPtr& x = uop(*this, "reshape");
  const int64_t n = count(*x->shape());
  auto infer = std::find(shape.begin(), shape.end(), -1);
  if (infer != shape.end()) {
    if (std::count(shape.begin(), shape.end(), -1) > 1)
      throw Error(fmt::format("reshape: only one size may be -1, got {}", str(shape)));
    int64_t known = -count(shape);
    if (known == 0 || n % known != 0)
      throw Error(fmt::format("reshape: cannot infer the -1 in {} for a tensor of shape {} ({} elements)", str(shape),
                              str(*x->shape()), n));
    *infer = n / known;
  }
  check_shape(shape, "reshape");
  if (count(shape) != n)
    throw Error(fmt::format("reshape: cannot reshape a tensor of shape {} ({} elements) to {} ({} elements)",
                            str(*x->shape()), n, str(shape), count(shape)));
  return make_tensor(reshape_uop(x, shape));
}

Tensor Tensor::permute(std::vector<int> order) const {
  const UOpPtr& x = uop(*this, "permute");
  const Shape& in = *x->shape();
  if (order.size() != in.size())
    throw Error(fmt::format("permute: order {} has {} entries but the tensor of shape {} has {} dimensions",
                            str(Shape(order.begin(), order.end())), order.size(), str(in), in.size()));
  std::vector<int64_t> ord;
  std::vector<bool> seen(in.size());
  for (int a : order) {
    int64_t n = norm_axis(a, in.size(), "permute");
    if (seen[n])
      throw Error(fmt::format("permute: order {} is not a permutation of the {} axes (axis {} repeats)",
                              str(Shape(order.begin(), order.end())), in.size(), n));
    seen[n] = true;
    ord.push_back(n);
  }
  bool identity = true;
  for (size_t i = 0; i < ord.size(); ++i) identity &= ord[i] == static_cast<int64_t>(i);
  return identity ? *this : make_tensor(UOp::make(Op::PERMUTE, x->dtype, {x}, ord));
}

Tensor Tensor::expand(Shape shape) const {
  const UOpPtr& x = uop(*this, "expand");
  const Shape& in = *x->shape();
  if (shape.size() < in.size())
    throw Error(fmt::format("expand: cannot expand shape {} to {} (fewer dimensions)", str(in), str(shape)));
  const size_t lead = shape.size() - in.size();
  for (size_t i = 0; i < shape.size(); ++i) {
    const int64_t from = i < lead ? 1 : in[i - lead];
    if (shape[i] == -1 && i >= lead) shape[i] = from;
    if (shape[i] < 0 || (from != 1 && from != shape[i]))
      throw Error(fmt::format("expand: cannot expand shape {} to {} (axis {}: size {} is neither 1 nor {})", str(in),
                              str(shape), i, from, shape[i]));
  }
  return make_tensor(expand_uop(x, shape));
}

Tensor Tensor::pad(std::vector<std::pair<int64_t, int64_t>> padding) const {
  const UOpPtr& x = uop(*this, "pad");
  const Shape& in = *x->shape();
  if (padding.size() != in.size())
    throw Error(fmt::format("pad: {} (lo, hi) pairs given for a tensor of shape {} ({} dimensions); expected one per axis",
                            padding.size(), str(in), in.size()));
  std::vector<int64_t> flat;
  for (size_t i = 0; i < in.size(); ++i) {
    if (padding[i].first < 0 || padding[i].second < 0)
      throw Error(fmt::format("pad: axis {} padding ({}, {}) is negative (use shrink to cut)", i, padding[i].first,
                              padding[i].second));
    flat.push_back(padding[i].first);
    flat.push_back(padding[i].second);
  }
  if (std::all_of(flat.begin(), flat.end(), [](int64_t v) { return v == 0; })) return *this;
  return make_tensor(UOp::make(Op::PAD, x->dtype, {x}, flat));
}

Tensor Tensor::shrink(std::vector<std::pair<int64_t, int64_t>> bounds) const {
  const UOpPtr& x = uop(*this, "shrink");
  const Shape& in = *x->shape();
  if (bounds.size() != in.size())
    throw Error(fmt::format("shrink: {} (start, end) pairs given for a tensor of shape {}; expected one per axis",
                            bounds.size(), str(in)));
  std::vector<int64_t> flat;
  bool identity = true;
  for (size_t i = 0; i < in.size(); ++i) {
    auto [lo, hi] = bounds[i];
    if (lo < 0 || hi < lo || hi > in[i])
      throw Error(fmt::format("shrink: axis {} bounds ({}, {}) are out of range for size {} in shape {} (expected 0 <= "
                              "start <= end <= {})",
                              i, lo, hi, in[i], str(in), in[i]));
    identity &= lo == 0 && hi == in[i];
    flat.push_back(lo);
    flat.push_back(hi);
  }
  return identity ? *this : make_tensor(UOp::make(Op::SHRINK, x->dtype, {x}, flat));
}

Tensor Tensor::flip(std::vector<int> axes) const {
  const UOpPtr& x = uop(*this, "flip");
  std::vector<int64_t> ax;
  for (int a : axes) ax.push_back(norm_axis(a, x->shape()->size(), "flip"));
  std::sort(ax.begin(), ax.end());
  ax.erase(std::unique(ax.begin(), ax.end()), ax.end());
  if (ax.empty() || x->shape()->empty()) return *this;
  return make_tensor(UOp::make(Op::FLIP, x->dtype, {x}, ax));
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
    throw Error(fmt::format("{}: the tensor has dtype {} but {} was asked for; use cast({}) or the matching type",
                            op, scalar_name(n.uop->dtype.scalar), scalar_name(expected.scalar),
                            scalar_name(expected.scalar)));
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
    throw Error(fmt::format("item: the tensor of shape {} has {} elements; item() needs exactly one", str(shape()),
                            numel()));
  return to_vector<T>().at(0);
}

#define LOOM_INSTANTIATE(T)                                              \
  template Tensor Tensor::from_vector<T>(const std::vector<T>&, Shape); \
  template std::vector<T> Tensor::to_vector<T>() const;                \
  template T Tensor::item<T>() const;
LOOM_INSTANTIATE(float)
LOOM_INSTANTIATE(double)
LOOM_INSTANTIATE(int32_t)
LOOM_INSTANTIATE(int64_t)
LOOM_INSTANTIATE(uint8_t)
LOOM_INSTANTIATE(bool)
#undef LOOM_INSTANTIATE

}  // namespace loom
