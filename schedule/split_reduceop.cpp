#include "schedule/split_reduceop.hpp"

#include "schedule/movement_index.hpp"

#include <algorithm>
#include <numeric>

namespace loom {

namespace {

// A reduce this lopsided leaves most threads idle: split it (tinygrad's value).
constexpr int64_t kSplitRatio = 32768;
// A reduce with at least this many outputs already gives each thread of a
// large machine many outputs, so splitting would only add a kernel. This also
// keeps the first stage of a split (d * outputs >= 8 * outputs) from splitting again.
constexpr int64_t kSplitOutputsBelow = 256;
// The divisors tried, largest first: up to 256 parts (the second stage stays
// a negligible reduce), at least 8, and at most 2^22 first-stage outputs.
constexpr int64_t kMaxParts = 256, kMinParts = 8, kMaxFirstOutputs = int64_t{1} << 22;

int64_t numel(const Shape& s) { return std::accumulate(s.begin(), s.end(), int64_t{1}, std::multiplies<>()); }

// Which axes of `x` reach its data: an axis made by an EXPAND is read at index 0 only.
std::vector<bool> real_axes(const UOpPtr& x) {
  const Shape& shape = *x->shape();
  std::vector<UOpPtr> idx, ranges;
  for (size_t i = 0; i < shape.size(); ++i) {
    ranges.push_back(make_range(std::max<int64_t>(shape[i], 1), static_cast<int64_t>(i)));
    idx.push_back(shape[i] == 1 ? const_int(DType::Int64, 0) : ranges.back());
  }
  UOpPtr base = x;
  while (is_movement(base->op)) {
    idx = movement_source_index(base, idx).idx;
    base = base->src[0];
  }
  std::vector<bool> real(shape.size(), false);
  for (size_t i = 0; i < shape.size(); ++i)
    real[i] =
        std::any_of(idx.begin(), idx.end(), [&](const UOpPtr& e) { return e->ranges().contains(ranges[i]); });
  return real;
}

UOpPtr split(const Match& m) {
  const UOpPtr& red = m.root();
  const UOpPtr& x = red->src[0];
  const ReduceArg& arg = red->get<ReduceArg>();
  const Shape &in = *x->shape(), &out = *red->shape();
  const int64_t n_in = numel(in), n_out = numel(out);
  if (n_out == 0 || n_in / n_out < kSplitRatio || n_out >= kSplitOutputsBelow) return nullptr;
  const std::vector<bool> real = real_axes(x);
  for (int64_t a : arg.axes)
    for (int64_t d = std::min(kMaxParts, kMaxFirstOutputs / n_out); d >= kMinParts; --d) {
      if (in[a] % d != 0 || !real[a]) continue;
      Shape parts(in.begin(), in.begin() + a);
      parts.push_back(d);
      parts.push_back(in[a] / d);
      parts.insert(parts.end(), in.begin() + a + 1, in.end());
      std::vector<int64_t> first_axes;
      for (int64_t b : arg.axes) first_axes.push_back(b < a ? b : b + 1);  // axis a -> its (n/d) part
      const UOpPtr shaped = UOp::make(Op::RESHAPE, x->dtype, {x}, parts);
      const UOpPtr first = UOp::make(Op::REDUCE_AXIS, red->dtype, {shaped}, ReduceArg{arg.op, first_axes});
      const UOpPtr kept = UOp::make(Op::CONTIGUOUS, red->dtype, {first});
      const UOpPtr second = UOp::make(Op::REDUCE_AXIS, red->dtype, {kept}, ReduceArg{arg.op, {a}});
      return UOp::make(Op::RESHAPE, red->dtype, {second}, std::vector<int64_t>(out));
    }
  return nullptr;
}

}  // namespace

const PatternMatcher& split_reduceop() {
  static const PatternMatcher pm("split_reduceop", {{UPat::ops({Op::REDUCE_AXIS}), split}});
  return pm;
}

}  // namespace loom
