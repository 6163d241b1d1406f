// Matmul-like kernels and their register tiles: the optimiser splits the
// output's rows into an unroll range and its columns into unroll x upcast, so
// the reduce loop's body is a tile of independent FMAs with each a value loaded
// once (a broadcast) and each b vector loaded once:
//
//   Before:  END(STORE(out[i*N + j], REDUCE(a[i*K + k] * b[k*N + j], k)), i, j)
//   After:   END(..., i/6, i%6 [unroll], j/16, (j/8)%2 [unroll], j%8 [upcast]) -> 6 x 2 accumulators
#include "codegen/register_tile.hpp"

#include "ir/page.hpp"
#include "ir/symbolic.hpp"

#include <algorithm>
#include <bit>
#include <limits>
#include <tuple>

namespace loom {

namespace {

// Vectors of b per step of k: two keep the a broadcast (one load, one register)
// feeding two FMAs, the ratio BLIS's AVX2 kernels use (6 x 16 floats).
constexpr int64_t kColVectors = 2;
// Independent FMA chains a core needs in flight: FMA latency (4 cycles on
// Haswell and Skylake, 5 on Zen 2) times two FMA pipes is 8 to 10.
constexpr int64_t kFmaChains = 8;
// Rows per tile at most: 6 rows x 2 vectors keep 12 chains in flight, above
// the 8 to 10 needed, and the whole tile (6 x 32 lanes on AVX-512) within the
// 255 lanes a UOp's vector dtype holds (the expander computes the tile as one
// vector before lower_reduce splits its accumulator into registers).
constexpr int64_t kMaxRows = 6;
constexpr int64_t kMaxLanes = 255;
// Float ALU ops an a value may cost and still be recomputed per column tile
// (a cast, a scale): beyond, the tile widens to all the columns it can hold.
constexpr int64_t kCheapA = 2;

// A block of a's rows takes a quarter of the L2, leaving the rest to the b panel
// passing through and the output (half of it measured no better, and fewer, larger
// blocks leave more to a preempted thread: docs/performance.md); the blocks of a long
// k, whose kMinBlockTiles tiles would not fit there, take an eighth of a core
// complex's L3 each instead (each thread its own block). Row blocks at least (when
// there are as many tiles): one per core, the blocks are what the threads share.
// docs/performance.md, "Target".
constexpr int64_t kMinBlockTiles = 8;
int64_t l2_block(const Target& t) { return t.l2_bytes / 4; }
int64_t l3_block(const Target& t) { return t.l3_complex_bytes / 8; }
int64_t min_blocks(const Target& t) { return std::max(1, t.cores); }

std::optional<int64_t> trip(const UOpPtr& range) {
  const UOpPtr& end = range->src.at(0);
  if (!end->is_const()) return std::nullopt;
  return end->const_int();
}

// The global INDEX nodes `value` reads through, stopping at nothing (a side of
// the product has no REDUCE below it: the kernel has one).
std::vector<UOpPtr> global_indexes(const UOpPtr& value) {
  std::vector<UOpPtr> out;
  for (const auto& n : toposort(value))
    if (n->op == Op::INDEX && n->src.at(0)->op == Op::DEFINE_GLOBAL) out.push_back(n);
  return out;
}

bool uses(const std::vector<UOpPtr>& indexes, const UOpPtr& range) {
  return std::any_of(indexes.begin(), indexes.end(), [&](const UOpPtr& i) { return reaches(i, range); });
}

// j for the sides (a, b): an output range b uses and a does not, along which
// the output and every b access is contiguous, at least two long (a vector).
UOpPtr column_axis(const std::vector<UOpPtr>& outs, const UOpPtr& store_index, const std::vector<UOpPtr>& a,
                   const std::vector<UOpPtr>& b) {
  for (const auto& r : outs) {
    if (*trip(r) < 2 || uses(a, r) || !uses(b, r) || address_stride(store_index, r) != 1) continue;
    if (std::all_of(b.begin(), b.end(), [&](const UOpPtr& i) { return address_stride(i, r) == 1; })) return r;
  }
  return nullptr;
}

// i for the sides (a, b): the innermost output range a uses and b does not, or the next
// such range out from `inner`.
UOpPtr row_axis(const std::vector<UOpPtr>& outs, const std::vector<UOpPtr>& a, const std::vector<UOpPtr>& b,
                const UOpPtr& inner = nullptr) {
  bool past = !inner;
  for (auto r = outs.rbegin(); r != outs.rend(); ++r) {
    if (past && uses(a, *r) && !uses(b, *r)) return *r;
    past |= *r == inner;
  }
  return nullptr;
}

int64_t float_ops(const UOpPtr& value) {
  int64_t n = 0;
  for (const auto& u : toposort(value)) n += is_alu(u->op) && u->dtype.is_float();
  return n;
}

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

// A kernel of one END over one STORE of one float ADD REDUCE over ranges of
// constant trip counts, whose outputs are loops of constant trip counts.
struct FloatSum {
  UOpPtr red;
  std::vector<UOpPtr> outs;  // the output ranges
  UOpPtr store_index;
};

std::optional<FloatSum> float_sum(const UOpPtr& kernel) {
  if (kernel->op != Op::SINK || kernel->src.empty() || !side_ends_ride_along(kernel)) return std::nullopt;
  const UOpPtr& end = kernel->src[0];
  if (end->op != Op::END || end->src.at(0)->op != Op::STORE) return std::nullopt;
  UOpPtr red;
  for (const auto& n : toposort(end)) {
    if (n->op != Op::REDUCE) continue;
    if (red) return std::nullopt;  // one reduce only
    red = n;
  }
  if (!red || red->src.size() < 2 || red->get<ReduceArg>().op != Op::ADD || !red->dtype.is_float() ||
      red->dtype.lanes != 1)
    return std::nullopt;
  for (size_t i = 1; i < red->src.size(); ++i) {
    if (!trip(red->src[i])) return std::nullopt;
    for (size_t e = 1; e < kernel->src.size(); ++e)
      if (reaches(kernel->src[e], red->src[i])) return std::nullopt;  // a side END sums over its own ranges
  }
  std::vector<UOpPtr> outs;
  for (size_t i = 1; i < end->src.size(); ++i) {
    const UOpPtr& r = end->src[i];
    if (r->op != Op::RANGE || r->get<AxisArg>().kind != AxisKind::Loop || !trip(r)) return std::nullopt;
    outs.push_back(r);
  }
  return FloatSum{red, std::move(outs), end->src[0]->src.at(0)};
}

// The output ranges other than `cols` that the b side uses and the a side does not.
std::vector<UOpPtr> panel_axes(const FloatSum& f, const UOpPtr& cols, const std::vector<UOpPtr>& a,
                               const std::vector<UOpPtr>& b) {
  std::vector<UOpPtr> panels;
  for (const auto& r : f.outs)
    if (r != cols && uses(b, r) && !uses(a, r)) panels.push_back(r);
  return panels;
}

// matmul_axes, or with `one_row` the axes of a sum with no row axis (rows null).
std::optional<MatmulAxes> product_axes(const UOpPtr& kernel, bool one_row) {
  const auto f = float_sum(kernel);
  if (!f || f->red->src[0]->op != Op::MUL) return std::nullopt;
  const UOpPtr& red = f->red;
  const std::vector<UOpPtr> x = global_indexes(red->src[0]->src.at(0)),
                            y = global_indexes(red->src[0]->src.at(1));
  if (x.empty() || y.empty()) return std::nullopt;
  for (const auto& [a, b, a_value] :
       {std::tuple{x, y, red->src[0]->src[0]}, std::tuple{y, x, red->src[0]->src[1]}}) {
    const UOpPtr cols = column_axis(f->outs, f->store_index, a, b), rows = row_axis(f->outs, a, b);
    if (!cols || !rows != one_row) continue;
    return MatmulAxes{rows,
                      cols,
                      red->src.back(),
                      float_ops(a_value),
                      panel_axes(*f, cols, a, b),
                      rows ? row_axis(f->outs, a, b, rows) : nullptr};
  }
  return std::nullopt;
}

}  // namespace

std::optional<MatmulAxes> matmul_axes(const UOpPtr& kernel) { return product_axes(kernel, false); }
std::optional<MatmulAxes> gemv_axes(const UOpPtr& kernel) { return product_axes(kernel, true); }

std::optional<MatmulAxes> column_sum_axes(const UOpPtr& kernel) {
  const auto f = float_sum(kernel);
  if (!f || f->red->src.size() != 2) return std::nullopt;
  const UOpPtr &body = f->red->src[0], &k = f->red->src[1];
  const std::vector<UOpPtr> b = global_indexes(body);
  const UOpPtr cols = b.empty() ? nullptr : column_axis(f->outs, f->store_index, {}, b);
  if (!cols) return std::nullopt;
  for (const auto& i : b) {
    const auto stride = address_stride(i, k);
    if (!stride || *stride * i->dtype.itemsize() < kPageBytes) return std::nullopt;
  }
  return MatmulAxes{nullptr, cols, k, 0, panel_axes(*f, cols, {}, b), nullptr};
}

int tile_panel_bytes(int vector_bytes) { return static_cast<int>(kColVectors) * vector_bytes; }
int tile_panel_rows() { return static_cast<int>(kMaxRows); }

int64_t row_block(int64_t tiles, int64_t rows, int64_t k, int64_t itemsize, const Target& target) {
  const int64_t kMinBlocks = min_blocks(target);
  const int64_t tile_bytes = std::max<int64_t>(1, rows * k * itemsize);
  int64_t most = l2_block(target) / tile_bytes;
  if (most < kMinBlockTiles) most = l3_block(target) / tile_bytes;
  most = std::clamp<int64_t>(most, 1, (tiles + kMinBlocks - 1) / kMinBlocks);
  // A count of blocks the threads share evenly (a multiple of kMinBlocks: three blocks
  // on two threads left one idle a third of the time at 512), from the fewest the size
  // allows up to twice as many, with the fewest padded tiles.
  const int64_t fewest = (tiles + most - 1) / most;
  int64_t best = most, padded = std::numeric_limits<int64_t>::max();
  for (int64_t n = (fewest + kMinBlocks - 1) / kMinBlocks * kMinBlocks; n <= 2 * fewest + kMinBlocks;
       n += kMinBlocks) {
    const int64_t t = (tiles + n - 1) / n, blocks = (tiles + t - 1) / t;
    if ((blocks % kMinBlocks == 0 || blocks == 1) && blocks * t < padded) best = t, padded = blocks * t;
  }
  return best;
}

RegisterTile register_tile(int64_t m, int64_t n, int64_t lanes, int registers, int64_t a_ops) {
  lanes = std::min(lanes, n);
  const int64_t col_vectors = (n + lanes - 1) / lanes;  // vectors the output's columns fill
  const int64_t widest = std::min(col_vectors, kMaxLanes / lanes);
  int64_t vectors = a_ops > kCheapA ? widest : std::min(kColVectors, col_vectors);
  // Columns that do not fill the tiles are masked: each b vector's mask takes a register.
  if (n % (lanes * vectors) != 0) registers -= static_cast<int>(vectors);
  // rows x vectors accumulators, the b vectors (read once per row unless there is one
  // row, then straight from memory) and one a broadcast fit the registers.
  auto fits = [&](int64_t r, int64_t v) { return r * v + (r > 1 ? v : 1) + 1 <= registers; };
  int64_t rows = std::min({m, kMaxRows, kMaxLanes / (vectors * lanes)});
  while (rows > 1 && !fits(rows, vectors)) --rows;
  while (vectors > 1 && !fits(rows, vectors)) --vectors;
  if (rows * vectors < kFmaChains) {  // few rows (GEMV, skinny): more vectors for enough chains
    const auto wanted =
        static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>((kFmaChains + rows - 1) / rows)));
    vectors = std::min({col_vectors, wanted, kMaxLanes / (rows * lanes)});
    while (vectors > 1 && !fits(rows, vectors)) --vectors;
  }
  return {rows, vectors, lanes};
}

}  // namespace loom
