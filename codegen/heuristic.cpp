// The optimiser's heuristic (codegen/heuristic.hpp): today's choices, made as Opts
// (ir/opt.hpp) applied one at a time to the kernel they are chosen for.
//
//   upcast    the range along which the kernel's memory traffic is contiguous
//             goes to the SIMD width (8 float32 lanes with AVX2, 16 with AVX-512);
//   unroll    a reduction keeps several vector accumulators: the upcast range is
//             split further (output lanes) or the reduced one is (reduced lanes);
//             a transposing copy loads whole vectors of several rows; a copy whose
//             inner loop reads a page apart reads several lines of a row a step;
//   blocks    a float sum is accumulated in nested blocks of at most kBlock per
//             accumulator, so its error stays bounded as it grows;
//   parallel  the outermost output range runs across threads;
//   expand    a float sum over a short range that picks by it (a stack of shifted
//             slices summed against a weight) is written out as its terms first;
//   tiles     a matmul-like kernel (codegen/register_tile.hpp) gets a register
//             tile instead: rows unrolled, columns unrolled x upcast; one whose
//             columns are narrower than a vector and whose factors both read the
//             sum contiguously (a conv's weight gradient) a dot tile, the sum in
//             lanes; a GEMV or a column sum one-row tiles in chunks;
//   outputs   a kernel of several outputs is tiled by its first END, the others
//             following its splits, each in its threads' loop (docs/kernel-ir.md).
//
// docs/performance.md explains the choices with the kernels of the benchmarks.
#include "codegen/heuristic.hpp"

#include "codegen/codegen.hpp"
#include "codegen/kernel_edit.hpp"
#include "codegen/pair_dot.hpp"
#include "codegen/recipes.hpp"
#include "codegen/register_tile.hpp"
#include "ir/contraction.hpp"
#include "ir/pattern.hpp"
#include "ir/range_split.hpp"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <optional>
#include <unordered_set>

namespace loom {

namespace {

using namespace kopt;

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
    for (const auto& r : runs_in) bytes *= static_cast<double>(trip_bound(r));
    out.push_back({n, bytes});
  }
  return out;
}

// The loops of `kernel` other than `range` that step `index` through the `stride`
// elements between two steps of `range`: one stepping it by one element (either way),
// the next by the first's trip, and so on, all of them plain loops. Only chains that
// transpose_unroll's single forward loop does not cover count: two or more loops, or
// one that runs backwards (a pair copy: x[2q + 1 - t] read along the pairs q and the
// halves t, its panel P[q, r, t] written along rows r and halves t), and only as many
// as fit one UOp's vector with `width` lanes of `range` (kMaxVectorLanes).
std::vector<UOpPtr> run_chain(const UOpPtr& kernel, const UOpPtr& index, const UOpPtr& range, int64_t width) {
  const auto along = address_stride(index, range);
  if (!along || std::abs(*along) <= 1 || index->src.size() > 2) return {};
  std::vector<UOpPtr> chain;
  bool backwards = false;
  int64_t covered = 1;  // the elements the chain's loops step through together
  while (covered < std::abs(*along)) {
    UOpPtr next;
    for (const auto& r : ranges_of(kernel)) {
      const auto st = address_stride(index, r);
      if (r != range && kind(r) == AxisKind::Loop && st && std::abs(*st) == covered &&
          trip(r).value_or(0) > 1)
        next = r;
    }
    if (!next) return {};
    backwards |= address_stride(index, next) < 0;
    chain.push_back(next);
    covered *= *trip(next);
  }
  const bool fits = covered == std::abs(*along) && width * covered <= kMaxVectorLanes;
  return fits && (chain.size() >= 2 || backwards) ? chain : std::vector<UOpPtr>{};
}

// Does the kernel reduce anything? (A copy does not.)
bool has_reduce(const UOpPtr& kernel) {
  const auto nodes = toposort(kernel);
  return std::any_of(nodes.begin(), nodes.end(), [](const UOpPtr& n) { return n->op == Op::REDUCE; });
}

// Bytes that become vector accesses minus bytes that become gathers if `range`
// went to the lanes; accesses that do not use it are broadcast.
// In a copy, an access whose other loops complete runs along `range` (run_chain)
// becomes vectors too once run_unroll has unrolled them.
double lane_score(const UOpPtr& kernel, bool copy, const std::vector<Access>& all, const UOpPtr& range,
                  int64_t width) {
  double score = 0;
  for (const Access& a : all) {
    const auto s = address_stride(a.index, range);
    if (s == 0) continue;
    const bool vector = s == 1 || (copy && !run_chain(kernel, a.index, range, width).empty());
    score += vector ? a.bytes : -a.bytes;
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
UOpPtr lane_candidate(const UOpPtr& kernel, int64_t width) {
  const std::vector<Access> all = accesses(kernel);
  std::unordered_set<const UOp*> taken = beside_lanes(kernel);
  taken.merge(running_max_ranges(kernel));
  const bool copy = !has_reduce(kernel);
  UOpPtr best;
  double best_score = 0;
  for (const auto& r : ranges_of(kernel)) {
    const AxisKind k = kind(r);
    if ((k != AxisKind::Loop && k != AxisKind::Reduce) || trip_bound(r) < 2) continue;
    if (taken.contains(r.get())) continue;
    if (scatters_along(kernel, r)) continue;
    const double score = lane_score(kernel, copy, all, r, width) + (k == AxisKind::Loop ? 0.5 : 0);
    if (score > best_score) best = r, best_score = score;
  }
  return best;
}

// The lane ranges of a copy, one per END (copies merged into one kernel by multi_output
// each keep theirs), or none when the kernel reduces or has unrolled already.
std::vector<UOpPtr> copy_lane_ranges(const UOpPtr& kernel) {
  std::vector<UOpPtr> lanes;
  for (const auto& n : toposort(kernel)) {
    if (n->op == Op::REDUCE || (n->op == Op::RANGE && kind(n) == AxisKind::Unroll)) return {};
    if (n->op == Op::RANGE && kind(n) == AxisKind::Upcast &&
        std::find(lanes.begin(), lanes.end(), n) == lanes.end())
      lanes.push_back(n);
  }
  return lanes;
}

// A copy that transposes (a load strided along the lanes, contiguous along another
// loop, as panel_packing's copy of a weight read [out, in] makes) unrolls that loop:
// the expander then loads whole vectors along it and transposes them in registers
// (shuffles) instead of a gather or scatter per vector. Its rows: the most lanes
// within one UOp's vector (kMaxVectorLanes), at most as many as the vector's, that
// divide the loop. One such loop per lane range.
std::vector<Opt> transpose_unroll(const UOpPtr& kernel, int64_t width) {
  const auto most = std::min<int64_t>(
      width, static_cast<int64_t>(std::bit_floor(static_cast<uint64_t>(kMaxVectorLanes / width))));
  std::vector<Opt> out;
  for (const UOpPtr& lanes : copy_lane_ranges(kernel)) {
    auto rows_of = [&]() -> std::optional<Opt> {
      for (const Access& a : accesses(kernel)) {
        const auto along_lanes = address_stride(a.index, lanes);
        // A masked access (padded lanes) stays a gather: the expander keeps its lanes in loop order.
        if (!along_lanes || *along_lanes == 0 || *along_lanes == 1 || a.index->src.size() > 2) continue;
        for (const auto& r : ranges_of(kernel)) {
          if (kind(r) != AxisKind::Loop || address_stride(a.index, r) != std::optional<int64_t>{1}) continue;
          for (int64_t rows = most; rows >= 2; rows /= 2)
            if (trip(r).value_or(0) >= rows && *trip(r) % rows == 0)
              return Opt{OptKind::Unroll, r->get<AxisArg>().id, rows};
        }
      }
      return std::nullopt;
    };
    if (const auto o = rows_of()) out.push_back(*o);
  }
  return out;
}

// A copy none of whose ranges takes lanes by traffic (every range strides some read: a pair
// copy of a transposed operand, P[io, q, ii, p] = x[2q + 1 - p, 6io + ii]): the range along
// which the stores are runs (run_chain), most bytes first. Its reads are gathers, but the
// values and the stores are vectors, where the copy ran one element a step (BEAM found
// lanes 3x faster there, docs/performance.md).
UOpPtr store_run_candidate(const UOpPtr& kernel, int64_t width) {
  if (has_reduce(kernel)) return nullptr;
  UOpPtr best;
  double best_bytes = 0;
  for (const auto& r : ranges_of(kernel)) {
    if (kind(r) != AxisKind::Loop || !trip(r) || *trip(r) < width || *trip(r) % width != 0) continue;
    double bytes = 0;
    for (const auto& n : toposort(kernel))
      if (n->op == Op::STORE && !run_chain(kernel, n->src.at(0), r, width).empty())
        bytes += static_cast<double>(n->src.at(1)->dtype.itemsize());
    if (bytes > best_bytes) best = r, best_bytes = bytes;
  }
  return best;
}

// Bytes a lane of `root` loads: one element of each read of a buffer.
int64_t loaded_bytes_per_lane(const UOpPtr& root) {
  int64_t bytes = 0;
  for (const auto& n : toposort(root))
    if (n->op == Op::LOAD && n->src.at(0)->op == Op::INDEX && n->src[0]->src.at(0)->op == Op::DEFINE_GLOBAL)
      bytes += n->dtype.itemsize();
  return bytes;
}

// The END of `kernel` that loops over `range` (the whole kernel when none lists it).
UOpPtr end_over(const UOpPtr& kernel, const UOpPtr& range) {
  for (const auto& e : kernel->src)
    if (e->op == Op::END && std::find(e->src.begin() + 1, e->src.end(), range) != e->src.end()) return e;
  return kernel;
}

// A copy whose lanes have run chains (run_chain) in some access unrolls their loops
// whole: each of the access's vectors is then one run of consecutive elements, in some
// order, which the expander reads or writes as one vector and shuffles. Only while what a
// copy's unrolled lanes load fits the Target's vector registers: a pair copy of three
// float32 pieces (the qkv gradient's concatenation) unrolled to 192 lanes loaded 36
// registers' worth and spilled, 4x slower than its lanes alone (BEAM, docs/performance.md).
// Nothing when no access has run chains; no Opt when the runs would not fit (the copy then
// keeps its lanes alone: no other unroll either).
std::optional<std::vector<Opt>> run_unroll(const UOpPtr& kernel, int64_t width, const Target& target) {
  std::vector<UOpPtr> unrolled;
  bool refused = false;
  for (const UOpPtr& lanes : copy_lane_ranges(kernel)) {
    int64_t lanes_in_all = width;
    std::vector<UOpPtr> runs;
    for (const Access& a : accesses(kernel))
      for (const auto& r : run_chain(kernel, a.index, lanes, width))
        if (std::find(unrolled.begin(), unrolled.end(), r) == unrolled.end() &&
            std::find(runs.begin(), runs.end(), r) == runs.end() &&
            lanes_in_all * *trip(r) <= kMaxVectorLanes)
          runs.push_back(r), lanes_in_all *= *trip(r);
    if (lanes_in_all * loaded_bytes_per_lane(end_over(kernel, lanes)) >
        target.vector_registers * target.vector_bytes) {
      refused |= !runs.empty();
      continue;
    }
    unrolled.insert(unrolled.end(), runs.begin(), runs.end());
  }
  if (unrolled.empty()) return refused ? std::optional<std::vector<Opt>>{std::vector<Opt>{}} : std::nullopt;
  std::vector<Opt> out;
  for (const auto& r : unrolled) out.push_back(Opt{OptKind::Unroll, r->get<AxisArg>().id, *trip(r)});
  return out;
}

// The step of `index`'s address when `range` steps by one, each select in it taken as
// its first choice: a pair copy's last panel clamps its rows (WHERE(row < m, row, m - 1)),
// which hides the step every other panel takes.
std::optional<int64_t> typical_stride(const UOpPtr& index, const UOpPtr& range) {
  const UOpPtr address = linear_address(index);
  std::vector<std::pair<UOpPtr, UOpPtr>> first_choices;
  for (const auto& n : toposort(address))
    if (n->op == Op::WHERE) first_choices.emplace_back(n, n->src.at(1));
  return linear_stride(first_choices.empty() ? address : simplify(substitute(address, first_choices)), range);
}

// A copy that crosses lines along an inner loop and stays in them along an outer one (a
// transposed operand's pair copy reads 2 x lanes rows of each source a step of the pairs,
// 6 elements further along the same rows a step of the panels) reuses a line only if it
// survives the whole inner sweep. When the lines one step of the outer loop touches exceed
// half of L1, the inner loop is blocked (Blocks): the loop over its blocks goes outermost,
// so the outer loop sweeps one block's lines at a time (the GPT's pair copy of a GELU's
// gradient, three sources: 2.5x faster, docs/performance.md). Only a copy of one END, and
// only its unmasked accesses (a masked piece of a concatenation reads a part of its loops);
// the blocks are a multiple of min_blocks, so the threads share them evenly.
std::optional<Opt> line_blocks(const UOpPtr& kernel, const Target& target) {
  if (kernel->src.size() != 1 || has_reduce(kernel)) return std::nullopt;
  const UOpPtr& end = kernel->src[0];
  if (end->op != Op::END) return std::nullopt;
  const std::vector<UOpPtr> loops(end->src.begin() + 1, end->src.end());
  const double budget = static_cast<double>(target.l1d_bytes) / 2;
  for (size_t a = 0; a < loops.size(); ++a) {
    if (kind(loops[a]) != AxisKind::Loop) continue;
    // Lines one step of loops[a] touches, of the accesses that stay in their lines along it,
    // and which inner loops cross a line a step.
    double lines = 0;
    std::vector<bool> crossing(loops.size(), false);
    for (const Access& access : accesses(kernel)) {
      if (access.index->src.size() > 2) continue;  // a masked piece of a concatenation reads a part
      const int64_t itemsize = access.index->dtype.itemsize();
      const auto along_a = typical_stride(access.index, loops[a]);
      if (!along_a || *along_a == 0 || std::abs(*along_a) * itemsize >= target.line_bytes) continue;
      double touched = 1;
      for (size_t b = a + 1; b < loops.size(); ++b) {
        const auto along_b = typical_stride(access.index, loops[b]);
        if (along_b && std::abs(*along_b) * itemsize >= target.line_bytes)
          touched *= static_cast<double>(trip_bound(loops[b])), crossing[b] = true;
      }
      lines += touched;
    }
    if (lines * target.line_bytes <= budget) continue;
    for (size_t b = a + 1; b < loops.size(); ++b) {
      if (!crossing[b] || kind(loops[b]) != AxisKind::Loop || !trip(loops[b])) continue;
      const int64_t n = *trip(loops[b]);
      const double per_step = lines / static_cast<double>(n);
      const int64_t threads = std::max<int64_t>(2, target.min_blocks());
      for (int64_t size = n / threads; size >= 1; --size)
        if (n % (size * threads) == 0 && static_cast<double>(size) * per_step * target.line_bytes <= budget)
          return Opt{OptKind::Blocks, loops[b]->get<AxisArg>().id, size};
    }
  }
  return std::nullopt;
}

// A copy whose reads clamp an index in the last iteration of a loop only (a pair copy's
// last panel repeats a's last row: WHERE(6p + r < m, 6p + r, m - 1)) hides the unit stride
// along the panel's rows from the lanes in every iteration. That loop's last iteration is
// peeled into an END of its own when without it a read runs at unit stride along a loop it
// did not before (the GPT's pair copy of three transposed sources 3x faster alone,
// docs/performance.md). Only a copy of one END over two loops or more.
std::optional<Opt> clamp_peel(const UOpPtr& kernel) {
  if (kernel->src.size() != 1 || has_reduce(kernel)) return std::nullopt;
  const UOpPtr& end = kernel->src[0];
  if (end->op != Op::END || end->src.size() < 3) return std::nullopt;
  const int64_t fresh = next_axis_id(kernel);
  for (size_t i = 1; i < end->src.size(); ++i) {
    const UOpPtr& range = end->src[i];
    if (kind(range) != AxisKind::Loop || trip(range).value_or(0) < 2) continue;
    const UOpPtr shorter = make_range(*trip(range) - 1, fresh, AxisKind::Loop);
    for (const Access& access : accesses(kernel)) {
      if (access.index->src.size() > 2 || !reaches(access.index, range)) continue;
      const UOpPtr peeled = simplify(substitute(access.index, {{range, shorter}}));
      for (size_t j = 1; j < end->src.size(); ++j) {
        const UOpPtr& along = end->src[j];
        if (along == range || address_stride(access.index, along)) continue;
        const auto stride = address_stride(peeled, along);
        if (stride && std::abs(*stride) == 1) return Opt{OptKind::Peel, range->get<AxisArg>().id};
      }
    }
  }
  return std::nullopt;
}

// Accumulators for `n` vectors of `width` lanes: the largest factor of the Target's
// accumulators() (enough independent additions to cover the FP add latency) that divides
// n and keeps all lanes within one vector dtype (64 byte lanes on AVX-512 take 2, not 4).
int64_t unroll_for(int64_t n, int64_t width, const Target& target) {
  int64_t a = target.accumulators();
  while (a > 1 && (n % a != 0 || a * width > kMaxVectorLanes)) a /= 2;
  return a;
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
  if (trip_bound(range) < 2 || scatters_along(kernel, range)) return nullptr;
  for (const auto& end : kernel->src)
    if (end->op != Op::END || end->src.size() < 2 || end->src[1] != range) return nullptr;
  // Threads must write disjoint elements, and each task runs the whole kernel: a loop
  // some store does not move along (the blocks of k whose partial sums wait in the
  // output, a zero fill before a scatter) runs in order on one thread.
  return stores_along(kernel, range) ? range : nullptr;
}

int64_t axis_of(const UOpPtr& range) { return range->get<AxisArg>().id; }

// A copy whose inner loop reads a new page at every step: the copy of b into column
// panels (schedule/panel_packing.cpp) walks a strip of b's columns one line (or two) of
// each row at a time, rows 4 KiB apart at n = 1024. The hardware prefetchers stay within
// a page, so they fetch nothing ahead, and each line is a miss waiting on its own. The
// threads' loop outside it reads the next lines of the same rows: unrolled so that one
// step reads prefetch_streams lines of a row, that many misses are in flight together, as
// a GEMV's gemv_rows streams are (the copy of b at 1024 with AVX2: 0.40 to 0.65 ms -> 0.22
// to 0.28, docs/performance.md). At least min_blocks steps of that loop are left to the
// threads. Kernels that reduce keep their loops.
std::optional<Opt> page_stride_unroll(const UOpPtr& kernel, const Target& target) {
  if (kernel->src.size() != 1) return std::nullopt;
  const UOpPtr& end = kernel->src[0];
  if (end->op != Op::END || end->src.size() < 3) return std::nullopt;
  const UOpPtr& outer = end->src[1];
  if (outer->op != Op::RANGE || kind(outer) != AxisKind::Loop || !trip(outer)) return std::nullopt;
  int64_t step_bytes = 0;  // what one step of the outer loop moves a page-striding read by
  for (const auto& n : toposort(kernel)) {
    if (n->op == Op::REDUCE) return std::nullopt;
    if (n->op != Op::LOAD || n->src.at(0)->op != Op::INDEX) continue;
    const UOpPtr& index = n->src[0];
    if (index->src.at(0)->op != Op::DEFINE_GLOBAL) continue;
    const int64_t itemsize = index->dtype.itemsize();
    const auto along_outer = address_stride(index, outer);
    if (!along_outer || *along_outer <= 0 || *along_outer * itemsize >= target.page_bytes) continue;
    for (size_t i = 2; i < end->src.size(); ++i) {
      const UOpPtr& inner = end->src[i];
      if (inner->op != Op::RANGE || kind(inner) != AxisKind::Loop) continue;
      const auto along_inner = address_stride(index, inner);
      if (along_inner && std::abs(*along_inner) * itemsize >= target.page_bytes)
        step_bytes = std::max(step_bytes, *along_outer * itemsize);
    }
  }
  if (step_bytes == 0) return std::nullopt;
  const int64_t lines = std::max<int64_t>(1, target.prefetch_streams * target.line_bytes / step_bytes);
  auto u = static_cast<int64_t>(std::bit_floor(static_cast<uint64_t>(lines)));
  while (u > 1 && (*trip(outer) % u != 0 || *trip(outer) / u < target.min_blocks())) u /= 2;
  if (u < 2) return std::nullopt;
  return Opt{OptKind::Unroll, axis_of(outer), u};
}

// `range` to lanes of `width`: whole when it is an output range that fits in them,
// else split into lanes (padded to whole vectors), with several accumulators when the
// kernel reduces, and a float sum over what is left blocked. A symbolic range is
// planned for its longest (trip_bound) and always split, its tail masked.
void upcast(OptState& s, const UOpPtr& range, int width) {
  const int64_t n = trip_bound(range), id = axis_of(range);
  const bool reduced = kind(range) == AxisKind::Reduce;
  const UOpPtr red = reduce_of(s.kernel(), range);  // the reduce the lanes are folded by, if reduced
  // A range within a vector is all lanes; a reduced one padded to a whole vector only when
  // that at most doubles it: a max-pool window's 4 values padded to 16 lanes folded 16.
  if (trip(range) && n <= width && (!reduced || n * 2 <= width)) return s.apply({OptKind::Upcast, id, 0});
  // Several accumulators: the lanes of a reduction, or of the outputs of a kernel that reduces.
  const bool reduces = has_reduce(s.kernel());
  const int64_t unroll = reduces ? unroll_for((n + width - 1) / width, width, s.target()) : 1;
  if (!exact_quotient(range->src.at(0), width * unroll)) s.apply({OptKind::Pad, id, width * unroll});
  int64_t outer = next_axis_id(s.kernel());  // the split's outer part: range = outer * width + lane
  s.apply({OptKind::Upcast, id, width});
  if (unroll > 1) {
    const int64_t unrolled = outer;
    outer = next_axis_id(s.kernel());
    s.apply({OptKind::Unroll, unrolled, unroll});
  }
  if (reduced && is_float_sum(red) && trip_bound(find_range(s.kernel(), outer)) > kBlock)
    s.apply({OptKind::BlockSum, outer, kBlock});
}

// Lanes along a dot tile's sum: the widest vector when padding the sum to whole vectors
// wastes at most a quarter of the lanes (56 pixels a row: 4 vectors of 16, the last half
// masked), else a narrower one (half, a quarter) that divides it. The padding's masks are
// computed once per vector of the row (masks_outside, codegen/recipes.cpp); narrower
// vectors pack several columns into one register, which LLVM rebuilt lane by lane with
// every step (56 pixels in 8 lanes: the masks of 24 lanes, 64-bit compares, docs/performance.md).
// A symbolic sum is padded whatever the lanes: the widest.
int64_t dot_lanes(std::optional<int64_t> n, int64_t width) {
  if (!n) return width;
  for (int64_t l = width; l >= std::max<int64_t>(4, width / 4); l /= 2)
    if ((*n + l - 1) / l * l * 3 <= *n * 4 || *n % l == 0) return l;
  return width;
}

// A float sum over a short range whose body picks its value by that range (a stack of
// shifted slices summed against a weight: sum_t stack(x shifted by t)[t] * w[c, t]) is
// written out as its terms (ExpandSum), so each pick folds to the one load it reads;
// otherwise every step evaluates every piece under a mask (the hand-built conv's
// forward, docs/performance.md). One such range per sum.
constexpr int64_t kMaxPickedTerms = 16;
std::vector<Opt> picked_sums(const UOpPtr& kernel) {
  std::vector<Opt> out;
  for (const auto& red : toposort(kernel)) {
    if (red->op != Op::REDUCE || !is_float_sum(red) || red->dtype.lanes != 1) continue;
    for (size_t i = 1; i < red->src.size(); ++i) {
      const UOpPtr& r = red->src[i];
      if (r->op != Op::RANGE || trip(r).value_or(kMaxPickedTerms + 1) > kMaxPickedTerms) continue;
      if (!picks_by(red->src[0], r)) continue;
      out.push_back({OptKind::ExpandSum, axis_of(r)});
      break;
    }
  }
  return out;
}

bool is_tile(OptKind k) {
  return k == OptKind::MatmulTile || k == OptKind::GemvTile || k == OptKind::ColumnSumTile ||
         k == OptKind::DotTile;
}

bool is_fresh(const UOpPtr& kernel) {
  for (const auto& r : ranges_of(kernel)) {
    const AxisKind k = kind(r);
    if (k == AxisKind::Upcast || k == AxisKind::Unroll || k == AxisKind::Parallel || k == AxisKind::Pair)
      return false;
  }
  return true;
}

}  // namespace

void apply_heuristic(OptState& s) {
  // Once per kernel: a kernel that already has lanes or threads was optimised.
  if (is_fresh(s.kernel())) {
    for (const Opt& expand : picked_sums(s.kernel())) s.apply(expand);
    // A product of bfloat16s the schedule laid out in pairs sums them on the pair-dot
    // instruction, and is then tiled as any matmul (codegen/pair_dot.hpp).
    if (const UOpPtr pair = pair_dot_candidate(s.kernel(), s.target()))
      s.apply({OptKind::PairDot, axis_of(pair), 2});
    const UOpPtr& k = s.kernel();
    const Target& target = s.target();
    const int width = s.lanes();
    const int64_t itemsize = target.vector_bytes / width;
    // The GEMV, column-sum and dot tiles order one END's loops: a kernel of several takes the plain path.
    const bool one_end = k->src.size() == 1;
    const auto mm = width >= 2 ? matmul_axes(k) : std::nullopt;
    const auto gemv = width >= 2 && !mm && one_end ? gemv_axes(k) : std::nullopt;
    const auto column_sum = width >= 2 && !mm && !gemv && one_end ? column_sum_axes(k, target) : std::nullopt;
    const auto dot = width >= 2 && one_end ? dot_axes(k, width) : std::nullopt;
    // A symbolic extent (rows, sum) is planned for its upper bound (trip_bound).
    const RegisterTile dtile = dot ? dot_tile(dot->rows ? trip_bound(dot->rows) : 1, *trip(dot->cols),
                                              dot_lanes(trip(dot->reduce), width), target)
                                   : RegisterTile{};
    // A contraction whose b (sum x columns) is smaller than a vector ([64,256,3] @ [64,3,3]): the
    // plain loops, which LLVM unrolls and vectorises itself, beat every tile and lanes by
    // 2x and more (BEAM, docs/performance.md): no Opt but threads.
    const bool tiny_b =
        mm && trip(mm->cols) && trip(mm->reduce) && *trip(mm->cols) * *trip(mm->reduce) < width;
    if (tiny_b) {
    } else if (dot && dtile.rows > 0) {
      s.apply({OptKind::DotTile, axis_of(dot->cols), dtile.lanes, dtile.rows});
    } else if (mm) {
      // All the rows in one tile makes each a constant: not rows of a symbolic count.
      const RegisterTile tile = register_tile(trip_bound(mm->rows), trip_bound(mm->cols), width, target,
                                              mm->a_ops, mm->a_selects_rows && trip(mm->rows));
      s.apply({OptKind::MatmulTile, axis_of(mm->cols), tile.vectors, tile.rows});
    } else if (gemv) {
      RegisterTile tile = register_tile(1, trip_bound(gemv->cols), width, target, gemv->a_ops);
      if (gemv->a_ops == 0) tile.vectors = std::min(tile.vectors, line_vectors(width, itemsize, target));
      s.apply({OptKind::GemvTile, axis_of(gemv->cols), tile.vectors});
    } else if (column_sum) {
      RegisterTile tile = register_tile(1, trip_bound(column_sum->cols), width, target);
      tile.vectors = std::min(tile.vectors, line_vectors(width, itemsize, target));
      s.apply({OptKind::ColumnSumTile, axis_of(column_sum->cols), tile.vectors});
    } else if (width >= 2) {
      if (const auto peel = clamp_peel(s.kernel())) s.apply(*peel);
      for (UOpPtr lane = lane_candidate(s.kernel(), width); lane; lane = lane_candidate(s.kernel(), width))
        upcast(s, lane, width);
      if (s.applied().empty())
        if (const UOpPtr lane = store_run_candidate(s.kernel(), width)) upcast(s, lane, width);
      if (const auto runs = run_unroll(s.kernel(), width, target))
        for (const Opt& o : *runs) s.apply(o);
      else if (const auto rows = transpose_unroll(s.kernel(), width); !rows.empty())
        for (const Opt& o : rows) s.apply(o);
      else if (const auto lines = page_stride_unroll(s.kernel(), target))
        s.apply(*lines);
      if (const auto blocks = line_blocks(s.kernel(), target)) s.apply(*blocks);
    }
  }
  finish_heuristic(s);
}

void finish_heuristic(OptState& s) {
  bool tiled = false, matmul = false;
  for (const Opt& o : s.applied()) {
    tiled |= is_tile(o.kind);
    matmul |= o.kind == OptKind::MatmulTile || o.kind == OptKind::DotTile;
  }
  if (!s.applied().empty() || is_fresh(s.kernel())) {
    // Any float-sum range still longer than kBlock (the reduced one when the lanes
    // are outputs, or when nothing was upcast) is blocked the same way; a tile blocks its own.
    if (!tiled)
      while (const UOpPtr sum = long_float_sum(s.kernel()))
        s.apply({OptKind::BlockSum, axis_of(sum), kBlock});
    s.settle();
    // A side END beside a tile takes vectors of half the registers, within what a UOp's vector holds.
    const int64_t width = s.lanes();
    const int64_t side_vectors =
        std::min<int64_t>(kMaxVectorLanes, s.target().vector_registers * width / 2) / width;
    if (s.kernel()->src.size() > 1) s.apply({OptKind::AlignSides, -1, matmul ? side_vectors : 0});
  }
  if (const UOpPtr range = parallel_candidate(s.kernel())) s.apply({OptKind::Parallel, axis_of(range)});
}

namespace {

// `opts` applied to a copy of `s`: the move when every Opt fits, else nothing.
std::optional<std::vector<Opt>> fitting(const OptState& s, const std::vector<Opt>& opts) {
  OptState trial = s;
  try {
    for (const Opt& o : opts) trial.apply(o);
  } catch (const Error&) {
    return std::nullopt;
  }
  return opts;
}

// `range` to lanes of `width` with `unroll` accumulators, padded to whole vectors, as upcast() does.
std::optional<std::vector<Opt>> lanes_move(const OptState& s, const UOpPtr& range, int64_t width,
                                           int64_t unroll) {
  const int64_t id = axis_of(range);
  OptState trial = s;
  std::vector<Opt> move;
  try {
    auto apply = [&](const Opt& o) { trial.apply(o), move.push_back(o); };
    if (!exact_quotient(range->src.at(0), width * unroll)) apply({OptKind::Pad, id, width * unroll});
    const int64_t outer = next_axis_id(trial.kernel());
    apply({OptKind::Upcast, id, width});
    if (unroll > 1) apply({OptKind::Unroll, outer, unroll});
  } catch (const Error&) {
    return std::nullopt;
  }
  return move;
}

}  // namespace

std::vector<std::vector<Opt>> search_moves(const OptState& s) {
  std::vector<std::vector<Opt>> out;
  const auto add = [&](const std::optional<std::vector<Opt>>& move) {
    if (move) out.push_back(*move);
  };
  const UOpPtr& k = s.kernel();
  const int64_t width = s.lanes(), registers = s.target().vector_registers;
  bool split = false, tiled = false, paired = false;
  for (const Opt& o : s.applied()) {
    paired |= o.kind == OptKind::PairDot;
    split |= o.kind != OptKind::ExpandSum && o.kind != OptKind::PairDot;
    tiled |= is_tile(o.kind);
  }
  if (width < 2 || tiled || (!is_fresh(k) && !split && !paired)) return out;
  // Operands the schedule laid out in pairs are summed in pairs first, as the heuristic does.
  if (!split && !paired)
    if (const UOpPtr pair = pair_dot_candidate(k, s.target()))
      return {{{OptKind::PairDot, axis_of(pair), 2}}};
  // A copy whose last iteration of a loop alone clamps its reads: that iteration peeled.
  if (!split)
    if (const auto peel = clamp_peel(k)) add(fitting(s, {*peel}));
  if (!split) {
    // The tiles, their sizes within the registers and a UOp's lanes as register_tile's and dot_tile's.
    const bool one_end = k->src.size() == 1;
    const auto mm = matmul_axes(k);
    if (mm) {
      const int64_t m = trip_bound(mm->rows), n = trip_bound(mm->cols), lanes = std::min<int64_t>(width, n);
      for (int64_t r = 1; r <= std::min<int64_t>(m, 8); ++r)
        for (int64_t v = 1; v <= std::min<int64_t>(4, (n + lanes - 1) / lanes); ++v)
          if (r * v + (r > 1 ? v : 1) + 1 + v <= registers && r * v * lanes <= kMaxVectorLanes)
            add(fitting(s, {{OptKind::MatmulTile, axis_of(mm->cols), v, r}}));
      if (const auto dot = one_end ? dot_axes(k, width) : std::nullopt) {
        const int64_t dm = trip_bound(dot->rows), dn = *trip(dot->cols);
        for (int64_t l = width; l >= std::max<int64_t>(4, width / 4); l /= 2)
          for (int64_t r = 1; r <= std::min<int64_t>(dm, 8); ++r)
            if (r * dn + dn + 1 <= registers && r * dn * l <= kMaxVectorLanes)
              add(fitting(s, {{OptKind::DotTile, axis_of(dot->cols), l, r}}));
      }
    } else if (one_end) {
      const auto gemv = gemv_axes(k);
      const auto column_sum = gemv ? std::nullopt : column_sum_axes(k, s.target());
      const auto& row = gemv ? gemv : column_sum;
      if (row)
        for (int64_t v = 1; v <= 16 && v * width <= kMaxVectorLanes && v + 2 <= registers; v *= 2)
          add(fitting(s, {{gemv ? OptKind::GemvTile : OptKind::ColumnSumTile, axis_of(row->cols), v}}));
    }
  }
  // A copy already in lanes: its inner sweep in blocks where the heuristic would block it.
  if (split)
    if (const auto blocks = line_blocks(k, s.target())) add(fitting(s, {*blocks}));
  // Lanes, as upcast() gives them, on any range the heuristic could choose (lane_candidate's
  // rules without its score), with 1, 2 or 4 accumulators when the kernel reduces.
  const bool reduces = has_reduce(k);
  std::unordered_set<const UOp*> taken = beside_lanes(k);
  taken.merge(running_max_ranges(k));
  for (const auto& r : ranges_of(k)) {
    const AxisKind kd = kind(r);
    if ((kd != AxisKind::Loop && kd != AxisKind::Reduce) || trip_bound(r) < 2) continue;
    if (taken.contains(r.get()) || scatters_along(k, r)) continue;
    if (kd == AxisKind::Loop && trip(r) && *trip(r) <= width) {
      add(fitting(s, {{OptKind::Upcast, axis_of(r), 0}}));
      continue;
    }
    for (int64_t unroll : {1, 2, 4})
      if (unroll == 1 || (reduces && unroll * width <= kMaxVectorLanes)) add(lanes_move(s, r, width, unroll));
  }
  return out;
}

std::vector<Opt> heuristic_opts(const UOpPtr& kernel, const Target& target) {
  OptState s(kernel, target);
  apply_heuristic(s);
  return s.applied();
}

UOpPtr optimize_kernel(const UOpPtr& kernel, const OptimizerOptions& options, std::vector<Opt>* applied) {
  if (!options.enabled) return kernel;
  OptState s(kernel, options.target);
  if (options.opts)
    for (const Opt& opt : *options.opts) s.apply(opt);
  else
    apply_heuristic(s);
  s.settle();
  if (applied) *applied = s.applied();
  return s.kernel();
}

}  // namespace loom
