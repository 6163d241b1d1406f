// Movement ops: validated, then one tensor-level movement UOp each.
#include "src/tensor_ops.hpp"

#include <cmath>

namespace loom {

using namespace detail;

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

Tensor Tensor::pad(std::vector<std::pair<int64_t, int64_t>> padding, double value) const {
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
  UOpPtr padded = UOp::make(Op::PAD, x->dtype, {x}, flat);
  if (value == 0) return make_tensor(padded);
  // PAD fills with 0; another value goes where a padded all-true mask is false.
  UOpPtr inside = UOp::make(Op::PAD, DType::Bool, {const_tensor(1, DType::Bool, in)}, flat);
  return make_tensor(loom::where(inside, padded, const_tensor(value, x->dtype, *padded->shape())));
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

}  // namespace loom
