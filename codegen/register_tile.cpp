// Matmul-like kernels and their register tiles: the optimiser splits the
// output's rows into an unroll range and its columns into unroll x upcast, so
// the reduce loop's body is a tile of independent FMAs with each a value loaded
// once (a broadcast) and each b vector loaded once:
//
//   Before:  END(STORE(out[i*N + j], REDUCE(a[i*K + k] * b[k*N + j], k)), i, j)
//   After:   END(..., i/6, i%6 [unroll], j/16, (j/8)%2 [unroll], j%8 [upcast]) -> 6 x 2 accumulators
#include "codegen/register_tile.hpp"

#include "ir/contraction.hpp"
#include "ir/symbolic.hpp"

#include <algorithm>
#include <bit>
#include <limits>
#include <numeric>

namespace loom {

namespace {

// The tile's shape comes from the Target (ir/target.hpp, docs/performance.md "Derived
// constants"): tile_col_vectors() vectors of b per step of k, so one a broadcast feeds
// every FMA pipe (2: the ratio BLIS's AVX2 kernels use, 6 x 16 floats); at most
// tile_max_rows() rows, half again the fma_chains() in flight that the pipes need, and
// the whole tile (6 x 32 lanes on AVX-512) within 255 lanes, the bound these rules were
// measured under (the expander computes the tile as one vector before lower_reduce splits
// its accumulator into registers; a vector dtype holds DType::kMaxLanes). A tile one wide
// across all of a narrow product's columns may take up to DType::kMaxLanes (6 x 64 lanes).
constexpr int64_t kMaxLanes = 255;
// An output narrower than a vector fills whole vectors (padded, masked) when at most a
// quarter of the lanes would be padding; narrower ones pack rows of n lanes.
constexpr int64_t kNarrowPadNumerator = 3, kNarrowPadDenominator = 4;

// A block of a's rows takes a quarter of the L2, leaving the rest to the b panel
// passing through and the output (half of it measured no better, and fewer, larger
// blocks leave more to a preempted thread: docs/performance.md); the blocks of a long
// k, whose kMinBlockTiles tiles would not fit there, take an eighth of a core
// complex's L3 each instead (each thread its own block). Row blocks at least (when
// there are as many tiles): one per core, the blocks are what the threads share.
// docs/performance.md, "Target".
constexpr int64_t kMinBlockTiles = 8, kBlockStretch = 16;
int64_t l2_block(const Target& t) { return t.l2_bytes / 4; }
int64_t l3_block(const Target& t) { return t.l3_complex_bytes / 8; }

}  // namespace

bool side_ends_ride_along(const UOpPtr& kernel) {
  const UOpPtr& main = kernel->src.at(0);
  for (size_t e = 1; e < kernel->src.size(); ++e) {
    const UOpPtr& side = kernel->src[e];
    if (side->op != Op::END || main->op != Op::END || side->src.size() < 2) return false;
    for (size_t i = 1; i < side->src.size(); ++i)
      if (std::find(main->src.begin() + 1, main->src.end(), side->src[i]) == main->src.end()) return false;
  }
  return true;
}

namespace {

// A kernel of one END over one STORE of one float ADD REDUCE (the contraction, ir/
// contraction.hpp) whose outputs are loops. Their extents, and the sum's, may be
// symbolic (a DEFINE_VAR bound per launch); which of them a tile takes symbolic is
// each tile's own question (product_axes, gemv_axes, column_sum_axes).
std::optional<Contraction> float_sum(const UOpPtr& kernel) {
  if (kernel->op != Op::SINK || kernel->src.empty() || !side_ends_ride_along(kernel)) return std::nullopt;
  const UOpPtr& end = kernel->src[0];
  if (end->op != Op::END || end->src.at(0)->op != Op::STORE) return std::nullopt;
  std::vector<UOpPtr> outs;
  for (size_t i = 1; i < end->src.size(); ++i) {
    const UOpPtr& r = end->src[i];
    if (r->op != Op::RANGE || r->get<AxisArg>().kind != AxisKind::Loop) return std::nullopt;
    outs.push_back(r);
  }
  const UOpPtr& store = end->src[0];
  auto c = contraction(store, std::move(outs), store->src.at(0), /*walk=*/true);
  if (!c) return std::nullopt;
  for (const auto& r : c->k)
    for (size_t e = 1; e < kernel->src.size(); ++e)
      if (reaches(kernel->src[e], r)) return std::nullopt;  // a side END sums over its own ranges
  return c;
}

// The most terms the sum adds per output: the product of its ranges' trip bounds.
int64_t sum_bound(const Contraction& c) {
  int64_t n = 1;
  for (const auto& r : c.k) n *= trip_bound(r);
  return n;
}

// Every read of `reads` steps by `step` elements along `range` or stays put (a broadcast
// along it, one value for all lanes: a per-channel term fused into the factor, as
// BatchNorm's backward adds to dy), and some read steps.
bool along_or_broadcast(const std::vector<ContractionRead>& reads, const UOpPtr& range, int64_t step = 1) {
  bool moves = false;
  for (const auto& read : reads) {
    const auto stride = Contraction::stride(read, range);
    if (stride != step && stride != 0) return false;
    moves |= stride == step;
  }
  return moves;
}

// The sum's pair range (OptKind::PairDot, codegen/pair_dot.hpp), or null: b's lanes are then
// (column, pair), its columns two elements apart.
UOpPtr pair_range(const Contraction& c) {
  for (const auto& r : c.k)
    if (r->get<AxisArg>().kind == AxisKind::Pair) return r;
  return nullptr;
}

// The innermost of the sum's ranges that is a loop (not its pair).
UOpPtr summed_loop(const Contraction& c) {
  for (auto r = c.k.rbegin(); r != c.k.rend(); ++r)
    if ((*r)->get<AxisArg>().kind != AxisKind::Pair) return *r;
  return nullptr;
}

// j for factor b: an output range b uses and a does not, along which every b access is
// contiguous (or broadcast), at least two long (a vector). The output too, or at a
// constant stride when `transposed_store`: a tile stores each output once, after its
// whole sum, so a scattered store (a weight gradient stored [out, in] while dy is
// contiguous along out) costs one scalar store per element, which a long sum makes nothing.
UOpPtr column_axis(const Contraction& c, int b, bool transposed_store = false) {
  const int64_t step = pair_range(c) ? 2 : 1;
  for (const auto& r : c.only(b)) {
    if (trip_bound(r) < 2 || !along_or_broadcast(c.loads[static_cast<size_t>(b)], r, step)) continue;
    if (!c.store || address_stride(c.store, r) == 1) return r;
    if (transposed_store && c.store && address_stride(c.store, r)) return r;
  }
  return nullptr;
}

// Iterations of the sum: a sum this long per stored element makes the element's store nothing
// (one scalar store per 2 x 64 FLOP of the sum at least).
constexpr int64_t kScatterStoreSum = 64;

// The output ranges other than `cols` that factor b uses and a does not.
std::vector<UOpPtr> panel_axes(const Contraction& c, const UOpPtr& cols, int b) {
  std::vector<UOpPtr> panels;
  for (const auto& r : c.only(b))
    if (r != cols) panels.push_back(r);
  return panels;
}

// matmul_axes, or with `one_row` the axes of a sum with no row axis (rows null): i the
// innermost output range a uses and b does not, row_panels the next such range out.
// A matmul's or GEMV's rows, columns, batch and sum may be symbolic: its tile pads the
// rows and the columns and runs the sum's loop as it is. So may b's panels (a convolution
// over a batch of B images reads x along B): they stay loops outside the tile.
std::optional<MatmulAxes> product_axes(const UOpPtr& kernel, bool one_row) {
  const auto c = float_sum(kernel);
  if (!c || !c->product() || c->loads[0].empty() || c->loads[1].empty()) return std::nullopt;
  // Columns the output is stored along first, whichever factor is b; a transposed store only
  // where neither orientation has them.
  const bool may_scatter = !one_row && sum_bound(*c) >= kScatterStoreSum;
  for (const auto& [a, scatter] : {std::pair{0, false}, {1, false}, {0, may_scatter}, {1, may_scatter}}) {
    const int b = 1 - a;
    const std::vector<UOpPtr> rows = c->only(a);
    const UOpPtr cols = column_axis(*c, b, scatter);
    if (!cols || rows.empty() != one_row) continue;
    const std::vector<UOpPtr> panels = panel_axes(*c, cols, b);
    if (!summed_loop(*c)) return std::nullopt;
    return MatmulAxes{rows.empty() ? nullptr : rows.back(),
                      cols,
                      summed_loop(*c),
                      c->ops[static_cast<size_t>(a)],
                      panels,
                      rows.size() > 1 ? rows[rows.size() - 2] : nullptr,
                      !rows.empty() && c->selects(a, rows.back()),
                      pair_range(*c)};
  }
  return std::nullopt;
}

}  // namespace

std::optional<MatmulAxes> matmul_axes(const UOpPtr& kernel) { return product_axes(kernel, false); }
std::optional<MatmulAxes> gemv_axes(const UOpPtr& kernel) { return product_axes(kernel, true); }

std::optional<MatmulAxes> dot_axes(const UOpPtr& kernel, int64_t lanes) {
  // A depthwise conv's dw reads one channel of x and of dy for each output: no rows.
  auto mm = matmul_axes(kernel);
  if (!mm) mm = gemv_axes(kernel);
  // The dot tile unrolls every column: a constant count of them.
  if (!mm || !trip(mm->cols) || *trip(mm->cols) >= lanes || mm->a_ops > kCheapFactorOps) return std::nullopt;
  const auto c = float_sum(kernel);
  if (pair_range(*c)) return std::nullopt;
  for (auto r = c->k.rbegin(); r != c->k.rend(); ++r) {
    if (tile_lanes(lanes, trip_bound(*r)) < lanes) continue;  // a row padded to a vector at most
    if (!along_or_broadcast(c->loads[0], *r) || !along_or_broadcast(c->loads[1], *r)) continue;
    mm->reduce = *r;
    return mm;
  }
  return std::nullopt;
}

// A column sum is the contraction with no a (a sum of loads alone, or of a product whose
// every load is b's): its columns and panels those of all the sum's loads.
std::optional<MatmulAxes> column_sum_axes(const UOpPtr& kernel, const Target& target) {
  auto c = float_sum(kernel);
  if (!c || c->k.size() != 1) return std::nullopt;
  if (c->product()) {  // the product's two factors as one: b
    auto& b = c->loads[1];
    b.insert(b.begin(), c->loads[0].begin(), c->loads[0].end());
    c->loads[0].clear();
  }
  const auto& b = c->loads[1];
  const UOpPtr& k = c->k[0];
  const UOpPtr cols = b.empty() ? nullptr : column_axis(*c, 1);
  if (!cols) return std::nullopt;
  for (const auto& read : b) {
    const auto stride = Contraction::stride(read, k);
    if (!stride || *stride * read.itemsize < target.page_bytes) return std::nullopt;
  }
  return MatmulAxes{nullptr, cols, k, 0, panel_axes(*c, cols, 1), nullptr, false, nullptr};
}

int tile_panel_bytes(const Target& target) {
  return static_cast<int>(target.tile_col_vectors()) * target.vector_bytes;
}
int tile_panel_rows(const Target& target) { return static_cast<int>(target.tile_max_rows()); }

int64_t row_block(int64_t tiles, int64_t rows, int64_t k, int64_t itemsize, const Target& target) {
  const int64_t min_blocks = target.min_blocks();
  const int64_t tile_bytes = std::max<int64_t>(1, rows * k * itemsize);
  int64_t most = l2_block(target) / tile_bytes;
  if (most < kMinBlockTiles) most = l3_block(target) / tile_bytes;
  most = std::clamp<int64_t>(most, 1, (tiles + min_blocks - 1) / min_blocks);
  // A count of blocks the threads share evenly (a multiple of min_blocks: three blocks
  // on two threads left one idle a third of the time at 512), from the fewest the size
  // allows up to twice as many, with the fewest padded tiles. A block may pass its share
  // of the L2 by a sixteenth when that pads fewer tiles (1024 rows: 4 blocks of 43 tiles,
  // 172 computed, where 6 of 29 computed 174).
  const int64_t stretched = std::min(most + most / kBlockStretch, (tiles + min_blocks - 1) / min_blocks);
  const int64_t fewest = (tiles + stretched - 1) / stretched;
  int64_t best = most, padded = std::numeric_limits<int64_t>::max();
  for (int64_t n = (fewest + min_blocks - 1) / min_blocks * min_blocks; n <= 2 * fewest + min_blocks;
       n += min_blocks) {
    const int64_t t = (tiles + n - 1) / n, blocks = (tiles + t - 1) / t;
    if ((blocks % min_blocks == 0 || blocks == 1) && blocks * t < padded) best = t, padded = blocks * t;
  }
  return best;
}

RegisterTile dot_tile(int64_t m, int64_t n, int64_t lanes, const Target& target) {
  const int registers = target.vector_registers;
  auto fits = [&](int64_t r) { return r * n + n + 1 <= registers && r * n * lanes <= kMaxLanes; };
  int64_t rows = std::min(m, target.tile_max_rows());
  while (rows > 0 && !fits(rows)) --rows;
  return {rows, n, lanes};
}

// A quarter of the L2, as a's row blocks of a matmul (l2_block); `rows` are the rows of a
// that walk a block together (a group of row tiles). The 3x3 layer's dw ran best in blocks
// of 1 or 2 images, a little slower in 4 or 8, 3.5 times slower as one block
// (docs/performance.md, "The weight gradient's row tiles in groups").
int64_t dot_sum_block(int64_t rows, int64_t outer, int64_t inner, int64_t itemsize, const Target& target) {
  const int64_t step_bytes = std::max<int64_t>(1, rows * inner * itemsize), most = l2_block(target);
  if (outer < 2 || step_bytes * outer <= most) return 0;
  int64_t kc = std::max<int64_t>(1, most / step_bytes);
  while (outer % kc != 0) --kc;
  return kc;
}

int64_t dot_tile_groups(int64_t row_tiles, const Target& target) {
  return std::clamp<int64_t>(target.min_blocks(), 1, std::max<int64_t>(1, row_tiles));
}

int64_t tile_lanes(int64_t lanes, int64_t n) {
  return n * kNarrowPadDenominator < lanes * kNarrowPadNumerator ? std::min(lanes, n) : lanes;
}

RegisterTile register_tile(int64_t m, int64_t n, int64_t lanes, const Target& target, int64_t a_ops,
                           bool whole_rows) {
  int registers = target.vector_registers;
  const int64_t step_vectors = target.tile_col_vectors(), max_rows = target.tile_max_rows(),
                chains = target.fma_chains();
  const int64_t full_lanes = lanes;
  lanes = tile_lanes(lanes, n);
  // A tile narrower than a vector is one vector of rows x lanes to the expander, which
  // LLVM splits into registers: a split that leaves part of a register costs shuffles
  // at every step of the sum (3 to 7 times the time), so the rows fill one register or
  // whole ones, and as many as make whole registers when that is more than the usual
  // tile's (docs/performance.md, "BEAM search").
  const bool narrow = lanes < full_lanes;
  auto whole_registers = [&](int64_t r) {
    return !narrow || r * lanes <= full_lanes || r * lanes % full_lanes == 0;
  };
  const int64_t most_rows = narrow ? std::max(max_rows, full_lanes / std::gcd(lanes, full_lanes)) : max_rows;
  const int64_t col_vectors = (n + lanes - 1) / lanes;  // vectors the output's columns fill
  const int64_t widest = std::min(col_vectors, kMaxLanes / lanes);
  int64_t vectors = a_ops > kCheapFactorOps ? widest : std::min(step_vectors, col_vectors);
  // rows x vectors accumulators, the b vectors (read once per row unless there is one
  // row, then straight from memory) and one a broadcast fit the registers.
  auto fits_in = [&](int64_t r, int64_t v, int regs) {
    if (n % (lanes * v) != 0) regs -= static_cast<int>(v);  // each masked b vector's mask
    return r * v + (r > 1 ? v : 1) + 1 <= regs && r * v * lanes <= kMaxLanes;
  };
  if (whole_rows && m > 1 && whole_registers(m) && fits_in(m, 1, registers)) {
    // All m rows in one tile, as many vectors as fit; chains enough with m >= chains.
    int64_t v = std::min(vectors, col_vectors);
    while (v > 1 && !fits_in(m, v, registers)) --v;
    return {m, v, lanes};
  }
  // Columns of whole vectors that a tile of the most rows holds at once: one tile wide, so a
  // is read once (attention's P @ V at d = 64: 6 x 4 vectors, not two 6 x 2 tiles).
  if (!narrow && col_vectors > vectors && target.one_tile_wide(n, lanes) &&
      std::min(m, max_rows) * col_vectors * lanes <= DType::kMaxLanes)
    return {std::min(m, max_rows), col_vectors, lanes};
  // Columns that do not fill the tiles are masked: each b vector's mask takes a register.
  if (n % (lanes * vectors) != 0) registers -= static_cast<int>(vectors);
  auto fits = [&](int64_t r, int64_t v) { return r * v + (r > 1 ? v : 1) + 1 <= registers; };
  int64_t rows = std::min({m, most_rows, kMaxLanes / (vectors * lanes)});
  while (rows > 1 && (!fits(rows, vectors) || !whole_registers(rows))) --rows;
  while (vectors > 1 && !fits(rows, vectors)) --vectors;
  if (rows * vectors < chains) {  // few rows (GEMV, skinny): more vectors for enough chains
    const auto wanted =
        static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>((chains + rows - 1) / rows)));
    vectors = std::min({col_vectors, wanted, kMaxLanes / (rows * lanes)});
    while (vectors > 1 && !fits(rows, vectors)) --vectors;
  }
  // Columns of whole vectors that do not fill the tiles (the stem's 112 output columns in tiles
  // of 2 x 16: 128, an eighth of every FMA on padding): one tile across all of them when that
  // keeps at least 2 rows, enough FMA chains and no more loads (b vectors and a broadcasts) per
  // FMA; its columns need no masks. 7 vectors x 2 rows for the stem: 12 % faster (docs/performance.md).
  if (!narrow && n % lanes == 0 && n % (lanes * vectors) != 0 && col_vectors > vectors && rows > 1) {
    const int64_t all = target.vector_registers;  // no mask registers
    int64_t r = std::min({m, most_rows, kMaxLanes / (col_vectors * lanes)});
    while (r > 1 && r * col_vectors + col_vectors + 1 > all) --r;
    if (r > 1 && r * col_vectors >= chains &&
        (r + col_vectors) * rows * vectors <= (rows + vectors) * r * col_vectors)
      return {r, col_vectors, lanes};
  }
  return {rows, vectors, lanes};
}

}  // namespace loom
