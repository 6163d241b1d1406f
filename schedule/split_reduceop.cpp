#include "schedule/split_reduceop.hpp"

#include "ir/page.hpp"
#include "ir/symbolic.hpp"
#include "schedule/movement_index.hpp"

#include <algorithm>
#include <numeric>
#include <optional>

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
// Rows a column tile walks per block: as many sequential streams as an L1 set has
// ways (8 on x86 cores), since rows a power of two apart alias one set.
constexpr int64_t kStridedRows = 8;
// Rows per block of a float sum: the optimiser's column-sum tiles read them as
// blocks of kStridedRows streams each (codegen/optimizer.cpp), so a block's partial
// sums wait in cache and only one partial row per 64 rows goes to the second reduce.
constexpr int64_t kStridedSumRows = 64;
// Inputs from this size on come from L3 or memory rather than the cores' L2 caches
// (512 KB each here), where the prefetchers decide the bandwidth; a smaller input is
// not split.
constexpr int64_t kStridedBytes = int64_t{2} << 20;

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

// The position in `x`'s data of the element at index `last` on `x`'s last axis and 0
// on the others, if the movement ops fold to a constant there.
std::optional<int64_t> data_position(const UOpPtr& x, int64_t last) {
  std::vector<UOpPtr> idx(x->shape()->size(), const_int(DType::Int64, 0));
  idx.back() = const_int(DType::Int64, last);
  UOpPtr base = x;
  while (is_movement(base->op)) {
    idx = movement_source_index(base, idx).idx;
    base = base->src[0];
  }
  const UOpPtr pos = simplify(linear_index(idx, *base->shape()));
  if (pos->op != Op::CONST) return std::nullopt;
  return pos->const_int();
}

// Is `x`'s last axis of unit stride in its data (its rows contiguous)? An elementwise
// `x` counts as its own data: its operands' layouts are not looked at.
bool last_axis_contiguous(const UOpPtr& x) {
  const auto first = data_position(x, 0), second = data_position(x, 1);
  return first && second && *second - *first == 1;
}

// `red` over axis `a` of its input as two reduces through a contiguous buffer: the
// axis reshaped to (parts, n / parts), the first reduce sums each run of n / parts,
// the second the parts.
UOpPtr split_axis(const UOpPtr& red, int64_t a, int64_t parts) {
  const UOpPtr& x = red->src[0];
  const ReduceArg& arg = red->get<ReduceArg>();
  const Shape& in = *x->shape();
  Shape shape(in.begin(), in.begin() + a);
  shape.push_back(parts);
  shape.push_back(in[a] / parts);
  shape.insert(shape.end(), in.begin() + a + 1, in.end());
  std::vector<int64_t> first_axes;
  for (int64_t b : arg.axes) first_axes.push_back(b < a ? b : b + 1);  // axis a -> its (n/parts) part
  const UOpPtr shaped = UOp::make(Op::RESHAPE, x->dtype, {x}, shape);
  const UOpPtr first = UOp::make(Op::REDUCE_AXIS, red->dtype, {shaped}, ReduceArg{arg.op, first_axes});
  const UOpPtr kept = UOp::make(Op::CONTIGUOUS, red->dtype, {first});
  const UOpPtr second = UOp::make(Op::REDUCE_AXIS, red->dtype, {kept}, ReduceArg{arg.op, {a}});
  return UOp::make(Op::RESHAPE, red->dtype, {second}, std::vector<int64_t>(*red->shape()));
}

// Few outputs: d parts of contiguous runs, so the first reduce runs across threads.
UOpPtr split_lopsided(const Match& m) {
  const UOpPtr& red = m.root();
  const UOpPtr& x = red->src[0];
  const ReduceArg& arg = red->get<ReduceArg>();
  const Shape &in = *x->shape(), &out = *red->shape();
  const int64_t n_in = numel(in), n_out = numel(out);
  if (n_out == 0 || n_in / n_out < kSplitRatio || n_out >= kSplitOutputsBelow) return nullptr;
  const std::vector<bool> real = real_axes(x);
  for (int64_t a : arg.axes)
    for (int64_t d = std::min(kMaxParts, kMaxFirstOutputs / n_out); d >= kMinParts; --d)
      if (in[a] % d == 0 && real[a]) return split_axis(red, a, d);
  return nullptr;
}

// Bytes of the buffers `x` reads: a broadcast or a one-hot of a small buffer is
// large only in its shape.
int64_t bytes_read(const UOpPtr& x) {
  int64_t bytes = 0;
  for (const auto& u : toposort(x))
    if (u->op == Op::BUFFER) bytes += numel(*u->shape()) * u->dtype.itemsize();
  return bytes;
}

// A product of two operands that each broadcast along an axis the other reads: the sum
// over its rows is a matmul (the weight gradient x^T dy), which the optimiser's register
// tile walks in panels of b with a's rows in cache (codegen/register_tile.cpp); split
// into blocks of rows, it is no longer one.
bool matmul_product(const UOpPtr& x) {
  if (x->op != Op::MUL || x->src.size() != 2) return false;
  const std::vector<bool> a = real_axes(x->src[0]), b = real_axes(x->src[1]);
  bool a_only = false, b_only = false;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) a_only |= a[i] && !b[i], b_only |= b[i] && !a[i];
  return a_only && b_only;
}

// A reduce over an outer axis of rows of a page or more: the kernel's column tile
// would walk every row, each step on a new page, where no hardware prefetcher
// follows. Blocks of kStridedRows rows instead: each walk is kStridedRows
// sequential streams, and the second reduce sums n / kStridedRows partial rows.
// A float sum takes blocks of kStridedSumRows rows where they divide n, and is left
// whole when it has no more.
UOpPtr split_strided(const Match& m) {
  const UOpPtr& red = m.root();
  const UOpPtr& x = red->src[0];
  const ReduceArg& arg = red->get<ReduceArg>();
  const Shape& in = *x->shape();
  if (arg.axes.size() != 1) return nullptr;
  const int64_t a = arg.axes[0], n = in[static_cast<size_t>(a)];
  const int64_t row = numel(Shape(in.begin() + a + 1, in.end())) * x->dtype.itemsize();
  if (row < kPageBytes || numel(in) * x->dtype.itemsize() < kStridedBytes || bytes_read(x) < kStridedBytes)
    return nullptr;
  // A float sum of at most kStridedSumRows rows is the column-sum tiles' own.
  const bool float_sum = arg.op == Op::ADD && red->dtype.is_float();
  if (float_sum && n <= kStridedSumRows) return nullptr;
  const int64_t rows = float_sum && n % kStridedSumRows == 0 ? kStridedSumRows : kStridedRows;
  if (n % rows != 0 || n < 2 * rows || !real_axes(x)[static_cast<size_t>(a)] || !last_axis_contiguous(x) ||
      matmul_product(x))
    return nullptr;
  return split_axis(red, a, n / rows);
}

}  // namespace

const PatternMatcher& split_reduceop() {
  static const PatternMatcher pm("split_reduceop", {{UPat::ops({Op::REDUCE_AXIS}), split_lopsided},
                                                    {UPat::ops({Op::REDUCE_AXIS}), split_strided}});
  return pm;
}

}  // namespace loom
