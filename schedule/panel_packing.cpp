#include "schedule/panel_packing.hpp"

#include "ir/buffer_access.hpp"
#include "ir/contraction.hpp"
#include "ir/range_split.hpp"
#include "ir/widening.hpp"
#include "schedule/stage.hpp"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <optional>
#include <vector>

namespace loom {

namespace {

// Output rows that must share b before its copy pays: the copy reads b and
// writes it once (about two reads of b), a tile reads b once per tile_max_rows rows,
// so bit_ceil(5 x tile_max_rows) rows (32 with 6-row tiles) read it 5 times at least.
int64_t min_rows(const Target& t) {
  return static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(5 * t.tile_max_rows())));
}
// Panels of b a's rows meet at least, before a's copy into row panels pays: the copy
// reads and writes a once, and the tiles read a once per panel.
constexpr int64_t kMinPanels = 4;
// The ways of each L1 set that a tile's rows of a may take: the kc x W slice of a
// b panel the tile reads (kc = panel_depth) takes kc x W / (sets x line) lines of
// every set, the rest is a's. a is packed when more of a tile's rows than that fall
// in one set (docs/performance.md, "Target": 4 of 12 on AVX-512 with 48 KiB; at a
// row stride of 2 KiB, k = 512, 3 rows do, and the copy cost more than it saved; at
// 4 KiB all 6 do).
int64_t free_ways(const Target& t, int64_t panel_bytes, int64_t panel_depth) {
  return t.l1d_ways - panel_depth * panel_bytes / (t.l1d_sets() * t.line_bytes);
}

bool uses(const UOpPtr& u, const UOpPtr& range) { return u->ranges().contains(range); }

// Does factor `side` of `c` have its output sizes in numbers, as a copy of it (whose shape
// they are) needs?
bool numeric_sizes(const Contraction& c, int side) {
  return std::all_of(c.outs.begin(), c.outs.end(),
                     [&](const UOpPtr& r) { return !c.uses(side, r) || trip(r); });
}

// b's side of the product (factor b of `c`): uses the column j, which a does not, and
// every read of b is at a constant stride along j (a transposed b, q k^T, too), and b
// sums nothing of its own and has sizes in numbers; a uses a row b does not (the innermost
// such row is returned; a symbolic one, a batch of B rows, is planned for its upper bound).
UOpPtr b_side(const Contraction& c, int a, int b) {
  const UOpPtr& j = c.outs.back();
  if (!c.uses(b, j) || c.uses(a, j) || c.nested[static_cast<size_t>(b)] || !c.strided(b, j) ||
      !numeric_sizes(c, b))
    return nullptr;
  const std::vector<UOpPtr> rows = c.only(a);
  return rows.empty() ? nullptr : rows.back();
}

// A copy's layout: the ranges of the copy (its shape), where the product reads
// it, and each range of the side copied in terms of the copy's ranges.
struct PanelLayout {
  std::vector<std::pair<UOpPtr, UOpPtr>> to_panel;
  std::vector<UOpPtr> ranges, read_at;
  Shape shape;
  UOpPtr valid;  // where the copy holds the side (null: everywhere); 0 elsewhere

  void axis(const UOpPtr& fresh, const UOpPtr& read) {
    ranges.push_back(fresh), read_at.push_back(read), shape.push_back(*trip(fresh));
  }
  // A range of the side kept whole: a fresh range of the copy, read where it was.
  void keep(const UOpPtr& range, int64_t& next_id) {
    to_panel.emplace_back(range, make_range(*trip(range), next_id++));
    axis(to_panel.back().second, range);
  }
  // The sum's range k in pairs: the copy's q (k / 2) here, its pair p innermost (pair()).
  UOpPtr pair_outer(const UOpPtr& k, int64_t& next_id) {
    const UOpPtr q = make_range(*trip(k) / 2, next_id++);
    axis(q, k / 2);
    return q;
  }
  // Each pair's later k first (p = 1 - k % 2): the order vdpbf16ps adds a pair in, odd lane
  // first, so the sum keeps the order of k (codegen/pair_dot.hpp).
  void pair(const UOpPtr& k, const UOpPtr& q, int64_t& next_id) {
    const UOpPtr p = make_range(2, next_id++);
    axis(p, const_int(DType::Int64, 1) - k % 2);
    to_panel.emplace_back(k, q * 2 + (const_int(DType::Int64, 1) - p));
  }
};

// The sum's ranges of a copy: kept whole, or with `pairs` the innermost split in pairs (a
// weight gradient over a batch and a sequence pairs the sequence's steps).
struct SumAxes {
  const UOpPtr& red;
  bool pairs;
  UOpPtr q;
  void outer(PanelLayout& l, int64_t& next_id) {
    const size_t kept = pairs ? red->src.size() - 1 : red->src.size();
    for (size_t d = 1; d < kept; ++d) l.keep(red->src[d], next_id);
    if (pairs) q = l.pair_outer(red->src.back(), next_id);
  }
  void inner(PanelLayout& l, int64_t& next_id) const {
    if (pairs) l.pair(red->src.back(), q, next_id);
  }
};

// The side read from its copy: LOAD(INDEX(BUFFERIZE(side in the copy's ranges), read_at)).
UOpPtr copy_load(const UOpPtr& side, const PanelLayout& l) {
  const UOpPtr value = where_valid(l.valid, substitute_ranges(side, l.to_panel, l.valid));
  std::vector<UOpPtr> src{UOp::make(Op::CONTIGUOUS, side->dtype, {value})};
  src.insert(src.end(), l.ranges.begin(), l.ranges.end());
  const UOpPtr panel = UOp::make(Op::BUFFERIZE, side->dtype, std::move(src), l.shape);
  return UOp::make(Op::LOAD, side->dtype, {make_index(panel, l.read_at, nullptr)});
}

// b in column panels P[batch..., j / W, k..., j % W], read at `read_j` (j, or j padded to
// whole panels); the last panel's columns past n hold zeros. With `pairs`,
// P[batch..., j / W, k / 2, j % W, 1 - k % 2].
UOpPtr b_panels(const UOpPtr& b, const UOpPtr& red, const std::vector<UOpPtr>& outs, int64_t width,
                const UOpPtr& read_j, bool pairs, int64_t& next_id) {
  const UOpPtr& j = outs.back();
  const int64_t n = *trip(j);
  PanelLayout l;
  for (size_t d = 0; d + 1 < outs.size(); ++d)
    if (uses(b, outs[d])) l.keep(outs[d], next_id);
  const UOpPtr jb = make_range((n + width - 1) / width, next_id++);
  l.axis(jb, read_j / width);
  SumAxes sum{red, pairs, nullptr};
  sum.outer(l, next_id);
  const UOpPtr jl = make_range(width, next_id++);
  l.axis(jl, read_j % width);
  sum.inner(l, next_id);
  l.to_panel.emplace_back(j, jb * width + jl);
  if (n % width != 0) l.valid = jb * width + jl < n;
  return copy_load(b, l);
}

// a in row panels P[batch..., i / R, k..., i % R]: each step of k of a tile of R rows
// reads R contiguous floats instead of R rows a row's length apart (at n = 1024, 4 KiB:
// the R rows share one set of L1 with the panel of b, and a block of a's rows fills a
// quarter of L2's sets). The last panel repeats a's last row where rows run out.
UOpPtr a_panels(const UOpPtr& a, const UOpPtr& i, const UOpPtr& red, const std::vector<UOpPtr>& outs,
                int64_t rows, bool pairs, int64_t& next_id) {
  const int64_t m = *trip(i);
  PanelLayout l;
  if (rows == 1) {  // a as it is read, row-major: its value computed once
    for (const auto& r : outs)
      if (uses(a, r)) l.keep(r, next_id);
    for (size_t d = 1; d < red->src.size(); ++d) l.keep(red->src[d], next_id);
    return copy_load(a, l);
  }
  for (const auto& r : outs)
    if (r != i && uses(a, r)) l.keep(r, next_id);
  const UOpPtr io = make_range((m + rows - 1) / rows, next_id++);
  l.axis(io, i / rows);
  SumAxes sum{red, pairs, nullptr};
  sum.outer(l, next_id);
  const UOpPtr ii = make_range(rows, next_id++);
  l.axis(ii, i % rows);
  sum.inner(l, next_id);
  const UOpPtr row = io * rows + ii;
  l.to_panel.emplace_back(i, m % rows == 0 ? row : where(row < m, row, const_int(DType::Int64, m - 1)));
  return copy_load(a, l);
}

// A copy of b holds its k x n elements per batch it uses. When that is more than kMaxCopyGrowth
// times the elements of the buffers b reads, b reads each of them many times: a convolution's
// windows (every x element in kh*kw of them), whose copy would be a buffer of im2col's shape,
// written and read again at more cost than the contiguous reads save. Such a b is read in
// place. Unknown sources (a DEFINE_GLOBAL) do not bound the copy.
constexpr int64_t kMaxCopyGrowth = 2;
bool copy_outgrows_source(const Contraction& c, int b_src, int64_t columns) {
  int64_t copy = columns, source = 0;
  for (size_t d = 0; d + 1 < c.outs.size(); ++d)
    if (c.uses(b_src, c.outs[d])) copy *= *trip(c.outs[d]);
  copy *= *c.sum_length();
  std::vector<const UOp*> seen;
  for (const auto& read : c.loads[static_cast<size_t>(b_src)]) {
    const UOpPtr& buffer = read.access->src[0];
    if (std::find(seen.begin(), seen.end(), buffer.get()) != seen.end()) continue;
    seen.push_back(buffer.get());
    if (buffer->op == Op::BUFFER)
      source += buffer->get<std::vector<int64_t>>().at(1);
    else if (buffer->op == Op::BUFFERIZE) {
      source += element_count(buffer->get<Shape>());
    } else
      return false;
  }
  return source > 0 && copy > kMaxCopyGrowth * source;
}

// Rows of the product that read all of b: the output ranges a uses and b does not.
int64_t all_rows(const Contraction& c, int a) {
  int64_t rows = 1;
  for (const auto& r : c.only(a)) rows *= trip_bound(r);
  return rows;
}

// Do more of a tile's `rows` rows of a than `free` fall in one set of L1 (their row
// stride a multiple of sets x line at most, as at k = 1024: all in one set)?
bool rows_crowd_l1_set(const std::vector<ContractionRead>& a, const UOpPtr& i, int64_t rows, int64_t itemsize,
                       const Target& t, int64_t free) {
  const int64_t line = t.line_bytes, sets = t.l1d_sets();
  for (const auto& read : a) {
    const auto stride = Contraction::stride(read, i);
    if (!stride) return false;
    // Rows a line or less apart (a max or a sum per row) share lines, not just sets.
    if (std::abs(*stride) * itemsize < line) continue;
    std::vector<int64_t> in_set(static_cast<size_t>(sets), 0);
    for (int64_t r = 0; r < rows; ++r)
      if (++in_set[static_cast<size_t>(std::abs(*stride) * itemsize * r / line % sets)] > free) return true;
  }
  return false;
}

// Columns that do not fill the panels are padded to whole ones (the last panel's
// copy holds zeros past n, and the product runs over the padded columns, its
// stores and other reads guarded by j < n) when at least one panel is whole: a
// tail alone would be padded to more than twice its width, while the tile of a
// wider product covers whole panels anyway (masked where unpacked).
bool packs_columns(int64_t n, int64_t width) { return n % width == 0 || n > width; }

// The product `buf` with its value `value` (reading the panels at `jp`) stored over
// `jp`, its columns j padded to whole panels: every other access at j guarded by
// jp < n, and the store too (BUFFERIZE's valid, docs/ir.md).
UOpPtr padded_columns(const UOpPtr& buf, const UOpPtr& value, const UOpPtr& jp) {
  const UOpPtr& j = buf->src.back();
  const UOpPtr inside = jp < *trip(j);
  std::vector<UOpPtr> src = buf->src;
  src[0] = substitute_ranges(value, {{j, jp}}, inside);
  src.back() = jp;
  src.push_back(inside);
  return buf->with_src(std::move(src));
}

// Both factors bfloat16 values widened, the innermost summed range of even length, a in row
// panels (a tile of rows): the sum runs in pairs on the Target's pair-dot instruction. A
// costly a (a gradient through an activation) is computed once by its pair copy.
bool pairs_fit(const Contraction& c, const StageContext& ctx, int a_src) {
  const auto k = c.reduce->src.size() > 1 ? trip(c.reduce->src.back()) : std::nullopt;
  return ctx.target.pair_dot() && ctx.panel_rows > 1 && k && *k % 2 == 0 && is_widened_bf16(c.factor[0]) &&
         is_widened_bf16(c.factor[1]) && !c.nested[static_cast<size_t>(a_src)];
}

// Columns of a panel: the tile's usual width (StageContext::panel_bytes), or all n columns
// when they are whole vectors that one tile of the most rows holds (Target::
// tile_wide_col_vectors), so the tile reads a once (attention's P @ V at d = 64).
int64_t panel_width(int64_t n, int64_t itemsize, const StageContext& ctx) {
  const int64_t usual = ctx.panel_bytes / itemsize, lanes = ctx.target.vector_bytes / itemsize;
  return n > usual && ctx.target.one_tile_wide(n, lanes) ? n : usual;
}

// b read as one panel already: one panel wide, every read contiguous along the columns j and
// W apart along the innermost summed range k, its value the load itself. A copy would repeat it.
bool reads_as_panel(const Contraction& c, int b, const UOpPtr& j, const UOpPtr& k, int64_t width) {
  const auto& reads = c.loads[static_cast<size_t>(b)];
  return c.ops[static_cast<size_t>(b)] == 0 && !reads.empty() &&
         std::all_of(reads.begin(), reads.end(), [&](const ContractionRead& read) {
           return Contraction::stride(read, j) == 1 && Contraction::stride(read, k) == width;
         });
}

UOpPtr pack(const Match& m) {
  const UOpPtr& buf = m.root();
  const StageContext& ctx = m.ctx<StageContext>();
  const std::vector<UOpPtr> outs(buf->src.begin() + 1, buf->src.end());
  const bool guarded = outs.size() > buf->get<Shape>().size();  // padded already
  if (ctx.panel_bytes <= 0 || outs.empty() || guarded || !trip(outs.back())) return nullptr;
  const auto c = contraction(buf->src[0], outs);
  if (!c || !c->product()) return nullptr;
  const UOpPtr& red = c->reduce;
  const auto sum_length = c->sum_length();
  if (!sum_length) return nullptr;
  const int64_t k = *sum_length;
  const int64_t itemsize = red->dtype.itemsize(), n = *trip(outs.back());
  const int64_t width = panel_width(n, itemsize, ctx);
  // b within two thirds of the L1 data cache (the rest holds a's rows and the output)
  // stays there whatever its row stride: nothing to gain, unless it is not contiguous
  // along the columns (a Linear(9, 32)'s weight [32, 9] read w[j, k]): no tile reads it
  // then, and its copy is as small as it is.
  if (width < 2 || !packs_columns(n, width)) return nullptr;
  const bool in_l1 = k * n * itemsize < ctx.target.l1d_bytes * 2 / 3;
  const int64_t panels = (n + width - 1) / width;
  for (const int b_src : {1, 0}) {
    const int a_src = 1 - b_src;
    const UOpPtr &a = c->factor[static_cast<size_t>(a_src)], &b = c->factor[static_cast<size_t>(b_src)];
    const bool reduced =
        std::all_of(c->k.begin(), c->k.end(), [&](const UOpPtr& r) { return c->uses(b_src, r); });
    const UOpPtr i = reduced ? b_side(*c, a_src, b_src) : nullptr;
    if (!i || copy_outgrows_source(*c, b_src, panels * width)) continue;
    if (in_l1 && (c->contiguous(b_src, outs.back()) || all_rows(*c, a_src) < min_rows(ctx.target))) continue;
    if (!in_l1 && trip_bound(i) < min_rows(ctx.target)) continue;
    const UOpPtr& j = outs.back();
    // Products of bfloat16s on a Target with vdpbf16ps: both factors copied as bfloat16 pairs
    // (a in row panels always), which the tile reads one vector a step.
    const bool a_numeric = numeric_sizes(*c, a_src);  // a's copies: row panels, pairs
    const bool pairs = a_numeric && pairs_fit(*c, ctx, a_src);
    if (!pairs && width == n && reads_as_panel(*c, b_src, j, red->src.back(), width)) return nullptr;
    int64_t& next_id = m.ctx<StageContext>().next_axis;  // graph-wide: see schedule/stages.cpp
    const UOpPtr jp = n % width == 0 ? j : make_range(panels * width, next_id++, j->get<AxisArg>().kind);
    std::vector<UOpPtr> product = red->src[0]->src;
    const auto packed = [&](const UOpPtr& side, auto&& copy) {
      return pairs ? UOp::make(Op::CAST, side->dtype, {copy(side->src[0])}) : copy(side);
    };
    product[static_cast<size_t>(b_src)] =
        packed(b, [&](const UOpPtr& x) { return b_panels(x, red, outs, width, jp, pairs, next_id); });
    // A costly a (attention's softmax, exp(s - max) / sum per element) is computed once,
    // by its copy, so the product gets the many-row tile; without row panels it keeps the
    // one wide tile of codegen/register_tile.cpp and b is not packed either.
    // Its copy is row-major (contiguous vector stores; row panels only where its rows
    // would crowd one set of L1).
    const bool costly = c->ops[static_cast<size_t>(a_src)] > kCheapFactorOps;
    const bool rows_ok = ctx.panel_rows > 1 && !c->nested[static_cast<size_t>(a_src)] && a_numeric;
    if (costly && !rows_ok) continue;
    const bool crowded =
        rows_ok && rows_crowd_l1_set(c->loads[static_cast<size_t>(a_src)], i, ctx.panel_rows, itemsize,
                                     ctx.target, free_ways(ctx.target, width * itemsize, ctx.panel_depth));
    if (pairs)
      product[static_cast<size_t>(a_src)] = packed(
          a, [&](const UOpPtr& x) { return a_panels(x, i, red, outs, ctx.panel_rows, true, next_id); });
    else if (rows_ok && ((costly && !crowded) || (crowded && (costly || panels >= kMinPanels))))
      product[static_cast<size_t>(a_src)] =
          a_panels(a, i, red, outs, crowded ? ctx.panel_rows : 1, false, next_id);
    std::vector<UOpPtr> reduce = red->src;
    reduce[0] = red->src[0]->with_src(std::move(product));
    const UOpPtr value = substitute(buf->src[0], {{red, red->with_src(std::move(reduce))}});
    if (jp != j) return padded_columns(buf, value, jp);
    std::vector<UOpPtr> src = buf->src;
    src[0] = value;
    return buf->with_src(std::move(src));
  }
  return nullptr;
}

}  // namespace

const PatternMatcher& panel_packing() {
  static const PatternMatcher pm("panel_packing", {{UPat::ops({Op::BUFFERIZE}).allow_more_src(), pack}});
  return pm;
}

}  // namespace loom
