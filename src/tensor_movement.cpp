// Movement ops: validated, then tensor-level movement UOps. The composites
// (slice with a step, cat, stack, gather, index_select, one_hot) are built from
// movement ops, IOTA and compares only, so each fuses into its consumer's kernel.
#include "src/composites.hpp"
#include "src/tensor_ops.hpp"
#include "src/tensor_views.hpp"

#include <cmath>
#include <optional>

namespace loom {

using namespace detail;

namespace {
// An axis where a new one is inserted: [-ndim-1, ndim], as for unsqueeze and stack.
int norm_insert_axis(int axis, size_t ndim, const char* op) {
  const int n = static_cast<int>(ndim);
  if (axis < -n - 1 || axis > n)
    throw Error(
        fmt::format("{}: axis {} is out of range for inserting into a tensor of {} dimension{} (expected {} "
                    "to {})",
                    op, axis, n, n == 1 ? "" : "s", -n - 1, n));
  return axis < 0 ? axis + n + 1 : axis;
}

Shape inserted(Shape s, int axis, int64_t size) {
  s.insert(s.begin() + axis, size);
  return s;
}

// PyTorch's clamping of a slice bound: negative counts from the end, then into [0, size].
// A symbolic bound is taken as given (shrink checks it against the size for every value).
Dim clamp_bound(Dim b, const Dim& size) {
  if (b.is_symbolic()) return b;
  if (b < 0) b = b + size;
  if (!b.is_symbolic() && !size.is_symbolic()) return std::clamp<int64_t>(b, 0, size);
  return loom::max(Dim(0), loom::min(b, size));
}

// gather and index_select index with integers; Bool and floats are refused as in PyTorch.
void check_index(const UOpPtr& index, const char* op) {
  if (!index->dtype.is_int())
    throw Error(fmt::format("{}: index has dtype {}; expected an integer dtype (Int64, Int32 or UInt8)", op,
                            to_string(index->dtype)));
}

// 0, 1, ..., n-1 along `axis` of `shape` (which has n there), broadcast over the other axes.
UOpPtr iota_along(const Shape& shape, size_t axis) {
  Shape along(shape.size(), 1);
  along[axis] = shape[axis];
  return expand_uop(reshape_uop(UOp::make(Op::IOTA, DType::Int32, {}, Shape{shape[axis]}), along), shape);
}

// The integer dtype of the same width whose bits carry a value exactly through a masked sum.
DType bits_dtype(DType dt) {
  if (dt == DType::Float32) return DType::Int32;
  if (dt == DType::Float64) return DType::Int64;
  return dt.is_bool() ? DType::UInt8 : dt;
}
UOpPtr to_bits(const UOpPtr& x) {
  const DType b = bits_dtype(x->dtype);
  return x->dtype.is_float() ? UOp::make(Op::BITCAST, b, {x}) : cast_uop(x, b);
}
UOpPtr from_bits(const UOpPtr& x, DType dt) {
  return dt.is_float() ? UOp::make(Op::BITCAST, dt, {x}) : cast_uop(x, dt);
}
}  // namespace

// ---- movement ----------------------------------------------------------------------------------------
Tensor Tensor::reshape(Shape shape) const {
  const UOpPtr& x = uop(*this, "reshape");
  const Dim n = count(*x->shape());
  auto infer = std::find(shape.begin(), shape.end(), -1);
  if (infer != shape.end()) {
    if (std::count(shape.begin(), shape.end(), -1) > 1)
      throw Error(fmt::format("reshape: only one size may be -1, got {}", str(shape)));
    Shape others = shape;
    *(others.begin() + (infer - shape.begin())) = 1;
    check_shape(others, "reshape", x->dtype);
    const Dim known = count(others);
    if (known == 0 || n % known != 0)
      throw Error(fmt::format("reshape: cannot infer the -1 in {} for a tensor of shape {} ({} elements)",
                              str(shape), str(*x->shape()), n));
    *infer = n / known;
  }
  check_shape(shape, "reshape", x->dtype);
  if (count(shape) != n)
    throw Error(fmt::format("reshape: cannot reshape a tensor of shape {} ({} elements) to {} ({} elements)",
                            str(*x->shape()), n, str(shape), count(shape)));
  return view_tensor(*this, {Op::RESHAPE, shape}, reshape_uop(x, shape));
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
  return identity ? *this
                  : view_tensor(*this, {Op::PERMUTE, ord}, UOp::make(Op::PERMUTE, x->dtype, {x}, ord));
}

Tensor Tensor::expand(Shape shape) const {
  const UOpPtr& x = uop(*this, "expand");
  const Shape& in = *x->shape();
  if (shape.size() < in.size())
    throw Error(fmt::format("expand: cannot expand shape {} to {} (fewer dimensions)", str(in), str(shape)));
  const size_t lead = shape.size() - in.size();
  for (size_t i = 0; i < shape.size(); ++i) {
    const Dim from = i < lead ? Dim(1) : in[i - lead];
    if (shape[i] == -1 && i >= lead) shape[i] = from;
    if (shape[i] < 0 || (from != 1 && from != shape[i]))
      throw Error(fmt::format("expand: cannot expand shape {} to {} (axis {}: size {} is neither 1 nor {})",
                              str(in), str(shape), i, from, shape[i]));
  }
  check_shape(shape, "expand", x->dtype);
  return view_tensor(*this, {Op::EXPAND, shape}, expand_uop(x, shape));
}

Tensor Tensor::pad(std::vector<std::pair<int64_t, int64_t>> padding, double value) const {
  const UOpPtr& x = uop(*this, "pad");
  const Shape& in = *x->shape();
  if (padding.size() != in.size())
    throw Error(fmt::format(
        "pad: {} (lo, hi) pairs given for a tensor of shape {} ({} dimensions); expected one per axis",
        padding.size(), str(in), in.size()));
  Shape flat, padded_shape;
  for (size_t i = 0; i < in.size(); ++i) {
    if (padding[i].first < 0 || padding[i].second < 0)
      throw Error(fmt::format("pad: axis {} padding ({}, {}) is negative (use shrink to cut)", i,
                              padding[i].first, padding[i].second));
    // A symbolic size is padded symbolically (check_shape bounds the result).
    int64_t size = 0;
    if (!in[i].is_symbolic() && (__builtin_add_overflow(in[i].value(), padding[i].first, &size) ||
                                 __builtin_add_overflow(size, padding[i].second, &size)))
      throw Error(
          fmt::format("pad: axis {} of size {} padded by ({}, {}) has more elements than int64 can count", i,
                      in[i], padding[i].first, padding[i].second));
    flat.push_back(padding[i].first);
    flat.push_back(padding[i].second);
    padded_shape.push_back(in[i].is_symbolic() ? in[i] + padding[i].first + padding[i].second : Dim(size));
  }
  check_shape(padded_shape, "pad", x->dtype);
  if (std::all_of(flat.begin(), flat.end(), [](const Dim& v) { return v == 0; })) return *this;
  UOpPtr padded = UOp::make(Op::PAD, x->dtype, {x}, flat);
  if (value == 0) return make_tensor(padded);
  // PAD fills with 0; another value goes where a padded all-true mask is false.
  UOpPtr inside = UOp::make(Op::PAD, DType::Bool, {const_tensor(1, DType::Bool, in)}, flat);
  return make_tensor(loom::where(inside, padded, const_tensor(value, x->dtype, *padded->shape())));
}

Tensor Tensor::shrink(std::vector<std::pair<Dim, Dim>> bounds) const {
  const UOpPtr& x = uop(*this, "shrink");
  const Shape& in = *x->shape();
  if (bounds.size() != in.size())
    throw Error(
        fmt::format("shrink: {} (start, end) pairs given for a tensor of shape {}; expected one per axis",
                    bounds.size(), str(in)));
  Shape flat;
  bool identity = true;
  for (size_t i = 0; i < in.size(); ++i) {
    auto [lo, hi] = bounds[i];
    if (lo < 0 || hi < lo || hi > in[i])
      throw Error(fmt::format(
          "shrink: axis {} bounds ({}, {}) are out of range for size {} in shape {} (expected 0 <= "
          "start <= end <= {})",
          i, lo, hi, in[i], str(in), in[i]));
    identity &= lo == 0 && hi == in[i];
    flat.push_back(lo);
    flat.push_back(hi);
  }
  return identity ? *this
                  : view_tensor(*this, {Op::SHRINK, flat}, UOp::make(Op::SHRINK, x->dtype, {x}, flat));
}

Tensor Tensor::flip(std::vector<int> axes) const {
  const UOpPtr& x = uop(*this, "flip");
  std::vector<int64_t> ax;
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t a = norm_axis(axes[i], x->shape()->size(), "flip");
    for (size_t j = 0; j < i; ++j)
      if (ax[j] == a)  // as PyTorch: naming one axis twice is a mistake, not a double flip
        throw Error(fmt::format("flip: axis {} appears twice in {} (as {} and {})", a,
                                str(Shape(axes.begin(), axes.end())), axes[j], axes[i]));
    ax.push_back(a);
  }
  std::sort(ax.begin(), ax.end());
  if (ax.empty() || x->shape()->empty()) return *this;
  return make_tensor(UOp::make(Op::FLIP, x->dtype, {x}, ax));
}

Tensor Tensor::transpose(int a, int b) const {
  const size_t nd = uop(*this, "transpose")->shape()->size();
  const int i = norm_axis(a, nd, "transpose"), j = norm_axis(b, nd, "transpose");
  if (nd == 0) return *this;
  std::vector<int> order(nd);
  std::iota(order.begin(), order.end(), 0);
  std::swap(order[i], order[j]);
  return permute(order);
}

Tensor Tensor::squeeze(int axis) const {
  const UOpPtr& x = uop(*this, "squeeze");
  const Shape& in = *x->shape();
  const int a = norm_axis(axis, in.size(), "squeeze");
  if (in.empty() || in[a] != 1) return *this;
  Shape out = in;
  out.erase(out.begin() + a);
  return view_tensor(*this, {Op::RESHAPE, out}, reshape_uop(x, out));
}

Tensor Tensor::unsqueeze(int axis) const {
  const UOpPtr& x = uop(*this, "unsqueeze");
  const Shape out = inserted(*x->shape(), norm_insert_axis(axis, x->shape()->size(), "unsqueeze"), 1);
  return view_tensor(*this, {Op::RESHAPE, out}, reshape_uop(x, out));
}

// PyTorch's repeat: each axis of size d becomes [r, d] by a broadcast, then one axis of r*d. A
// view, like expand: the copies are index arithmetic in the consumer's kernel.
Tensor Tensor::repeat(Shape repeats) const {
  const UOpPtr& x = uop(*this, "repeat");
  const Shape& in = *x->shape();
  if (repeats.size() < in.size())
    throw Error(
        fmt::format("repeat: {} repeats given for a tensor of shape {} ({} dimensions); expected at "
                    "least one per dimension",
                    repeats.size(), str(in), in.size()));
  for (int64_t r : repeats)
    if (r < 0) throw Error(fmt::format("repeat: repeats {} has a negative count", str(repeats)));
  Shape full(repeats.size() - in.size(), 1);
  full.insert(full.end(), in.begin(), in.end());
  Shape pairs, wide, out;
  for (size_t i = 0; i < full.size(); ++i) {
    pairs.insert(pairs.end(), {1, full[i]});
    wide.insert(wide.end(), {repeats[i], full[i]});
    int64_t n = 0;
    if (__builtin_mul_overflow(repeats[i].concrete("repeat"), full[i].concrete("repeat"), &n))
      throw Error(fmt::format("repeat: repeating shape {} by {} overflows int64", str(in), str(repeats)));
    out.push_back(n);
  }
  check_shape(out, "repeat", x->dtype);
  return make_tensor(reshape_uop(expand_uop(reshape_uop(x, pairs), wide), out));
}

Tensor Tensor::flatten(int start, int end) const {
  const UOpPtr& x = uop(*this, "flatten");
  const Shape& in = *x->shape();
  const int s = norm_axis(start, in.size(), "flatten"), e = norm_axis(end, in.size(), "flatten");
  if (s > e)
    throw Error(
        fmt::format("flatten: start axis {} comes after end axis {} (normalised {} > {}) for shape {}", start,
                    end, s, e, str(in)));
  Shape out(in.begin(), in.begin() + s);
  if (in.empty())
    out = {1};  // PyTorch: a 0-d tensor flattens to [1]
  else {
    out.push_back(std::accumulate(in.begin() + s, in.begin() + e + 1, Dim{1}, std::multiplies<>()));
    out.insert(out.end(), in.begin() + e + 1, in.end());
  }
  return view_tensor(*this, {Op::RESHAPE, out}, reshape_uop(x, out));
}

// Every step-th element of [start, stop): shrink to the range, pad it to len*step, view it as
// [len, step] and keep column 0. The padding is never read.
Tensor Tensor::slice(int axis, Dim start, Dim stop, int64_t step) const {
  const UOpPtr& x = uop(*this, "slice");
  const Shape& in = *x->shape();
  if (in.empty()) throw Error("slice: cannot slice a 0-d tensor (it has no axes)");
  const int a = norm_axis(axis, in.size(), "slice");
  if (step <= 0)
    throw Error(fmt::format("slice: step must be positive, got {} (axis {}, shape {})", step, a, str(in)));
  const Dim lo = clamp_bound(start, in[a]);
  if (lo.is_symbolic() || in[a].is_symbolic() || stop.is_symbolic()) {
    if (step != 1)
      throw Error(
          fmt::format("slice: bounds ({}, {}) on axis {} of shape {} are symbolic; a symbolic slice "
                      "takes step 1, got {}",
                      start.str(), stop.str(), a, str(in), step));
    std::vector<std::pair<Dim, Dim>> bounds;
    for (const Dim& d : in) bounds.emplace_back(0, d);
    bounds[a] = {lo, clamp_bound(stop, in[a])};
    return shrink(bounds);
  }
  const int64_t lo_at = lo, stop_at = std::max<int64_t>(lo_at, clamp_bound(stop, in[a]));
  // (stop - lo - 1) / step + 1, not (stop - lo + step - 1) / step: a huge step must not overflow.
  const int64_t len = stop_at == lo_at ? 0 : (stop_at - lo_at - 1) / step + 1;
  if (len == 1) step = 1;  // one element: any step selects just lo, and the pad below stays small
  const int64_t hi = len == 1 ? lo_at + 1 : stop_at;
  std::vector<std::pair<Dim, Dim>> bounds;
  for (const Dim& d : in) bounds.emplace_back(0, d);
  bounds[a] = {lo_at, hi};
  const Tensor range = shrink(bounds);
  if (step == 1 || len == 0) return range;
  std::vector<std::pair<int64_t, int64_t>> padding(in.size(), {0, 0});
  padding[a].second = len * step - (hi - lo_at);
  Shape grouped = in;
  grouped[a] = len;
  grouped.insert(grouped.begin() + a + 1, step);
  bounds[a] = {0, len};
  bounds.insert(bounds.begin() + a + 1, std::pair<Dim, Dim>{0, 1});
  Shape out = in;
  out[a] = len;
  // The padding is part of the view (never read, never written through), not a copy as pad() is.
  Shape flat;
  for (const auto& [lo_pad, hi_pad] : padding) flat.insert(flat.end(), {lo_pad, hi_pad});
  const UOpPtr& r = uop(range, "slice");
  const Tensor padded = view_tensor(range, {Op::PAD, flat}, UOp::make(Op::PAD, r->dtype, {r}, flat));
  return padded.reshape(grouped).shrink(bounds).reshape(out);
}

// Every piece padded to the full length, selected by where its own rows are: one kernel, and
// exact (adding zeros would turn -0.0 into +0.0).
Tensor cat(const std::vector<Tensor>& tensors, int axis) {
  if (tensors.empty()) throw Error("cat: expected at least one tensor, got an empty list");
  const Shape first = *uop(tensors[0], "cat")->shape();
  if (first.empty()) throw Error("cat: tensor 0 is 0-d; expected tensors of at least one dimension");
  const int a = norm_axis(axis, first.size(), "cat");
  DType dt = tensors[0].dtype();
  int64_t total = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Shape& s = *uop(tensors[i], "cat")->shape();
    Shape want = first;
    if (s.size() == first.size()) want[a] = s[a];
    if (s != want)
      throw Error(
          fmt::format("cat: tensor {} has shape {} but tensor 0 has shape {}; shapes must match except on "
                      "axis {}",
                      i, str(s), str(first), a));
    dt = promote(dt, tensors[i].dtype());
    total += s[a];
  }
  Shape out = first;
  out[a] = total;
  std::optional<Tensor> acc;
  int64_t offset = 0;
  for (const Tensor& t : tensors) {
    const int64_t n = t.shape()[a];
    if (n == 0) continue;
    std::vector<std::pair<int64_t, int64_t>> padding(out.size(), {0, 0});
    padding[a] = {offset, total - offset - n};
    offset += n;
    const Tensor piece = t.cast(dt).pad(padding);
    acc = acc ? loom::where(Tensor::ones(t.shape(), DType::Bool).pad(padding), piece, *acc) : piece;
  }
  return acc ? *acc : Tensor::zeros(out, dt);
}

Tensor stack(const std::vector<Tensor>& tensors, int axis) {
  if (tensors.empty()) throw Error("stack: expected at least one tensor, got an empty list");
  const Shape first = *uop(tensors[0], "stack")->shape();
  const int a = norm_insert_axis(axis, first.size(), "stack");
  std::vector<Tensor> pieces;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Shape& s = *uop(tensors[i], "stack")->shape();
    if (s != first)
      throw Error(
          fmt::format("stack: tensor {} has shape {} but tensor 0 has shape {}; expected equal shapes", i,
                      str(s), str(first)));
    pieces.push_back(tensors[i].unsqueeze(a));
  }
  return cat(pieces, a);
}

// out[.., j, ..] = x[.., index[.., j, ..], ..] as a one-hot compare against IOTA over a new axis
// beside `axis`, summed away: O(n*k) work, fused into one kernel. The sum runs on the value's bits
// (a same-width integer), so the one selected value passes exactly (-0.0 and NaN payloads too).
// An index outside [0, n) selects nothing and gives 0 (PyTorch raises an error).
Tensor Tensor::gather(int axis, const Tensor& index) const {
  const UOpPtr &x = uop(*this, "gather"), &idx = uop(index, "gather");
  const Shape &xs = *x->shape(), &is = *idx->shape();
  check_index(idx, "gather");
  if (is.size() != xs.size())
    throw Error(
        fmt::format("gather: index of shape {} has {} dimensions but the input of shape {} has {}; expected "
                    "the same number",
                    str(is), is.size(), str(xs), xs.size()));
  const int a = norm_axis(axis, xs.size(), "gather");
  if (xs.empty()) return reshape({1}).gather(0, index.reshape({1})).reshape({});
  std::vector<std::pair<int64_t, int64_t>> bounds;
  for (size_t d = 0; d < xs.size(); ++d) {
    if (static_cast<int>(d) != a && is[d] > xs[d])
      throw Error(
          fmt::format("gather: index of shape {} is larger than the input of shape {} on axis {} ({} > {}); "
                      "only the gathered axis {} may be larger",
                      str(is), str(xs), d, is[d], xs[d], a));
    bounds.emplace_back(0, static_cast<int>(d) == a ? xs[d] : is[d]);
  }
  const int64_t n = xs[a];
  const Shape wide =
      inserted(is, a + 1, n);  // [.., k, n, ..]: the compare of every index with every position
  const UOpPtr source = uop(shrink(bounds), "gather");  // the index's shape with n on the axis
  const DType cmp = promote(idx->dtype, DType::Int32);
  const UOpPtr hit = loom::eq(cast_uop(expand_uop(reshape_uop(idx, inserted(is, a + 1, 1)), wide), cmp),
                              cast_uop(iota_along(wide, a + 1), cmp));
  return make_tensor(gather_select(source, hit, a, true));
}

UOpPtr detail::gather_select(const UOpPtr& source, const UOpPtr& hit, int64_t axis, bool bits) {
  const Shape& wide = *hit->shape();
  const UOpPtr s = bits ? to_bits(source) : source;
  const UOpPtr values = expand_uop(reshape_uop(s, inserted(*s->shape(), static_cast<int>(axis), 1)), wide);
  const UOpPtr picked = loom::where(hit, values, const_tensor(0, values->dtype, wide));
  const UOpPtr sum = UOp::make(Op::REDUCE_AXIS, picked->dtype, {picked}, ReduceArg{Op::ADD, {axis + 1}});
  Shape out = wide;
  out.erase(out.begin() + axis + 1);
  const UOpPtr r = reshape_uop(sum, out);
  return bits ? from_bits(r, source->dtype) : r;
}

// gather with the 1-D index broadcast over the other axes.
Tensor Tensor::index_select(int axis, const Tensor& index) const {
  const UOpPtr &x = uop(*this, "index_select"), &idx = uop(index, "index_select");
  const Shape &xs = *x->shape(), &is = *idx->shape();
  check_index(idx, "index_select");
  if (is.size() > 1)
    throw Error(
        fmt::format("index_select: index of shape {} has {} dimensions; expected a 1-D (or 0-d) index",
                    str(is), is.size()));
  const int a = norm_axis(axis, xs.size(), "index_select");
  if (xs.empty()) return reshape({1}).index_select(0, index).reshape(is.empty() ? Shape{} : Shape{count(is)});
  Shape along(xs.size(), 1), out = xs;
  along[a] = out[a] = count(is);
  return gather(a, make_tensor(expand_uop(reshape_uop(idx, along), out)));
}

// x[..., None] == arange(num_classes). A value outside [0, num_classes) gives an all-zero row
// (PyTorch raises an error; a lazy graph cannot inspect the data).
Tensor Tensor::one_hot(int64_t num_classes) const {
  const UOpPtr& x = uop(*this, "one_hot");
  if (!x->dtype.is_int())
    throw Error(
        fmt::format("one_hot: the tensor has dtype {}; expected an integer dtype (Int64, Int32 or UInt8)",
                    to_string(x->dtype)));
  if (num_classes < 0)
    throw Error(
        fmt::format("one_hot: num_classes is {}; expected a count >= 0 (loom cannot infer it from the data "
                    "lazily)",
                    num_classes));
  const Shape& in = *x->shape();
  const Shape out = inserted(in, static_cast<int>(in.size()), num_classes);
  const DType cmp = promote(x->dtype, DType::Int32);
  const UOpPtr values =
      cast_uop(expand_uop(reshape_uop(x, inserted(in, static_cast<int>(in.size()), 1)), out), cmp);
  return make_tensor(cast_uop(loom::eq(values, cast_uop(iota_along(out, in.size()), cmp)), DType::Int32));
}

}  // namespace loom
