// The kernel optimiser: records its choices as RANGE kinds, applied by range
// splitting, so they show in every dump after it.
//
//   upcast    the range along which the kernel's memory traffic is contiguous
//             goes to the SIMD width (8 float32 lanes with AVX2, 16 with AVX-512);
//   unroll    a reduction keeps several vector accumulators: the upcast range is
//             split further (output lanes) or the reduced one is (reduced lanes);
//   blocks    a float sum is accumulated in nested blocks of at most kBlock per
//             accumulator, so its error stays bounded as it grows;
//   parallel  the outermost output range runs across threads;
//   tiles     a matmul-like kernel (codegen/register_tile.hpp) gets a register
//             tile instead: rows unrolled, columns unrolled x upcast;
//   outputs   a kernel of several outputs is tiled by its first END, the others
//             following its splits, each in its threads' loop (docs/kernel-ir.md).
//
// docs/performance.md explains the choices with the kernels of the benchmarks.
#include "codegen/codegen.hpp"
#include "codegen/register_tile.hpp"
#include "codegen/vector_ops.hpp"
#include "ir/contraction.hpp"
#include "ir/pattern.hpp"
#include "ir/range_split.hpp"
#include "ir/symbolic.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <unordered_map>
#include <unordered_set>

namespace loom {

namespace {

// Vector accumulators a reduction keeps (and output vectors an unrolled output range
// computes at once): enough independent additions to cover the FP add latency.
constexpr int kAccumulators = 4;
// A float sum adds at most this many values into one accumulator before the partial
// sum moves to the next level: ~u*sqrt(kBlock) relative error per level (u = 2^-24).
constexpr int64_t kBlock = 256;
// Lanes a UOp's vector dtype holds at most (codegen/register_tile.cpp's kMaxLanes).
constexpr int64_t kMaxVectorLanes = 255;

std::optional<int64_t> trip(const UOpPtr& range) {
  const UOpPtr& end = range->src.at(0);
  if (!end->is_const()) return std::nullopt;
  return end->const_int();
}

AxisKind kind(const UOpPtr& range) { return range->get<AxisArg>().kind; }

UOpPtr with_kind(const UOpPtr& range, AxisKind k) {
  return UOp::make(Op::RANGE, range->dtype, range->src, AxisArg{range->get<AxisArg>().id, k});
}

UOpPtr find_range(const UOpPtr& kernel, int64_t id) {
  for (const auto& r : ranges_of(kernel))
    if (r->get<AxisArg>().id == id) return r;
  return nullptr;
}

// The REDUCEs that close `range` (a kernel may hold several over one range).
std::vector<UOpPtr> reduces_of(const UOpPtr& kernel, const UOpPtr& range) {
  std::vector<UOpPtr> out;
  for (const auto& n : toposort(kernel))
    if (n->op == Op::REDUCE && std::find(n->src.begin() + 1, n->src.end(), range) != n->src.end())
      out.push_back(n);
  return out;
}

// The first of them, if any.
UOpPtr reduce_of(const UOpPtr& kernel, const UOpPtr& range) {
  const std::vector<UOpPtr> reds = reduces_of(kernel, range);
  return reds.empty() ? nullptr : reds.front();
}

// ---- where the traffic is contiguous --------------------------------------------------
struct Access {
  UOpPtr index;
  double bytes;  // element size times the iterations of every range the address uses
};

// An access inside a REDUCE runs once per iteration of the reduce's ranges too,
// whether or not its address uses them (a @ b^T reads b again for every row of a).
std::vector<Access> accesses(const UOpPtr& kernel) {
  std::vector<Access> out;
  std::vector<UOpPtr> reduces;
  for (const auto& n : toposort(kernel))
    if (n->op == Op::REDUCE) reduces.push_back(n);
  for (const auto& n : toposort(kernel)) {
    if (n->op != Op::INDEX || n->src.at(0)->op != Op::DEFINE_GLOBAL) continue;
    std::vector<UOpPtr> runs_in = ranges_of(n);
    for (const auto& red : reduces)
      if (reaches(red->src[0], n))
        for (const auto& r : ranges_of(red))
          if (std::find(runs_in.begin(), runs_in.end(), r) == runs_in.end()) runs_in.push_back(r);
    double bytes = n->dtype.itemsize();
    for (const auto& r : runs_in) bytes *= static_cast<double>(trip(r).value_or(1024));
    out.push_back({n, bytes});
  }
  return out;
}

// Bytes that become vector accesses minus bytes that become gathers if `range`
// went to the lanes; accesses that do not use it are broadcast.
double lane_score(const std::vector<Access>& all, const UOpPtr& range) {
  double score = 0;
  for (const Access& a : all) {
    const auto s = address_stride(a.index, range);
    if (s == 0) continue;
    score += s == 1 ? a.bytes : -a.bytes;
  }
  return score;
}

// Does some store's address along `range` come from loaded data (a scatter, as
// scatter_reduce makes)? Its iterations may then write one address in turn,
// which neither lanes nor threads may reorder.
bool scatters_along(const UOpPtr& kernel, const UOpPtr& range) {
  for (const auto& n : toposort(kernel)) {
    if (n->op != Op::STORE) continue;
    const UOpPtr& address = n->src.at(0)->src.at(1);
    if (!reaches(address, range)) continue;
    for (const auto& a : toposort(address))
      if (a->op == Op::LOAD) return true;
  }
  return false;
}

// Ranges open at some node beside a range in lanes (AxisKind::Upcast): the loops that
// enclose or share the lanes' loop, which cannot take lanes of their own.
std::unordered_set<const UOp*> beside_lanes(const UOpPtr& kernel) {
  std::unordered_set<const UOp*> out;
  for (const auto& u : toposort(kernel)) {
    bool lanes = false;
    for (const UOp* r : u->ranges()) lanes |= r->get<AxisArg>().kind == AxisKind::Upcast;
    if (lanes) out.insert(u->ranges().begin(), u->ranges().end());
  }
  return out;
}

// The next range to put in SIMD lanes: the one most traffic is contiguous along, an
// output range on a tie (its lanes need no folding), among those that no range in
// lanes already shares a node with. A kernel over rows that reduces each row before
// storing it (softmax's max, sum and normalised row) gets lanes in each of its loops.
UOpPtr lane_candidate(const UOpPtr& kernel) {
  const std::vector<Access> all = accesses(kernel);
  const std::unordered_set<const UOp*> taken = beside_lanes(kernel);
  UOpPtr best;
  double best_score = 0;
  for (const auto& r : ranges_of(kernel)) {
    const AxisKind k = kind(r);
    if ((k != AxisKind::Loop && k != AxisKind::Reduce) || trip(r).value_or(0) < 2) continue;
    if (taken.contains(r.get())) continue;
    if (scatters_along(kernel, r)) continue;
    const double score = lane_score(all, r) + (k == AxisKind::Loop ? 0.5 : 0);
    if (score > best_score) best = r, best_score = score;
  }
  return best;
}

// The widest element the kernel reads or writes: lanes are as many as one SIMD register holds of it.
int widest_element(const UOpPtr& kernel) {
  int widest = 1;
  for (const Access& a : accesses(kernel)) widest = std::max(widest, a.index->dtype.itemsize());
  return widest;
}

// ---- padding ------------------------------------------------------------------------
// `range` runs to `end` instead: the iterations past its old end touch no memory
// (their accesses become invalid) and add nothing to a REDUCE (its identity).
// Every global access the padded range reaches gets `inside` in its validity,
// inner ones first: an index loaded to address another access (a gather) is an
// access of its own and must be guarded inside the outer one too.
UOpPtr guard_accesses(const UOpPtr& kernel, const UOpPtr& padded, const UOpPtr& inside) {
  std::unordered_map<const UOp*, UOpPtr> done;
  for (const auto& n : toposort(kernel)) {
    std::vector<UOpPtr> src;
    for (const auto& s : n->src) src.push_back(done.at(s.get()));
    if (n->op == Op::INDEX && n->src.at(0)->op == Op::DEFINE_GLOBAL && reaches(n, padded))
      src = {src[0], src[1], src.size() > 2 ? land(src[2], inside) : inside};
    done[n.get()] = src == n->src ? n : n->with_src(std::move(src));
  }
  return done.at(kernel.get());
}

UOpPtr pad_range(const UOpPtr& kernel, const UOpPtr& range, int64_t end) {
  const int64_t old_end = *trip(range);
  const AxisArg axis = range->get<AxisArg>();
  const UOpPtr padded = make_range(end, axis.id, axis.kind);
  const UOpPtr inside = padded < old_end;
  UOpPtr k = guard_accesses(substitute(kernel, {{range, padded}}), padded, inside);
  if (axis.kind != AxisKind::Reduce) return k;
  // Every REDUCE over the range folds the padding as its identity: one kernel may
  // hold several over the same range (a row's sum read twice, computed in place).
  std::vector<std::pair<UOpPtr, UOpPtr>> guarded;
  for (const auto& red : reduces_of(k, padded)) {
    std::vector<UOpPtr> src = red->src;
    src[0] = where(inside, src[0], reduce_identity(red->get<ReduceArg>().op, red->dtype));
    guarded.emplace_back(red, red->with_src(std::move(src)));
  }
  return substitute(k, guarded);
}

// `range` padded to a multiple of `multiple` where its end is not one.
UOpPtr pad_to_multiple(const UOpPtr& kernel, const UOpPtr& range, int64_t multiple) {
  const int64_t n = *trip(range);
  if (n % multiple == 0) return kernel;
  return pad_range(kernel, range, (n + multiple - 1) / multiple * multiple);
}

// ---- upcast and unroll ------------------------------------------------------------------
struct Lanes {
  int64_t upcast, unroll;  // range = (outer * unroll + unrolled) * upcast + lane
};

struct Split {
  UOpPtr root, outer, inner;
};

// range -> outer * factor + inner by the range-splitting primitive: the outer part keeps
// `range`'s kind, the inner one is of `inner_kind`, both with fresh axis ids.
Split split(const UOpPtr& k, const UOpPtr& range, int64_t factor, AxisKind inner_kind) {
  const SplitRanges s = split_ranges(k, {RangeSplit{range, factor, inner_kind}});
  return {s.root, s.parts[0].first, s.parts[0].second};
}

// `range` (padded first if needed) split into outer, unroll and upcast parts:
// range = (outer * unroll + unrolled) * upcast + lane. Returns the kernel and
// the outer range's id.
std::pair<UOpPtr, int64_t> split_lanes(UOpPtr k, UOpPtr range, Lanes lanes) {
  const int64_t id = range->get<AxisArg>().id;
  k = pad_to_multiple(k, range, lanes.upcast * lanes.unroll);
  const Split lane = split(k, find_range(k, id), lanes.upcast, AxisKind::Upcast);
  if (lanes.unroll == 1) return {lane.root, lane.outer->get<AxisArg>().id};
  const Split unrolled = split(lane.root, lane.outer, lanes.unroll, AxisKind::Unroll);
  return {unrolled.root, unrolled.outer->get<AxisArg>().id};
}

// Nested blocks for a float sum over `range` (a reduce range of `red`): the
// innermost REDUCE adds at most about kBlock values per accumulator, each outer
// one at most that many partial sums.
UOpPtr block_sum(UOpPtr k, int64_t range_id) {
  UOpPtr range = find_range(k, range_id);
  const int64_t n = *trip(range);
  if (n <= kBlock) return k;
  const int levels = static_cast<int>(std::ceil(std::log2(static_cast<double>(n)) / std::log2(kBlock)));
  const int64_t block =
      int64_t{1} << static_cast<int>(std::lround(std::log2(static_cast<double>(n)) / levels));
  k = pad_to_multiple(k, range, block);
  range = find_range(k, range_id);
  const Split blocks = split(k, range, block, AxisKind::Reduce);
  // REDUCE(x, ..., outer, inner, lanes...) -> REDUCE(REDUCE(x, inner), ..., outer, lanes...)
  const UOpPtr red = reduce_of(blocks.root, blocks.inner);
  const UOpPtr inner = UOp::make(Op::REDUCE, red->dtype, {red->src[0], blocks.inner}, red->arg);
  std::vector<UOpPtr> src{inner};
  for (size_t i = 1; i < red->src.size(); ++i)
    if (red->src[i] != blocks.inner) src.push_back(red->src[i]);
  k = substitute(blocks.root, {{red, red->with_src(std::move(src))}});
  return block_sum(k, blocks.outer->get<AxisArg>().id);
}

bool is_float_sum(const UOpPtr& red) {
  return red && red->get<ReduceArg>().op == Op::ADD && red->dtype.is_float();
}

// Accumulators for `n` vectors of `width` lanes: the largest factor of kAccumulators
// that divides n and keeps all lanes within one vector dtype (64 byte lanes on AVX-512
// take 2, not 4).
int64_t unroll_for(int64_t n, int64_t width) {
  int64_t a = kAccumulators;
  while (a > 1 && (n % a != 0 || a * width > kMaxVectorLanes)) a /= 2;
  return a;
}

UOpPtr upcast(UOpPtr k, const UOpPtr& range, int width) {
  const int64_t n = *trip(range);
  const bool reduced = kind(range) == AxisKind::Reduce;
  const UOpPtr red = reduce_of(k, range);  // the reduce the lanes are folded by, if reduced
  if (!reduced && n <= width) return substitute(k, {{range, with_kind(range, AxisKind::Upcast)}});
  // Several accumulators: the lanes of a reduction, or of the outputs of a kernel that reduces.
  bool reduces = false;
  for (const auto& u : toposort(k)) reduces |= u->op == Op::REDUCE;
  const int64_t rounded = (n + width - 1) / width;
  const Lanes lanes{width, reduces ? unroll_for(rounded, width) : 1};
  auto [out, outer_id] = split_lanes(k, range, lanes);
  if (reduced && is_float_sum(red)) out = block_sum(out, outer_id);
  return out;
}

// ---- register tiles -------------------------------------------------------------------
// The kernel's main END (its first) with every use of `padded` in what it stores
// clamped: its padded iterations are the last real one again.
UOpPtr repeat_last_iteration(const UOpPtr& kernel, const UOpPtr& padded, const UOpPtr& clamped) {
  std::vector<UOpPtr> effects = kernel->src, src = effects.at(0)->src;
  src[0] = substitute(src[0], {{padded, clamped}});
  effects[0] = effects[0]->with_src(std::move(src));
  return kernel->with_src(std::move(effects));
}

// An output range padded to `end` without masking its loads: every load reads
// at the range clamped to its old end (a duplicate of a real row, in bounds),
// and only the stores are guarded. So the inner loop of a tile whose rows do
// not divide the output has no per-row validity to test. With `repeat_last` the
// stores are clamped too: a padded row computes the last real row again, from the
// same loads in the same order, and stores the same value there again, so the
// epilogue tests no row (docs/performance.md: a padded product lost 3 to 8% to the
// tests). Only for a kernel that reads nothing it stores, and then for its main END
// alone: the other ENDs of a kernel of several outputs are guarded as below.
UOpPtr pad_output_range(const UOpPtr& kernel, const UOpPtr& range, int64_t end, bool repeat_last = false) {
  const int64_t old_end = *trip(range);
  if (end == old_end) return kernel;
  const AxisArg axis = range->get<AxisArg>();
  const UOpPtr padded = make_range(end, axis.id, axis.kind);
  const UOpPtr clamped = where(padded < old_end, padded, const_int(DType::Int64, old_end - 1));
  const UOpPtr k0 = substitute(kernel, {{range, padded}});
  const UOpPtr k = repeat_last ? repeat_last_iteration(k0, padded, clamped) : k0;
  if (repeat_last && k->src.size() == 1) return k;
  std::vector<const UOp*> stored;
  for (const auto& n : toposort(k))
    if (n->op == Op::STORE) stored.push_back(n->src.at(0).get());
  // The loads only a side END makes (a column sum beside the tile) are guarded like the
  // stores: its rows are then lanes of one contiguous run, a vector load, where clamped
  // ones are a gather of one load a row.
  const auto main_nodes = toposort(k->src.at(0));
  std::unordered_set<const UOp*> main;
  for (const auto& n : main_nodes) main.insert(n.get());
  std::vector<std::pair<UOpPtr, UOpPtr>> fixed;
  for (const auto& n : toposort(k)) {
    if (n->op != Op::INDEX || n->src.at(0)->op != Op::DEFINE_GLOBAL || !reaches(n, padded)) continue;
    if (repeat_last && main.contains(n.get())) continue;  // clamped already, stores included
    std::vector<UOpPtr> src = n->src;
    if (std::find(stored.begin(), stored.end(), n.get()) != stored.end() || !main.contains(n.get()))
      src.resize(3), src[2] = n->src.size() > 2 ? land(n->src[2], padded < old_end) : padded < old_end;
    else
      src[1] = substitute(src[1], {{padded, clamped}});
    fixed.emplace_back(n, n->with_src(std::move(src)));
  }
  return substitute(k, fixed);
}

// ---- several outputs -----------------------------------------------------------------
// A kernel of several outputs (docs/kernel-ir.md) is tiled by its first END, the main
// one; the others ride along (codegen/register_tile.hpp): every split or padding of a
// range substitutes it in the whole kernel, so they follow the main END's ranges.

// `kernel` with its main END (its first effect) replaced by `end`.
UOpPtr with_main_end(const UOpPtr& kernel, UOpPtr end) {
  std::vector<UOpPtr> src = kernel->src;
  src.at(0) = std::move(end);
  return kernel->with_src(std::move(src));
}

// A side END's own loops (past the prefix it shares) become one range t of their
// product, padded to whole vectors and split into a loop, `unroll` vectors and `width`
// lanes: its sum over a block of rows then runs as independent vector accumulators
// over contiguous runs of a row, as a column sum does, not as one chain of dependent
// adds a tile's rows wide. Its ranges are its own, so it is padded and split alone.
UOpPtr widen_side_lanes(const UOpPtr& side, size_t prefix, Lanes lanes, int64_t& next_id) {
  int64_t total = 1;
  for (size_t i = prefix + 1; i < side->src.size(); ++i) {
    if (!trip(side->src[i])) return side;
    total *= *trip(side->src[i]);
  }
  const UOpPtr t = make_range(total, next_id++);
  std::vector<std::pair<UOpPtr, UOpPtr>> flat;
  for (size_t i = side->src.size(), stride = 1; i-- > prefix + 1;
       stride *= static_cast<size_t>(*trip(side->src[i])))
    flat.emplace_back(side->src[i], (t / static_cast<int64_t>(stride)) % *trip(side->src[i]));
  std::vector<UOpPtr> src(side->src.begin(), side->src.begin() + static_cast<std::ptrdiff_t>(prefix) + 1);
  src.push_back(t);
  lanes.unroll = std::clamp<int64_t>((total + lanes.upcast - 1) / lanes.upcast, 1, lanes.unroll);
  const int64_t step = lanes.upcast * lanes.unroll;
  UOpPtr k = UOp::make(Op::SINK, DType::Bool, {simplify(substitute(side->with_src(std::move(src)), flat))});
  k = pad_range(k, t, (total + step - 1) / step * step);
  const UOpPtr padded = k->src[0]->src.back();
  const SplitRanges s = split_ranges(k, {RangeSplit{padded, step, AxisKind::Unroll}}, next_id);
  const SplitRanges v =
      split_ranges(s.root, {RangeSplit{s.parts[0].second, lanes.upcast, AxisKind::Upcast}}, next_id + 2);
  next_id += 4;
  return v.root->src[0];
}

// A side END lists the ranges it shares with the main END in the main END's order,
// first; those past the longest common prefix become fresh ranges of its own. The
// linearizer shares the prefix's loops between the two (codegen/linearizer.hpp), and
// the rest are loops the side END runs alone within them, before or after the main
// END's inner loops (a column sum over a block of rows, outside the panels' loop), given
// `lanes` (width and most vectors) when the main END is a register tile.
UOpPtr align_side_ends(const UOpPtr& kernel, std::optional<Lanes> lanes) {
  const UOpPtr& main = kernel->src.at(0);
  if (main->op != Op::END) return kernel;
  std::vector<UOpPtr> effects{main};
  int64_t next_id = next_axis_id(kernel);
  for (size_t e = 1; e < kernel->src.size(); ++e) {
    const UOpPtr& side = kernel->src[e];
    if (side->op != Op::END) {
      effects.push_back(side);
      continue;
    }
    std::vector<UOpPtr> shared, own;
    for (size_t i = 1; i < main->src.size(); ++i)
      if (std::find(side->src.begin() + 1, side->src.end(), main->src[i]) != side->src.end())
        shared.push_back(main->src[i]);
    for (size_t i = 1; i < side->src.size(); ++i)
      if (std::find(shared.begin(), shared.end(), side->src[i]) == shared.end()) own.push_back(side->src[i]);
    size_t prefix = 0;
    while (prefix < shared.size() && shared[prefix] == main->src[prefix + 1]) ++prefix;
    std::vector<std::pair<UOpPtr, UOpPtr>> fresh;
    for (size_t i = prefix; i < shared.size(); ++i)
      fresh.emplace_back(shared[i], UOp::make(Op::RANGE, shared[i]->dtype, shared[i]->src,
                                              AxisArg{next_id++, kind(shared[i])}));
    std::vector<UOpPtr> src{side->src[0]};
    src.insert(src.end(), shared.begin(), shared.end());
    src.insert(src.end(), own.begin(), own.end());
    const UOpPtr aligned = substitute(side->with_src(std::move(src)), fresh);
    effects.push_back(fresh.empty() || !lanes ? aligned : widen_side_lanes(aligned, prefix, *lanes, next_id));
  }
  return kernel->with_src(std::move(effects));
}

// The kernel's main END lists `first` before its other ranges.
UOpPtr loop_first(const UOpPtr& kernel, const UOpPtr& first) {
  const UOpPtr& end = kernel->src.at(0);
  std::vector<UOpPtr> src{end->src[0], first};
  for (size_t i = 1; i < end->src.size(); ++i)
    if (end->src[i] != first) src.push_back(end->src[i]);
  return with_main_end(kernel, end->with_src(std::move(src)));
}

// Loops of one iteration left by the splits become their only value, so the
// kernel's first loop is one that can be shared between threads.
UOpPtr drop_unit_loops(UOpPtr k) {
  for (const auto& r : ranges_of(k))
    if (kind(r) == AxisKind::Loop && trip(r) == 1) k = substitute(k, {{r, const_int(DType::Int64, 0)}});
  std::vector<UOpPtr> effects;
  for (const auto& end : k->src) {
    if (end->op != Op::END) {
      effects.push_back(end);
      continue;
    }
    std::vector<UOpPtr> src{end->src[0]};
    for (size_t i = 1; i < end->src.size(); ++i)
      if (end->src[i]->op == Op::RANGE) src.push_back(end->src[i]);
    effects.push_back(end->with_src(std::move(src)));
  }
  return k->with_src(std::move(effects));
}

// The tiles of `tiles` in blocks of `block`, the loop over blocks first, then
// `blocks_of_k` (if any), the other loops, and the tiles within a block last:
// each block of a's rows meets every panel of b before the next block starts
// (register_tile.hpp's row_block); each block of k rows of a GEMV's b meets
// every column tile of a chunk.
UOpPtr block_tiles(UOpPtr k, const UOpPtr& tiles, int64_t block, const UOpPtr& blocks_of_k) {
  const Split s = split(k, tiles, block, AxisKind::Loop);
  const UOpPtr& end = s.root->src.at(0);
  std::vector<UOpPtr> loops{s.outer}, lanes;
  if (blocks_of_k) loops.push_back(blocks_of_k);
  for (size_t i = 1; i < end->src.size(); ++i)
    if (end->src[i] != s.outer && end->src[i] != s.inner && end->src[i] != blocks_of_k)
      (kind(end->src[i]) == AxisKind::Loop ? loops : lanes).push_back(end->src[i]);
  std::vector<UOpPtr> src{end->src[0]};
  src.insert(src.end(), loops.begin(), loops.end());
  src.push_back(s.inner);
  src.insert(src.end(), lanes.begin(), lanes.end());
  return with_main_end(s.root, end->with_src(std::move(src)));
}

// The largest divisor of n in [most / 2, most], or 0.
int64_t divisor_near(int64_t n, int64_t most) {
  for (int64_t d = most; d * 2 >= most && d >= 1; --d)
    if (n % d == 0) return d;
  return 0;
}

bool loads_output(const UOpPtr& kernel, const UOpPtr& out) {
  for (const auto& n : toposort(kernel))
    if (n->op == Op::LOAD && n->src.at(0)->src.at(0) == out) return true;
  return false;
}

struct KBlocks {
  UOpPtr root, blocks;  // the kernel, and the loop over the blocks of k
};

// A tile's sum over k in blocks of kc (docs/performance.md): the loop over blocks
// becomes an output loop, so it can run outside the tiles (a panel's kc x W slice
// read from L1 by every row tile of a row block; kc rows of a GEMV's b streamed
// across a chunk of columns). A block's partial sums wait in the output: out = (first block ? 0 : out) + the
// block's sum, the epilogue applied at the last block. Every element still adds its
// blocks in k's order, whatever the threads. Not when the kernel reads its output
// (an in-place update) or stores another dtype than it sums.
std::optional<KBlocks> k_blocks(const UOpPtr& k, const UOpPtr& reduce_range, int64_t kc) {
  const UOpPtr &end = k->src.at(0), &store = end->src.at(0);
  const UOpPtr red = reduce_of(k, reduce_range);
  if (!red || red->src.size() != 2 || !is_float_sum(red) || store->src.at(1)->dtype != red->dtype ||
      loads_output(k, store->src[0]->src.at(0)))
    return std::nullopt;
  const int64_t n = *trip(reduce_range);
  if (kc <= 0 || kc >= n || n % kc != 0) return std::nullopt;
  const Split s = split(k, reduce_range, kc, AxisKind::Reduce);
  const UOpPtr blocks = with_kind(s.outer, AxisKind::Loop);
  const UOpPtr &end2 = s.root->src[0], &store2 = end2->src[0], &index = store2->src[0];
  const UOpPtr red2 = reduce_of(s.root, s.inner);
  const UOpPtr partial =
      UOp::make(Op::REDUCE, red2->dtype, {substitute(red2->src[0], {{s.outer, blocks}}), s.inner}, red2->arg);
  // The read of the previous blocks' sums depends on the block (a load free of it would
  // be placed before the loop over blocks) and reads nothing at the first block, where
  // it yields 0 (docs/kernel-ir.md), so no select of 0 is needed.
  std::vector<UOpPtr> at = index->src;
  const UOpPtr later = const_int(DType::Int64, 0) < blocks;
  if (at.size() > 2)
    at[2] = land(at[2], later);
  else
    at.push_back(later);
  const UOpPtr previous = UOp::make(Op::LOAD, red2->dtype, {index->with_src(std::move(at))});
  const UOpPtr sum = partial + previous;
  const UOpPtr done = substitute(store2->src[1], {{red2, sum}});
  const UOpPtr stored = done == sum ? sum : where(blocks < n / kc - 1, sum, done);
  std::vector<UOpPtr> src = end2->src;
  src[0] = store2->with_src({index, stored});
  src.push_back(blocks);
  return KBlocks{with_main_end(s.root, end2->with_src(std::move(src))), blocks};
}

// Columns the schedule padded to whole panels (schedule/panel_packing.hpp): the store,
// and the read of the previous blocks' sums of k, are masked by lane (j < n). Those
// masked reads cost more than the blocks save: 512 x 507 @ 507 x 516 at one thread ran
// at 55 to 78 GFLOP/s in three blocks of 169, 80 to 93 in one; 2040^3 71 against 88
// (docs/performance.md). So such a product sums k in one block while k lines (a panel
// row is one line with AVX2, two with AVX-512) stay within a quarter of the L2, as a's
// row blocks do: k up to 4096 with 1 MiB of L2.
int64_t masked_whole_k(const Target& t) { return t.l2_bytes / 4 / t.line_bytes; }

bool stores_by_lane(const UOpPtr& kernel, const UOpPtr& cols) {
  const UOpPtr valid = valid_of(kernel->src.at(0)->src.at(0)->src.at(0));
  return valid && reaches(valid, cols);
}

// The tile's rows slower than its column lanes (the expander orders lanes as the main END
// lists its ranges), so each register holds one row: an output stored [cols, rows] (a
// weight gradient's [out, in]) lists the columns first.
UOpPtr rows_before_lanes(const UOpPtr& kernel, const UOpPtr& rows) {
  if (!rows || kind(rows) != AxisKind::Unroll) return kernel;
  const UOpPtr& end = kernel->src.at(0);
  const auto at = std::find(end->src.begin() + 1, end->src.end(), rows);
  if (std::none_of(end->src.begin() + 1, at, [](const UOpPtr& r) {
        return kind(r) == AxisKind::Upcast || kind(r) == AxisKind::Unroll;
      }))
    return kernel;  // already slower than every lane
  std::vector<UOpPtr> src{end->src[0]}, lanes;
  for (size_t i = 1; i < end->src.size(); ++i) {
    const AxisKind k = kind(end->src[i]);
    if (end->src[i] == rows) continue;
    (k == AxisKind::Upcast || k == AxisKind::Unroll ? lanes : src).push_back(end->src[i]);
  }
  src.push_back(rows);
  src.insert(src.end(), lanes.begin(), lanes.end());
  return with_main_end(kernel, end->with_src(std::move(src)));
}

// The register tile of codegen/register_tile.hpp: columns -> (outer * vectors +
// unrolled) * lanes + lane, rows -> outer * rows + unrolled, the column blocks
// the outer loop (each thread keeps its block of b's columns in cache while
// the rows of a stream past). When b comes in panels (schedule/panel_packing.hpp),
// blocks of rows and of k instead.
UOpPtr tile_matmul(UOpPtr k, const MatmulAxes& mm, int lanes, const Target& target, int64_t itemsize) {
  const RegisterTile tile = register_tile(*trip(mm.rows), *trip(mm.cols), lanes, target.vector_registers,
                                          mm.a_ops, mm.a_selects_rows);
  const bool whole_k = stores_by_lane(k, mm.cols) && *trip(mm.reduce) <= masked_whole_k(target);
  auto [split_cols, cols_outer] = split_lanes(k, mm.cols, {tile.lanes, tile.vectors});
  const UOpPtr cols = find_range(split_cols, cols_outer);
  const bool panels = !mm.panels.empty() && (!cols || trip(cols) == 1);
  // The rows one tile high already: the schedule split them into a's row panels (m a
  // multiple of their height, i = io * R + ii), so io is the loop over row tiles.
  const bool tile_high = panels && mm.row_panels && tile.rows > 1 && *trip(mm.rows) == tile.rows;
  const UOpPtr& tiled = tile_high ? mm.row_panels : mm.rows;
  const int64_t tiles = tile_high ? *trip(tiled) : (*trip(tiled) + tile.rows - 1) / tile.rows;
  // The k a tile sums at a time, which a's row blocks are sized for: a k with no divisor
  // in [kBlock / 2, kBlock] (a prime 1021) is one block, and a's rows span all of it.
  const int64_t k_len = *trip(mm.reduce), divisor = whole_k ? 0 : divisor_near(k_len, kBlock);
  const int64_t kc = panels ? (divisor ? divisor : k_len) : 0;
  const int64_t block = panels ? row_block(tiles, tile.rows, kc, itemsize, target) : 1;
  const int64_t tiled_id = tiled->get<AxisArg>().id, padded = (tiles + block - 1) / block * block;
  // Padded rows store the last real row again, unless blocks of k read partial sums back.
  const UOpPtr& store = split_cols->src.at(0)->src.at(0);
  const bool repeat_last = !(panels && divisor) && !loads_output(split_cols, store->src.at(0)->src.at(0));
  k = pad_output_range(split_cols, find_range(split_cols, tiled_id), tile_high ? padded : padded * tile.rows,
                       repeat_last);
  UOpPtr rows = find_range(k, tiled_id);
  int64_t unrolled_id = -1;
  if (tile_high) {
    const UOpPtr within = find_range(k, mm.rows->get<AxisArg>().id);
    k = substitute(k, {{within, with_kind(within, AxisKind::Unroll)}});
    rows = find_range(k, tiled_id);
  } else if (tile.rows > 1) {
    const Split s = split(k, rows, tile.rows, AxisKind::Unroll);
    k = s.root, rows = s.outer, unrolled_id = s.inner->get<AxisArg>().id;
  }
  if (panels) {
    const UOpPtr reduce = find_range(k, mm.reduce->get<AxisArg>().id);
    const auto kb = divisor ? k_blocks(k, reduce, divisor) : std::nullopt;
    return drop_unit_loops(block_tiles(kb ? kb->root : k, rows, block, kb ? kb->blocks : nullptr));
  }
  // A side END shares the rows, not the columns: the rows stay outermost, for the threads.
  if (const UOpPtr outer = find_range(k, cols_outer); outer && k->src.size() == 1) k = loop_first(k, outer);
  k = drop_unit_loops(k);
  return unrolled_id < 0 ? k : rows_before_lanes(k, find_range(k, unrolled_id));
}

// The dot tile (register_tile.hpp's dot_axes): the summed range in vectors (padded to
// whole ones, masked), a tile of rows x every column unrolled, one accumulator vector
// each, whose lanes are folded once after the sum. Rows padded to whole tiles repeat
// the last row; the loop over row tiles first, for the threads.
// Lanes along the sum: the widest vector, or a narrower one (half, a quarter) that divides
// the sum's length: a padded sum masks every load and every product (56 pixels a row:
// 8 lanes, not 16 and a masked half vector).
int64_t dot_lanes(int64_t n, int64_t width) {
  for (int64_t l = width; l >= std::max<int64_t>(4, width / 4); l /= 2)
    if (n % l == 0) return l;
  return width;
}

UOpPtr tile_dot(UOpPtr k, const MatmulAxes& mm, const RegisterTile& tile) {
  const int64_t reduce_id = mm.reduce->get<AxisArg>().id, rows_id = mm.rows->get<AxisArg>().id;
  k = pad_to_multiple(k, mm.reduce, tile.lanes);
  k = split(k, find_range(k, reduce_id), tile.lanes, AxisKind::Upcast).root;
  const UOpPtr cols = find_range(k, mm.cols->get<AxisArg>().id);
  k = substitute(k, {{cols, with_kind(cols, AxisKind::Unroll)}});
  const int64_t m = *trip(mm.rows), tiles = (m + tile.rows - 1) / tile.rows;
  const UOpPtr& store = k->src.at(0)->src.at(0);
  const bool repeat_last = !loads_output(k, store->src.at(0)->src.at(0));
  k = pad_output_range(k, find_range(k, rows_id), tiles * tile.rows, repeat_last);
  UOpPtr unrolled;
  if (tile.rows > 1) {
    const Split s = split(k, find_range(k, rows_id), tile.rows, AxisKind::Unroll);
    k = loop_first(s.root, s.outer), unrolled = s.inner;
  } else {
    k = loop_first(k, find_range(k, rows_id));
  }
  k = drop_unit_loops(k);
  return unrolled ? rows_before_lanes(k, find_range(k, unrolled->get<AxisArg>().id)) : k;
}

// ---- GEMV --------------------------------------------------------------------------
// [1, K] @ [K, N] reads all of b once for 2 FLOP per element: it runs at memory
// speed when b streams row after row. The columns go in one-row tiles of one cache
// line (line_vectors), in chunks of up to kGemvChunk columns that the
// threads share, and k in blocks of about kGemvRows rows (k_blocks) outside the
// tiles of a chunk: each block reads its rows of b as kGemvRows contiguous
// streams across the chunk, the chunk's partial sums waiting in the output (in
// L1). Without blocks each tile walked all K rows of b at N floats a step, a new
// page every row.
// 8 KiB of a row of float32: 2048 ran 13% faster than 1024 (one page per row and block)
// in CPU time, LOOM_THREADS=1, [1,4096]@[4096,4096], docs/performance.md
constexpr int64_t kGemvChunk = 2048;
// Streams of b in flight (ir/contraction.hpp): split_reduceop's parts of a GEMV's k are
// whole blocks of them.
constexpr int64_t kGemvRows = kGemvStreams;
// Columns per chunk when other loops (the parts of k) are what the threads share: a
// whole row of [4096, 4096]'s b, 16 KiB of float32 partial sums: their partial sums
// fill half of L1d; 10% more bytes per CPU-second than 2048 in parts of 64 rows
// (docs/performance.md, GEMV).
int64_t gemv_row_chunk(const Target& t, int64_t itemsize) { return t.l1d_bytes / 2 / itemsize; }
constexpr int64_t kMinChunks = 2;  // the chunks are what the threads share

// Vectors of `lanes` elements in one cache line, at least one: a one-row tile that
// wide reads one line of each of its block's rows a step, the kGemvRows streams
// advancing together, as OpenBLAS's sgemv_n does; 8 vectors (4 lines of a row, then
// the next row) read b about 25% slower (docs/performance.md, GEMV).
int64_t line_vectors(int64_t lanes, int64_t itemsize, const Target& t) {
  return std::max<int64_t>(1, t.line_bytes / (lanes * itemsize));
}

// Tiles of `width` columns per chunk: up to `columns` columns, at most `most` tiles,
// a divisor of the `n` tiles.
int64_t gemv_chunk(int64_t n, int64_t width, int64_t most, int64_t columns = kGemvChunk) {
  int64_t chunk = std::clamp<int64_t>(columns / width, 1, std::max<int64_t>(1, most));
  while (n % chunk != 0) --chunk;
  return chunk;
}

// The kernel's output loops of more than one iteration other than `cols`, outermost first.
std::vector<UOpPtr> output_loops_but(const UOpPtr& k, const UOpPtr& cols) {
  std::vector<UOpPtr> out;
  const UOpPtr& end = k->src.at(0);
  for (size_t i = 1; i < end->src.size(); ++i)
    if (end->src[i] != cols && kind(end->src[i]) == AxisKind::Loop && trip(end->src[i]).value_or(0) > 1)
      out.push_back(end->src[i]);
  return out;
}

// The other output loops (a batch, or split_reduceop's parts of k, each a run of whole
// rows of b) go first: they are what the threads share (else the chunks), each streamed
// whole.
UOpPtr tile_gemv(UOpPtr k, const MatmulAxes& mm, int lanes, const Target& target, int64_t itemsize) {
  RegisterTile tile = register_tile(1, *trip(mm.cols), lanes, target.vector_registers, mm.a_ops);
  if (mm.a_ops == 0) tile.vectors = std::min(tile.vectors, line_vectors(lanes, itemsize, target));
  auto [split_cols, cols_outer] = split_lanes(k, mm.cols, {tile.lanes, tile.vectors});
  const UOpPtr reduce = find_range(split_cols, mm.reduce->get<AxisArg>().id);
  const auto kb = k_blocks(split_cols, reduce, divisor_near(*trip(reduce), kGemvRows));
  const UOpPtr tiles = find_range(kb ? kb->root : split_cols, cols_outer);
  if (!kb || !tiles) return drop_unit_loops(split_cols);
  const int64_t n = *trip(tiles), width = tile.lanes * tile.vectors;
  const std::vector<UOpPtr> batch = output_loops_but(k, mm.cols);
  const int64_t chunk = batch.empty() ? gemv_chunk(n, width, n / kMinChunks)
                                      : gemv_chunk(n, width, n, gemv_row_chunk(target, itemsize));
  k = block_tiles(kb->root, tiles, chunk, kb->blocks);
  for (auto b = batch.rbegin(); b != batch.rend(); ++b)
    if (const UOpPtr r = find_range(k, (*b)->get<AxisArg>().id)) k = loop_first(k, r);
  return drop_unit_loops(k);
}

// ---- blocks of every float sum ------------------------------------------------------
// Any float-sum range still longer than kBlock (the reduced one when the lanes
// are outputs, or when nothing was upcast) is blocked the same way.
UOpPtr block_all_sums(UOpPtr k) {
  for (;;) {
    UOpPtr next;
    for (const auto& r : ranges_of(k))
      if (kind(r) == AxisKind::Reduce && trip(r).value_or(0) > kBlock && is_float_sum(reduce_of(k, r)))
        next = r;
    if (!next) return k;
    k = block_sum(k, next->get<AxisArg>().id);
  }
}

// ---- column sums ----------------------------------------------------------------------
// [K, N].sum(0) is a GEMV whose a is ones (column_sum_axes): the same one-row tiles in
// chunks of columns, k in blocks of kGemvRows rows outside a chunk's tiles, each block
// kGemvRows contiguous streams, the chunk's partial sums waiting in the output. The
// other output loops (split_reduceop's blocks of rows) go first: they are what the
// threads share (else the chunks), each block of rows streamed whole. Without blocks
// of k, the plain tiles with every long sum blocked.
UOpPtr tile_column_sum(UOpPtr k, const MatmulAxes& cs, int lanes, const Target& target, int64_t itemsize) {
  RegisterTile tile = register_tile(1, *trip(cs.cols), lanes, target.vector_registers);
  tile.vectors = std::min(tile.vectors, line_vectors(lanes, itemsize, target));
  auto [split_cols, cols_outer] = split_lanes(k, cs.cols, {tile.lanes, tile.vectors});
  const UOpPtr reduce = find_range(split_cols, cs.reduce->get<AxisArg>().id);
  const auto kb = k_blocks(split_cols, reduce, divisor_near(*trip(reduce), kGemvRows));
  const UOpPtr tiles = find_range(kb ? kb->root : split_cols, cols_outer);
  if (!kb || !tiles) return block_all_sums(drop_unit_loops(split_cols));
  const int64_t n = *trip(tiles), width = tile.lanes * tile.vectors;
  // With no other loop, the chunks are what the threads share.
  const int64_t chunk = cs.panels.empty() ? gemv_chunk(n, width, n / kMinChunks)
                                          : gemv_chunk(n, width, n, gemv_row_chunk(target, itemsize));
  k = block_tiles(kb->root, tiles, chunk, kb->blocks);
  for (auto p = cs.panels.rbegin(); p != cs.panels.rend(); ++p)
    if (const UOpPtr r = find_range(k, (*p)->get<AxisArg>().id)) k = loop_first(k, r);
  return drop_unit_loops(k);
}

// ---- threads ------------------------------------------------------------------------
// The range to run across threads: the outermost loop of the kernel's ENDs, if
// every END has it first (the loop several outputs share) and it has a constant trip
// count worth splitting. A kernel with an effect outside it keeps running on one
// thread: that effect would run once per task.
UOpPtr parallel_candidate(const UOpPtr& kernel) {
  if (kernel->op != Op::SINK || kernel->src.empty()) return nullptr;
  const UOpPtr& first = kernel->src[0];
  if (first->op != Op::END || first->src.size() < 2) return nullptr;
  const UOpPtr& range = first->src[1];
  if (range->op != Op::RANGE || kind(range) != AxisKind::Loop) return nullptr;
  if (trip(range).value_or(0) < 2 || scatters_along(kernel, range)) return nullptr;
  for (const auto& end : kernel->src) {
    if (end->op != Op::END || end->src.size() < 2 || end->src[1] != range) return nullptr;
    // Threads must write disjoint elements: a loop its store does not move along (the
    // blocks of k whose partial sums wait in the output) runs in order on one thread.
    if (end->src[0]->op == Op::STORE && !reaches(end->src[0]->src.at(0), range)) return nullptr;
  }
  return range;
}

bool has_kind(const UOpPtr& kernel, AxisKind k) {
  const auto ranges = ranges_of(kernel);
  return std::any_of(ranges.begin(), ranges.end(), [&](const UOpPtr& r) { return kind(r) == k; });
}

// Value of an i64 index expression (a RANGE bound) for these variable values.
int64_t eval_index(const UOpPtr& u, const std::vector<UOpPtr>& vars, const std::vector<int64_t>& values) {
  auto arg = [&](size_t i) { return eval_index(u->src.at(i), vars, values); };
  switch (u->op) {
    case Op::CONST: return u->const_int();
    case Op::DEFINE_VAR: {
      const auto it = std::find(vars.begin(), vars.end(), u);
      return values.at(static_cast<size_t>(it - vars.begin()));
    }
    case Op::ADD: return static_cast<int64_t>(static_cast<uint64_t>(arg(0)) + static_cast<uint64_t>(arg(1)));
    case Op::SUB: return static_cast<int64_t>(static_cast<uint64_t>(arg(0)) - static_cast<uint64_t>(arg(1)));
    case Op::MUL: return static_cast<int64_t>(static_cast<uint64_t>(arg(0)) * static_cast<uint64_t>(arg(1)));
    case Op::MAX: return std::max(arg(0), arg(1));
    case Op::IDIV: {
      const int64_t d = arg(1);
      return d == 0 ? 0 : d == -1 ? static_cast<int64_t>(0 - static_cast<uint64_t>(arg(0))) : arg(0) / d;
    }
    case Op::MOD: {
      const int64_t d = arg(1);
      return d == 0 || d == -1 ? 0 : arg(0) % d;
    }
    default:
      throw Error(
          fmt::format("parallel_extent: the parallel range's bound uses {} {}; expected CONST, "
                      "DEFINE_VAR, ADD, SUB, MUL, MAX, IDIV or MOD",
                      op_name(u->op), to_string(u->dtype)));
  }
}

// ---- sums that pick by their range -------------------------------------------------
// A float sum over a short range whose body picks its value by that range (a stack of
// shifted slices summed against a weight: sum_t stack(x shifted by t)[t] * w[c, t]) is
// written out as its terms, each with the range a constant, so each pick folds to the
// one load it reads; the sum's other ranges stay a REDUCE. Without it every step
// evaluates every piece under a mask (the hand-built conv's forward, docs/performance.md).
constexpr int64_t kMaxPickedTerms = 16;
UOpPtr expand_picked_sums(const UOpPtr& kernel) {
  std::vector<std::pair<UOpPtr, UOpPtr>> done;
  for (const auto& red : toposort(kernel)) {
    if (red->op != Op::REDUCE || !is_float_sum(red) || red->dtype.lanes != 1) continue;
    const UOpPtr& body = red->src[0];
    for (size_t i = 1; i < red->src.size(); ++i) {
      const UOpPtr& r = red->src[i];
      if (r->op != Op::RANGE || trip(r).value_or(kMaxPickedTerms + 1) > kMaxPickedTerms) continue;
      if (!picks_by(body, r)) continue;
      UOpPtr sum;
      for (int64_t v = 0; v < *trip(r); ++v) {
        const UOpPtr term = simplify(substitute(body, {{r, const_int(DType::Int64, v)}}));
        sum = sum ? alu(Op::ADD, {sum, term}) : term;
      }
      std::vector<UOpPtr> src{sum};
      for (size_t j = 1; j < red->src.size(); ++j)
        if (j != i) src.push_back(red->src[j]);
      done.emplace_back(red, src.size() == 1 ? sum : red->with_src(std::move(src)));
      break;
    }
  }
  return done.empty() ? kernel : simplify(substitute(kernel, done));
}

}  // namespace

int64_t matmul_panel_depth(const Flags& flags) { return matmul_panel_bytes(flags) > 0 ? kBlock : 0; }

UOpPtr optimize_kernel(const UOpPtr& kernel, const OptimizerOptions& options) {
  if (!options.enabled) return kernel;
  UOpPtr k = kernel;
  // Once per kernel: a kernel that already has lanes or threads was optimised.
  if (!has_kind(k, AxisKind::Upcast) && !has_kind(k, AxisKind::Unroll) && !has_kind(k, AxisKind::Parallel)) {
    k = expand_picked_sums(k);
    const Target& target = options.target;
    const int bytes = target.vector_bytes;
    const int width = bytes / widest_element(k);
    // The GEMV, column-sum and dot tiles order one END's loops: a kernel of several takes the plain path.
    const bool one_end = k->src.size() == 1;
    const auto mm = width >= 2 ? matmul_axes(k) : std::nullopt;
    const auto gemv = width >= 2 && !mm && one_end ? gemv_axes(k) : std::nullopt;
    const auto column_sum = width >= 2 && !mm && !gemv && one_end ? column_sum_axes(k) : std::nullopt;
    const auto dot = mm && one_end ? dot_axes(k, width) : std::nullopt;
    const RegisterTile dtile = dot ? dot_tile(*trip(dot->rows), *trip(dot->cols),
                                              dot_lanes(*trip(dot->reduce), width), target.vector_registers)
                                   : RegisterTile{};
    if (dot && dtile.rows > 0) {
      k = simplify(tile_dot(k, *dot, dtile));
    } else if (mm) {
      k = simplify(tile_matmul(k, *mm, width, target, bytes / width));
    } else if (gemv) {
      k = simplify(tile_gemv(k, *gemv, width, target, bytes / width));
    } else if (column_sum) {
      k = simplify(tile_column_sum(k, *column_sum, width, target, bytes / width));
    } else {
      if (width >= 2)
        for (UOpPtr lane = lane_candidate(k); lane; lane = lane_candidate(k)) k = upcast(k, lane, width);
      k = simplify(block_all_sums(k));
    }
    // A side END beside a tile takes vectors of half the registers, within what a UOp's vector holds.
    const int64_t side_vectors =
        std::min<int64_t>(kMaxVectorLanes, target.vector_registers * width / 2) / width;
    if (k->src.size() > 1)
      k = simplify(align_side_ends(k, mm ? std::optional<Lanes>(Lanes{width, side_vectors}) : std::nullopt));
  }
  if (const UOpPtr range = parallel_candidate(k))
    k = substitute(k, {{range, with_kind(range, AxisKind::Parallel)}});
  return k;
}

std::vector<UOpPtr> kernel_vars(const UOpPtr& kernel) {
  std::vector<UOpPtr> vars;
  for (const auto& n : toposort(kernel))
    if (n->op == Op::DEFINE_VAR) vars.push_back(n);
  std::sort(vars.begin(), vars.end(),
            [](const UOpPtr& a, const UOpPtr& b) { return a->get<VarArg>().name < b->get<VarArg>().name; });
  for (size_t i = 1; i < vars.size(); ++i) {
    const VarArg &a = vars[i - 1]->get<VarArg>(), &b = vars[i]->get<VarArg>();
    if (a.name == b.name)  // one name, two slots of `vars`: the ABI could not tell them apart
      throw Error(fmt::format("kernel_vars: variable '{}' appears twice, with bounds [{}, {}] and [{}, {}]",
                              a.name, a.min, a.max, b.min, b.max));
  }
  return vars;
}

UOpPtr parallel_extent_graph(const UOpPtr& kernel) {
  std::vector<UOpPtr> kept;
  for (const auto& n : toposort(kernel))
    if (n->op == Op::RANGE && kind(n) == AxisKind::Parallel) {
      kept.push_back(n);
      break;
    }
  for (UOpPtr& var : kernel_vars(kernel)) kept.push_back(std::move(var));
  return UOp::make(Op::SINK, DType::Bool, std::move(kept));
}

int64_t parallel_extent(const UOpPtr& kernel, const std::vector<int64_t>& vars) {
  const std::vector<UOpPtr> defined = kernel_vars(kernel);
  if (vars.size() != defined.size())
    throw Error(fmt::format("parallel_extent: the kernel has {} variables but {} values were given",
                            defined.size(), vars.size()));
  for (const auto& n : toposort(kernel))
    if (n->op == Op::RANGE && kind(n) == AxisKind::Parallel)
      return std::max<int64_t>(0, eval_index(n->src.at(0), defined, vars));
  return 1;
}

}  // namespace loom
