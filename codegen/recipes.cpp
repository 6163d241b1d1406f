// The optimiser's recipes (codegen/recipes.hpp): register tiles over a contraction
// and the alignment of a kernel's side ENDs, each one Opt (ir/opt.hpp) made of
// kernel edits (codegen/kernel_edit.hpp). docs/performance.md explains the choices.
#include "codegen/recipes.hpp"

#include "codegen/codegen.hpp"
#include "ir/contraction.hpp"
#include "ir/pattern.hpp"
#include "ir/range_split.hpp"
#include "ir/symbolic.hpp"

#include <algorithm>
#include <functional>
#include <unordered_set>

namespace loom {

int64_t matmul_panel_depth(const Flags& flags) { return matmul_panel_bytes(flags) > 0 ? kopt::kBlock : 0; }

namespace kopt {

// ---- several outputs -----------------------------------------------------------------
// A kernel of several outputs (docs/kernel-ir.md) is tiled by its first END, the main
// one; the others ride along (codegen/register_tile.hpp): every split or padding of a
// range substitutes it in the whole kernel, so they follow the main END's ranges.

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

// The tiles of `tiles` in blocks of `block`, the loop over blocks first, then
// `blocks_of_k` (if any), the other loops, and the tiles within a block last:
// each block of a's rows meets every panel of b before the next block starts
// (register_tile.hpp's row_block); each block of k rows of a GEMV's b meets
// every column tile of a chunk.
// The first other loop (a batch, attention's heads; b's panels where there is no batch)
// goes first instead when the count of blocks divides it, for the threads: its members'
// work is equal where the blocks' need not be (a causal product skips the tiles above
// the diagonal, so its first block of rows has a third of the second's work), and each
// member still meets b's panels a block of rows at a time.
UOpPtr block_tiles(UOpPtr k, const UOpPtr& tiles, int64_t block, const UOpPtr& blocks_of_k) {
  const Split s = split(k, tiles, block, AxisKind::Loop);
  const UOpPtr& end = s.root->src.at(0);
  std::vector<UOpPtr> loops{s.outer}, lanes;
  if (blocks_of_k) loops.push_back(blocks_of_k);
  for (size_t i = 1; i < end->src.size(); ++i)
    if (end->src[i] != s.outer && end->src[i] != s.inner && end->src[i] != blocks_of_k)
      (kind(end->src[i]) == AxisKind::Loop ? loops : lanes).push_back(end->src[i]);
  const size_t batch = blocks_of_k ? 2 : 1;
  const std::optional<int64_t> blocks = trip(s.outer),
                               members = batch < loops.size() ? trip(loops[batch]) : std::nullopt;
  if (blocks && *blocks > 1 && members && *members % *blocks == 0)
    std::rotate(loops.begin(), loops.begin() + static_cast<std::ptrdiff_t>(batch),
                loops.begin() + static_cast<std::ptrdiff_t>(batch) + 1);
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
// (an in-place update) or stores another dtype than it sums. A symbolic k (a decoding
// step's T) is padded to whole blocks first, the last block's rows past it reading the
// last real row again and adding nothing: kc is then no divisor but the block the
// caller wants.
// A sum over several ranges (a weight gradient's n, oh, ow) keeps its other ranges in the
// block's REDUCE; a block of one step (kc 1) makes the range itself the loop over blocks.
std::optional<KBlocks> k_blocks(UOpPtr k, UOpPtr reduce_range, int64_t kc) {
  const UOpPtr& store = k->src.at(0)->src.at(0);
  const UOpPtr red = reduce_of(k, reduce_range);
  if (!red || !is_float_sum(red) || store->src.at(1)->dtype != red->dtype ||
      loads_output(k, store->src[0]->src.at(0)))
    return std::nullopt;
  if (kc <= 0 || kc >= trip_bound(reduce_range) || (kc == 1 && red->src.size() == 2)) return std::nullopt;
  if (!trip(reduce_range)) {
    const int64_t id = reduce_range->get<AxisArg>().id;
    k = pad_sum_clamped(k, reduce_range, kc);
    reduce_range = find_range(k, id);
  }
  const std::optional<UOpPtr> count = exact_quotient(reduce_range->src.at(0), kc);
  if (!count) return std::nullopt;
  const UOpPtr last = last_of(*count);
  const Split s = kc == 1 ? Split{k, reduce_range, nullptr} : split(k, reduce_range, kc, AxisKind::Reduce);
  const UOpPtr blocks = with_kind(s.outer, AxisKind::Loop);
  const UOpPtr &end2 = s.root->src[0], &store2 = end2->src[0], &index = store2->src[0];
  const UOpPtr red2 = reduce_of(s.root, s.outer);
  std::vector<UOpPtr> summed{substitute(red2->src[0], {{s.outer, blocks}})};
  for (size_t i = 1; i < red2->src.size(); ++i)
    if (red2->src[i] != s.outer) summed.push_back(red2->src[i]);
  const UOpPtr partial = UOp::make(Op::REDUCE, red2->dtype, std::move(summed), red2->arg);
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
  const UOpPtr stored = done == sum ? sum : where(blocks < last, sum, done);
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

// The register tile of codegen/register_tile.hpp: columns -> (outer * vectors +
// unrolled) * lanes + lane, rows -> outer * rows + unrolled, the column blocks
// the outer loop (each thread keeps its block of b's columns in cache while
// the rows of a stream past). When b comes in panels (schedule/panel_packing.hpp),
// blocks of rows and of k instead.
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

UOpPtr tile_matmul(UOpPtr k, const MatmulAxes& mm, const RegisterTile& tile, const Target& target,
                   int64_t itemsize) {
  // A symbolic k (a sum as long as a bound variable: attention's scores @ v) is one block:
  // the tile's loop over it runs as it is, each binding its own length, nothing masked.
  // The sum's blocks count terms: a pair range's steps add two each (codegen/pair_dot.hpp), so a
  // sum in pairs has the blocks of the same sum one term a step, and the same result.
  const std::optional<int64_t> k_trip = trip(mm.reduce);
  const int64_t terms = mm.terms_per_step();
  const bool whole_k = !k_trip || (stores_by_lane(k, mm.cols) && *k_trip * terms <= masked_whole_k(target));
  auto [split_cols, cols_outer] = split_lanes(k, mm.cols, {tile.lanes, tile.vectors});
  const UOpPtr cols = find_range(split_cols, cols_outer);
  const bool panels = !mm.panels.empty() && (!cols || trip(cols) == 1);
  // The rows one tile high already: the schedule split them into a's row panels (m a
  // multiple of their height, i = io * R + ii), so io is the loop over row tiles.
  const bool tile_high = panels && mm.row_panels && tile.rows > 1 && trip(mm.rows) == tile.rows;
  const UOpPtr& tiled = tile_high ? mm.row_panels : mm.rows;
  const int64_t tiles = tile_high ? trip_bound(tiled) : (trip_bound(tiled) + tile.rows - 1) / tile.rows;
  // The k a tile sums at a time, which a's row blocks are sized for: a k with no divisor
  // in [kBlock / 2, kBlock] (a prime 1021) is one block, and a's rows span all of it.
  const int64_t k_len = trip_bound(mm.reduce), divisor = whole_k ? 0 : divisor_near(k_len, kBlock / terms);
  const int64_t kc = panels ? (divisor ? divisor : k_len) : 0;
  // Symbolic rows are padded to whole row tiles only, not to whole blocks of them: a
  // block sized for the variable's bound would make a binding of 1 compute the bound's
  // block of rows. Their tiles each pass every panel of b (no row blocks).
  const int64_t block = panels && trip(tiled) ? row_block(tiles, tile.rows, kc, itemsize, target) : 1;
  const int64_t tiled_id = tiled->get<AxisArg>().id;
  const UOpPtr padded_end = round_up(tiled->src.at(0), tile_high ? block : block * tile.rows);
  // Padded rows store the last real row again, unless blocks of k read partial sums back.
  const UOpPtr& store = split_cols->src.at(0)->src.at(0);
  const bool repeat_last = !(panels && divisor) && !loads_output(split_cols, store->src.at(0)->src.at(0));
  k = pad_output_range(split_cols, find_range(split_cols, tiled_id), padded_end, repeat_last);
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

// The loop over a dot tile's vectors outermost among its sum's loops when a load's validity
// moves along it (a padded conv's x[ow + kw - 1] at the row's ends, a sum padded to whole
// vectors): each vector's masks, 64-bit compares lane by lane, are then computed once per
// vector of the row, outside the loops over the batch and the rows, not at every step
// (the 3x3 layer's dw in blocks: 480-600 ms with the masks inside, 145-240 outside).
// The sum's ranges no validity uses (a block's images) go innermost, after the ones it
// does (the output row's oh + kh - 1): each row's mask is then made once for the block's
// images, not at every step (the same dw at one thread: 301 to 306 ms -> 245 to 251).
UOpPtr masks_outside(const UOpPtr& k, const UOpPtr& vectors) {
  const UOpPtr red = reduce_of(k, vectors);
  if (!red || red->src.size() < 3) return k;
  bool masked = false;
  for (const auto& n : toposort(red->src[0]))
    masked |= n->op == Op::INDEX && n->src.size() > 2 && reaches(n->src[2], vectors);
  if (!masked) return k;
  std::vector<UOpPtr> src{red->src[0], vectors}, unmasked;
  auto in_validity = [&](const UOpPtr& r) {
    for (const auto& n : toposort(red->src[0]))
      if (n->op == Op::INDEX && n->src.size() > 2 && reaches(n->src[2], r)) return true;
    return false;
  };
  for (size_t i = 1; i < red->src.size(); ++i) {
    const UOpPtr& r = red->src[i];
    if (r == vectors) continue;
    (kind(r) == AxisKind::Reduce && !in_validity(r) ? unmasked : src).push_back(r);
  }
  src.insert(src.end(), unmasked.begin(), unmasked.end());
  return substitute(k, {{red, red->with_src(std::move(src))}});
}

// The kernel's output loops of more than one iteration other than `cols`, outermost first.
std::vector<UOpPtr> output_loops_but(const UOpPtr& k, const UOpPtr& cols) {
  std::vector<UOpPtr> out;
  const UOpPtr& end = k->src.at(0);
  for (size_t i = 1; i < end->src.size(); ++i)
    if (end->src[i] != cols && kind(end->src[i]) == AxisKind::Loop && trip_bound(end->src[i]) > 1)
      out.push_back(end->src[i]);
  return out;
}

// The dot tile: the summed range in vectors (padded to whole ones, masked), a tile of
// rows x every column unrolled, one accumulator vector each, whose lanes are folded once
// after the sum. Rows padded to whole tiles repeat the last row; the loop over row tiles
// first, for the threads (in blocks, the groups below).
// A sum longer than the cache holds (a weight gradient's n, oh, ow: a row tile's dy over
// the whole batch is megabytes, read again for every input channel and tap) runs in
// blocks of its outermost range (dot_sum_block), outside the row tiles and the other
// outputs: every output adds each block's partial sum to the one waiting in the output,
// while the block stays in the cache. The row tiles go in groups, one a thread
// (dot_tile_groups), the loop over groups outermost for the threads: each group's tiles
// walk a block together, so b's side of the batch (x) is read from memory once a group,
// not once a tile; a tile of no rows (a depthwise dw) groups its outermost output loop, so
// its blocks too leave a loop to the threads (docs/performance.md, "The weight gradient's
// dot tile" and "The weight gradient's row tiles in groups").
UOpPtr tile_dot(UOpPtr k, const MatmulAxes& mm, const RegisterTile& tile, const Target& target,
                int64_t itemsize) {
  const int64_t reduce_id = mm.reduce->get<AxisArg>().id;
  // The rows the groups split: the tile's, or in a tile of no rows (a depthwise dw, each
  // channel its own), the outermost other output loop, one row a tile.
  UOpPtr rows = mm.rows;
  if (const auto others = output_loops_but(k, mm.cols); !rows && !others.empty()) rows = others.front();
  const int64_t rows_id = rows ? rows->get<AxisArg>().id : -1, tile_rows = mm.rows ? tile.rows : 1;
  int64_t blocked_id = -1, kc = 0, groups = 1, group_tiles = 1;
  if (const UOpPtr red = reduce_of(k, mm.reduce); red && red->src.size() > 2 && red->src[1] != mm.reduce) {
    int64_t inner = 1;  // terms of the sum a step of its outermost range
    for (size_t i = 2; i < red->src.size(); ++i) inner *= trip_bound(red->src[i]);
    if (const auto outer = trip(red->src[1]))
      if ((kc = dot_sum_block(tile.rows, *outer, inner, itemsize, target)) > 0) {
        blocked_id = red->src[1]->get<AxisArg>().id;
        const auto m = rows ? trip(rows) : std::nullopt;
        if (m) {
          const int64_t tiles = (*m + tile_rows - 1) / tile_rows;
          groups = dot_tile_groups(tiles, target), group_tiles = (tiles + groups - 1) / groups;
          // The block holds what a group's rows read of a (rows of a tile that has them).
          if (mm.rows)
            kc =
                std::max<int64_t>(1, dot_sum_block(tile.rows * group_tiles, *outer, inner, itemsize, target));
        }
      }
  }
  k = pad_to_multiple(k, mm.reduce, tile.lanes);
  const Split lanes = split(k, find_range(k, reduce_id), tile.lanes, AxisKind::Upcast);
  // In blocks the sum's data stays in the cache whatever order walks it; a sum walking
  // memory keeps its row contiguous (a depthwise dw's masks outside: 4.5-9 -> 10-12 ms).
  k = blocked_id >= 0 ? masks_outside(lanes.root, lanes.outer) : lanes.root;
  const UOpPtr cols = find_range(k, mm.cols->get<AxisArg>().id);
  k = substitute(k, {{cols, with_kind(cols, AxisKind::Unroll)}});
  const UOpPtr& store = k->src.at(0)->src.at(0);
  // Blocks read the partial sums back: a padded row repeating the last would add its block twice.
  const bool repeat_last = blocked_id < 0 && !loads_output(k, store->src.at(0)->src.at(0));
  if (mm.rows || groups > 1)
    k = pad_output_range(k, find_range(k, rows_id),
                         round_up(rows->src.at(0), tile_rows * groups * group_tiles), repeat_last);
  std::optional<KBlocks> kb;
  if (blocked_id >= 0 && (kb = k_blocks(k, find_range(k, blocked_id), kc))) k = kb->root;
  UOpPtr unrolled, row_tiles = mm.rows || groups > 1 ? find_range(k, rows_id) : nullptr;
  if (row_tiles && tile.rows > 1) {
    const Split s = split(k, row_tiles, tile.rows, AxisKind::Unroll);
    k = s.root, row_tiles = s.outer, unrolled = s.inner;
  }
  // Outermost first: the groups (for the threads, or none on one core), the blocks of the sum,
  // each group's tiles. Rows of symbolic count (one tile) keep their row tiles outside the blocks.
  const bool blocks_outside_tiles = kb && (groups > 1 || target.min_blocks() == 1);
  UOpPtr group = nullptr;
  if (blocks_outside_tiles && row_tiles && groups > 1) {
    const Split s = split(k, row_tiles, group_tiles, AxisKind::Loop);
    k = s.root, group = s.outer, row_tiles = s.inner;
  }
  const UOpPtr blocks = kb ? kb->blocks : nullptr;
  const std::vector<UOpPtr> inner_to_outer = blocks_outside_tiles
                                                 ? std::vector<UOpPtr>{row_tiles, blocks, group}
                                                 : std::vector<UOpPtr>{blocks, row_tiles};
  for (const UOpPtr& loop : inner_to_outer)
    if (loop) k = loop_first(k, find_range(k, loop->get<AxisArg>().id));
  k = drop_unit_loops(k);
  return unrolled ? rows_before_lanes(k, find_range(k, unrolled->get<AxisArg>().id)) : k;
}

// ---- GEMV --------------------------------------------------------------------------
// [1, K] @ [K, N] reads all of b once for 2 FLOP per element: it runs at memory
// speed when b streams row after row. The columns go in one-row tiles of one cache
// line (line_vectors), in chunks of up to the Target's gemv_chunk columns that the
// threads share, and k in blocks of about gemv_rows rows (k_blocks) outside the
// tiles of a chunk: each block reads its rows of b as gemv_rows contiguous
// streams across the chunk, the chunk's partial sums waiting in the output (in
// L1). Without blocks each tile walked all K rows of b at N floats a step, a new
// page every row.
// A chunk is two pages of a row (2048 float32 ran 13% faster than 1024, one page per row
// and block, in CPU time, LOOM_THREADS=1, [1,4096]@[4096,4096], docs/performance.md); the
// rows are the streams of b in flight, and split_reduceop's parts of a GEMV's k are whole
// blocks of them (Target::gemv_rows, gemv_part_rows).
// Columns per chunk when other loops (the parts of k) are what the threads share: a
// whole row of [4096, 4096]'s b, 16 KiB of float32 partial sums: their partial sums
// fill half of L1d; 10% more bytes per CPU-second than 2048 in parts of 64 rows
// (docs/performance.md, GEMV).
int64_t gemv_row_chunk(const Target& t, int64_t itemsize) { return t.l1d_bytes / 2 / itemsize; }

// Vectors of `lanes` elements in one cache line, at least one: a one-row tile that
// wide reads one line of each of its block's rows a step, the gemv_rows streams
// advancing together, as OpenBLAS's sgemv_n does; 8 vectors (4 lines of a row, then
// the next row) read b about 25% slower (docs/performance.md, GEMV).
int64_t line_vectors(int64_t lanes, int64_t itemsize, const Target& t) {
  return std::max<int64_t>(1, t.line_bytes / (lanes * itemsize));
}

// Tiles of `width` columns per chunk: up to `columns` columns, at most `most` tiles,
// a divisor of the `n` tiles.
int64_t gemv_chunk(int64_t n, int64_t width, int64_t most, int64_t columns) {
  int64_t chunk = std::clamp<int64_t>(columns / width, 1, std::max<int64_t>(1, most));
  while (n % chunk != 0) --chunk;
  return chunk;
}

// Tiles per chunk of a GEMV's or column sum's `tiles` columns, by `choose` (a divisor of
// their count); one when the count is symbolic: a chunk of several would be padded whole,
// and its padded tiles computed, at every binding that does not fill it.
int64_t symbolic_chunk(const UOpPtr& tiles, const std::function<int64_t(int64_t)>& choose) {
  return trip(tiles) ? choose(*trip(tiles)) : 1;
}

// A GEMV's or column sum's columns in one-row tiles and its k in blocks of about
// gemv_rows rows; `tiles` is null when either split does not apply.
struct RowTiles {
  UOpPtr split;              // the kernel with its columns in lanes
  std::optional<KBlocks> k;  // its k in blocks
  UOpPtr tiles;              // the loop over tiles of columns
};
RowTiles row_tiles(const UOpPtr& k, const MatmulAxes& mm, const RegisterTile& tile, const Target& target) {
  auto [split_cols, cols_outer] = split_lanes(k, mm.cols, {tile.lanes, tile.vectors});
  const UOpPtr reduce = find_range(split_cols, mm.reduce->get<AxisArg>().id);
  // A symbolic k in blocks of gemv_rows, the last one's rows past k masked.
  auto kb = k_blocks(split_cols, reduce,
                     trip(reduce) ? divisor_near(*trip(reduce), target.gemv_rows()) : target.gemv_rows());
  UOpPtr tiles = kb ? find_range(kb->root, cols_outer) : nullptr;
  return {split_cols, std::move(kb), std::move(tiles)};
}

// The other output loops (a batch, or split_reduceop's parts of k, each a run of whole
// rows of b) go first: they are what the threads share (else the chunks), each streamed
// whole.
UOpPtr tile_gemv(UOpPtr k, const MatmulAxes& mm, const RegisterTile& tile, const Target& target,
                 int64_t itemsize) {
  const auto [split_cols, kb, tiles] = row_tiles(k, mm, tile, target);
  if (!tiles) return drop_unit_loops(split_cols);
  const int64_t width = tile.lanes * tile.vectors;
  const std::vector<UOpPtr> batch = output_loops_but(k, mm.cols);
  // Without other loops the chunks are what the threads share: min_blocks of them at least.
  const int64_t chunk = symbolic_chunk(tiles, [&](int64_t n) {
    return batch.empty() ? gemv_chunk(n, width, n / target.min_blocks(), target.gemv_chunk(itemsize))
                         : gemv_chunk(n, width, n, gemv_row_chunk(target, itemsize));
  });
  k = block_tiles(kb->root, tiles, chunk, kb->blocks);
  for (auto b = batch.rbegin(); b != batch.rend(); ++b)
    if (const UOpPtr r = find_range(k, (*b)->get<AxisArg>().id)) k = loop_first(k, r);
  return drop_unit_loops(k);
}

// ---- column sums ----------------------------------------------------------------------
// [K, N].sum(0) is a GEMV whose a is ones (column_sum_axes): the same one-row tiles in
// chunks of columns, k in blocks of gemv_rows rows outside a chunk's tiles, each block
// gemv_rows contiguous streams, the chunk's partial sums waiting in the output. The
// other output loops (split_reduceop's blocks of rows) go first: they are what the
// threads share (else the chunks), each block of rows streamed whole. Without blocks
// of k, the plain tiles with every long sum blocked.
UOpPtr tile_column_sum(UOpPtr k, const MatmulAxes& cs, const RegisterTile& tile, const Target& target,
                       int64_t itemsize) {
  const auto [split_cols, kb, tiles] = row_tiles(k, cs, tile, target);
  if (!tiles) return block_all_sums(drop_unit_loops(split_cols));
  const int64_t width = tile.lanes * tile.vectors;
  // With no other loop, the chunks are what the threads share.
  const int64_t chunk = symbolic_chunk(tiles, [&](int64_t n) {
    return cs.panels.empty() ? gemv_chunk(n, width, n / target.min_blocks(), target.gemv_chunk(itemsize))
                             : gemv_chunk(n, width, n, gemv_row_chunk(target, itemsize));
  });
  k = block_tiles(kb->root, tiles, chunk, kb->blocks);
  for (auto p = cs.panels.rbegin(); p != cs.panels.rend(); ++p)
    if (const UOpPtr r = find_range(k, (*p)->get<AxisArg>().id)) k = loop_first(k, r);
  return drop_unit_loops(k);
}

}  // namespace kopt
}  // namespace loom
