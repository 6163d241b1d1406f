#include "schedule/split_reduceop.hpp"

#include "ir/contraction.hpp"
#include "ir/symbolic.hpp"
#include "schedule/movement_index.hpp"
#include "schedule/stage.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <numeric>
#include <optional>
#include <unordered_set>
#include <vector>

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
// ways, a power of two (rows a power of two apart alias one set): 8 of 8 or 12 ways.
int64_t strided_rows(const Target& t) {
  return static_cast<int64_t>(std::bit_floor(static_cast<uint64_t>(std::max(1, t.l1d_ways))));
}
// Rows per block of a float sum: the Target's gemv_part_rows, the optimiser's
// column-sum tiles read them gemv_rows at a time (codegen/recipes.cpp), so a
// block's partial sums wait in cache and only one partial row per block goes to the
// second reduce.
int64_t strided_sum_rows(const Target& t) { return t.gemv_part_rows(); }
// Inputs from this size on come from L3 or memory rather than the cores' L2 caches
// (all of them together), where the prefetchers decide the bandwidth; a smaller input
// is not split.
int64_t strided_bytes(const Target& t) { return t.l2_bytes * t.cores; }

// One range per axis of `shape` (its index, the axis' position), and the index of an
// element at them: CONST 0 on axes of size 1.
std::vector<UOpPtr> axis_ranges(const Shape& shape) {
  std::vector<UOpPtr> ranges;
  for (size_t i = 0; i < shape.size(); ++i)
    ranges.push_back(shape[i].is_symbolic()
                         ? make_range(shape[i], static_cast<int64_t>(i))
                         : make_range(std::max<int64_t>(shape[i], 1), static_cast<int64_t>(i)));
  return ranges;
}

// The elements of a tensor of `shape`, a symbolic size at its upper bound: the splits are
// planned for the longest reduce, as the optimiser plans its tiles.
int64_t most_elements(const Shape& shape) {
  int64_t n = 1;
  for (const Dim& d : shape) n *= d.max();
  return n;
}
std::vector<UOpPtr> axis_index(const Shape& shape, const std::vector<UOpPtr>& ranges) {
  std::vector<UOpPtr> idx;
  for (size_t i = 0; i < shape.size(); ++i)
    idx.push_back(shape[i] == 1 ? const_int(DType::Int64, 0) : ranges[i]);
  return idx;
}

struct DataIndex {
  std::vector<UOpPtr> idx;  // one expression per axis of base
  UOpPtr base;              // the first node under `x` that is not a movement op: its data
};

// Where `x`'s element at `idx` is in its data. An elementwise `x` counts as its own
// data: its operands' layouts are not looked at.
DataIndex data_index(const UOpPtr& x, std::vector<UOpPtr> idx) {
  UOpPtr base = x;
  while (is_movement(base->op)) {
    idx = movement_source_index(base, idx).idx;
    base = base->src[0];
  }
  return {std::move(idx), base};
}

// Which axes of `x` reach its data: an axis made by an EXPAND is read at index 0 only.
std::vector<bool> real_axes(const UOpPtr& x) {
  const Shape& shape = *x->shape();
  const std::vector<UOpPtr> ranges = axis_ranges(shape);
  const std::vector<UOpPtr> idx = data_index(x, axis_index(shape, ranges)).idx;
  std::vector<bool> real(shape.size(), false);
  for (size_t i = 0; i < shape.size(); ++i)
    real[i] =
        std::any_of(idx.begin(), idx.end(), [&](const UOpPtr& e) { return e->ranges().contains(ranges[i]); });
  return real;
}

// The position in `x`'s data of the element at index `at` on `x`'s axis `axis` and 0
// on the others, if the movement ops fold to a constant there.
std::optional<int64_t> data_position(const UOpPtr& x, size_t axis, int64_t at) {
  std::vector<UOpPtr> idx(x->shape()->size(), const_int(DType::Int64, 0));
  idx.at(axis) = const_int(DType::Int64, at);
  const DataIndex d = data_index(x, std::move(idx));
  const UOpPtr pos = simplify(linear_index(d.idx, *d.base->shape()));
  if (pos->op != Op::CONST) return std::nullopt;
  return pos->const_int();
}

// The step in `x`'s data between neighbours along `axis`.
std::optional<int64_t> data_stride(const UOpPtr& x, size_t axis) {
  const auto first = data_position(x, axis, 0), second = data_position(x, axis, 1);
  if (!first || !second) return std::nullopt;
  return *second - *first;
}

// The sum `red` of a product a * b as a contraction (ir/contraction.hpp): each factor
// read at its address in its data, the reduced axes its k, the others its outputs.
std::optional<Contraction> product_contraction(const UOpPtr& red) {
  const UOpPtr& x = red->src[0];
  if (x->op != Op::MUL || x->src.size() != 2) return std::nullopt;
  const Shape& shape = *x->shape();
  const std::vector<UOpPtr> ranges = axis_ranges(shape), idx = axis_index(shape, ranges);
  std::array<UOpPtr, 2> address;
  std::array<int64_t, 2> itemsize{};
  for (size_t f = 0; f < 2; ++f) {
    const DataIndex d = data_index(x->src[f], idx);
    address[f] = linear_index(d.idx, *d.base->shape());
    itemsize[f] = x->src[f]->dtype.itemsize();
  }
  const auto& axes = red->get<ReduceArg>().axes;
  std::vector<UOpPtr> outs, k;
  for (size_t i = 0; i < shape.size(); ++i)
    (std::find(axes.begin(), axes.end(), static_cast<int64_t>(i)) != axes.end() ? k : outs)
        .push_back(ranges[i]);
  return contraction_of_addresses(address, itemsize, std::move(outs), std::move(k));
}

// Is `x`'s last axis of unit stride in its data (its rows contiguous)?
bool last_axis_contiguous(const UOpPtr& x) { return data_stride(x, x->shape()->size() - 1) == 1; }

// Where the parts axis of a split goes: in place of the axis, or in front of every axis.
enum class Parts { InPlace, First };

// `red` over axis `a` of its input as two reduces through a contiguous buffer: the
// axis reshaped to (parts, n / parts), the first reduce sums each run of n / parts,
// the second the parts. With Parts::First the parts axis is moved in front first.
UOpPtr split_axis(const UOpPtr& red, int64_t a, const Dim& parts, Parts at = Parts::InPlace) {
  const UOpPtr& x = red->src[0];
  const ReduceArg& arg = red->get<ReduceArg>();
  const Shape& in = *x->shape();
  Shape shape(in.begin(), in.begin() + a);
  shape.push_back(parts);
  shape.push_back(in[a] / parts);
  shape.insert(shape.end(), in.begin() + a + 1, in.end());
  // Axis a's run of n / parts is a + 1, and so are the axes before it with the parts in front.
  std::vector<int64_t> first_axes;
  for (int64_t b : arg.axes) first_axes.push_back(b < a && at == Parts::InPlace ? b : b + 1);
  UOpPtr shaped = UOp::make(Op::RESHAPE, x->dtype, {x}, shape);
  if (at == Parts::First) {
    std::vector<int64_t> order{a};
    for (int64_t i = 0; i < static_cast<int64_t>(shape.size()); ++i)
      if (i != a) order.push_back(i);
    shaped = UOp::make(Op::PERMUTE, x->dtype, {shaped}, order);
  }
  const UOpPtr first = UOp::make(Op::REDUCE_AXIS, red->dtype, {shaped}, ReduceArg{arg.op, first_axes});
  const UOpPtr kept = UOp::make(Op::CONTIGUOUS, red->dtype, {first});
  const UOpPtr second =
      UOp::make(Op::REDUCE_AXIS, red->dtype, {kept}, ReduceArg{arg.op, {at == Parts::First ? 0 : a}});
  return UOp::make(Op::RESHAPE, red->dtype, {second}, *red->shape());
}

// Few outputs: d parts of contiguous runs, so the first reduce runs across threads.
UOpPtr split_lopsided(const Match& m) {
  const UOpPtr& red = m.root();
  const UOpPtr& x = red->src[0];
  const ReduceArg& arg = red->get<ReduceArg>();
  const Shape &in = *x->shape(), &out = *red->shape();
  const int64_t n_in = most_elements(in), n_out = most_elements(out);
  if (n_out == 0 || n_in / n_out < kSplitRatio || n_out >= kSplitOutputsBelow) return nullptr;
  const std::vector<bool> real = real_axes(x);
  const int64_t most_parts = std::min(kMaxParts, kMaxFirstOutputs / n_out);
  for (int64_t a : arg.axes) {
    if (!real[a]) continue;
    // A symbolic axis (a batch of B images) is split into all of its elements, as a
    // number of them would be where it divides: one partial sum per image.
    if (in[a].is_symbolic()) {
      if (in[a].max() >= kMinParts && in[a].max() <= most_parts) return split_axis(red, a, in[a]);
      continue;
    }
    for (int64_t d = most_parts; d >= kMinParts; --d)
      if (in[a].value() % d == 0) return split_axis(red, a, d);
  }
  return nullptr;
}

// Do the buffers `x` reads hold `bytes` or more? (A broadcast or a one-hot of a
// small buffer is large only in its shape.) The walk ends once they do: it is a
// walk of the graph under x, so the rules ask it after their other conditions.
bool reads_at_least(const UOpPtr& x, int64_t bytes) {
  std::unordered_set<const UOp*> seen{x.get()};
  std::vector<const UOp*> stack{x.get()};
  while (!stack.empty() && bytes > 0) {
    const UOp* u = stack.back();
    stack.pop_back();
    if (u->op == Op::BUFFER) bytes -= element_count(*u->shape()) * u->dtype.itemsize();
    for (const auto& s : u->src)
      if (seen.insert(s.get()).second) stack.push_back(s.get());
  }
  return bytes <= 0;
}

// A product of two operands that each broadcast along an axis the other reads: the sum
// over its rows is a matmul (the weight gradient x^T dy), which the optimiser's register
// tile walks in panels of b with a's rows in cache (codegen/register_tile.cpp); split
// into blocks of rows, it is no longer one.
bool matmul_product(const UOpPtr& red) {
  const auto c = product_contraction(red);
  return c && c->broadcast_both();
}

// A reduce over an outer axis of rows of a page or more: the kernel's column tile
// would walk every row, each step on a new page, where no hardware prefetcher
// follows. Blocks of strided_rows rows instead: each walk is strided_rows
// sequential streams, and the second reduce sums n / strided_rows partial rows.
// A float sum takes blocks of strided_sum_rows rows where they divide n, and is left
// whole when it has no more.
UOpPtr split_strided(const Match& m) {
  const UOpPtr& red = m.root();
  const UOpPtr& x = red->src[0];
  const ReduceArg& arg = red->get<ReduceArg>();
  const Shape& in = *x->shape();
  if (arg.axes.size() != 1 || is_symbolic(in)) return nullptr;
  const int64_t a = arg.axes[0], n = in[static_cast<size_t>(a)];
  const int64_t row = element_count(Shape(in.begin() + a + 1, in.end())) * x->dtype.itemsize();
  const Target& t = m.ctx<StageContext>().target;
  if (row < t.page_bytes || element_count(in) * x->dtype.itemsize() < strided_bytes(t)) return nullptr;
  // A float sum of at most strided_sum_rows rows is the column-sum tiles' own.
  const bool float_sum = arg.op == Op::ADD && red->dtype.is_float();
  const int64_t sum_rows = strided_sum_rows(t);
  if (float_sum && n <= sum_rows) return nullptr;
  const int64_t rows = float_sum && n % sum_rows == 0 ? sum_rows : strided_rows(t);
  if (n % rows != 0 || n < 2 * rows || !real_axes(x)[static_cast<size_t>(a)] || !last_axis_contiguous(x) ||
      matmul_product(red) || !reads_at_least(x, strided_bytes(t)))
    return nullptr;
  return split_axis(red, a, n / rows);
}

// A GEMV ([1, K] @ [K, N]: a float sum over k of a product whose operand b steps a page
// or more along k and is contiguous along an output axis the other operand does not
// read, and no output axis that operand reads and b does not) in parts of
// strided_sum_rows rows of b, the parts outermost: each part is a contiguous run of b's
// rows that one thread streams whole, a line of each of 8 rows at a time with the
// partial row in L1 (docs/performance.md, GEMV), where two threads splitting the
// columns each walked half rows; the second reduce adds the K / strided_sum_rows partial
// rows. The parts depend on K alone, so the sum's order is the same on any thread count.
UOpPtr split_gemv(const Match& m) {
  const UOpPtr& red = m.root();
  const UOpPtr& x = red->src[0];
  const ReduceArg& arg = red->get<ReduceArg>();
  if (arg.op != Op::ADD || !red->dtype.is_float() || arg.axes.size() != 1 || is_symbolic(*x->shape()))
    return nullptr;
  const int64_t n = (*x->shape())[static_cast<size_t>(arg.axes[0])];
  const Target& t = m.ctx<StageContext>().target;
  const int64_t sum_rows = strided_sum_rows(t);
  if (n % sum_rows != 0 || n < 2 * sum_rows) return nullptr;
  const auto c = product_contraction(red);
  if (!c) return nullptr;
  const UOpPtr& k = c->k.at(0);
  // b is either factor: p the one with no row of its own, q the matrix.
  for (const int p : {0, 1}) {
    const int q = 1 - p;
    const std::vector<UOpPtr> columns = c->only(q);
    const bool column =
        std::any_of(columns.begin(), columns.end(), [&](const UOpPtr& r) { return c->contiguous(q, r); });
    const ContractionRead& b = c->loads[static_cast<size_t>(q)].at(0);
    const auto step = Contraction::stride(b, k);
    if (c->only(p).empty() && column && c->uses(q, k) && step && *step * b.itemsize >= t.page_bytes &&
        reads_at_least(x, strided_bytes(t)))
      return split_axis(red, arg.axes[0], n / sum_rows, Parts::First);
  }
  return nullptr;
}

}  // namespace

const PatternMatcher& split_reduceop() {
  static const PatternMatcher pm("split_reduceop", {{UPat::ops({Op::REDUCE_AXIS}), split_lopsided},
                                                    {UPat::ops({Op::REDUCE_AXIS}), split_strided},
                                                    {UPat::ops({Op::REDUCE_AXIS}), split_gemv}});
  return pm;
}

}  // namespace loom
