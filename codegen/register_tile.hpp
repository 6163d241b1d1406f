#pragma once
// Matmul-like kernels and the register tile the optimiser gives them
// (codegen/register_tile.cpp; docs/performance.md explains the constants).
//
//   out[.., i, j] = epilogue(sum_k a(.., i, k) * b(.., k, j))
//
// a's loads do not depend on j (one value broadcast over the lanes), b's loads
// do not depend on i and are contiguous along j (one vector). Matmul, batched
// matmul and the gradient matmuls with a transposed a all have this form.
#include "ir/buffer_access.hpp"
#include "ir/target.hpp"
#include "ir/uop.hpp"

#include <optional>
#include <vector>

namespace loom {

struct MatmulAxes {
  UOpPtr rows;                 // i: output range a depends on and b does not
  UOpPtr cols;                 // j: output range b and the output are contiguous along, a does not use
  UOpPtr reduce;               // k: the float sum's (innermost) range
  int64_t a_ops;               // float ALU ops computing one a value (0: a plain load)
  std::vector<UOpPtr> panels;  // other output ranges b uses and a does not (b packed in panels)
  UOpPtr row_panels;           // the next output range out from rows that a uses and b does not, or null
                      // (a in row panels with m a multiple of their height: i = row_panels * R + rows)
  bool a_selects_rows = false;  // a picks a load by its row (a stack of shifted slices: Contraction::selects)
  UOpPtr pair;                  // the sum's pair range (OptKind::PairDot): each step of `reduce` adds two
                                // terms; null otherwise
  // Terms each step of `reduce` adds: 2 with a pair range, else 1.
  int64_t terms_per_step() const { return pair ? 2 : 1; }
};

// A kernel of several outputs (docs/kernel-ir.md) is matched by its first END, the
// main one. True when every other END rides along with it: lists only output ranges
// of the main END, and reads none of its reduce ranges (a column sum beside a matmul,
// schedule/multi_output.hpp). A kernel of one END is trivially so.
bool side_ends_ride_along(const UOpPtr& kernel);

// The axes of a kernel of the form above, if it is one: a main END over one
// STORE, one float ADD REDUCE (over one or more ranges), whose value is a product of two
// sides that each read memory; other ENDs riding along. The rows, the columns, the batch
// and the sum may have symbolic extents (DEFINE_VARs bound per launch: the tile is
// planned for their upper bounds, trip_bound); b's panels are constant.
std::optional<MatmulAxes> matmul_axes(const UOpPtr& kernel);
// The same form with one row of a: no output range that a uses and b does not
// ([1, K] @ [K, N], a vector times a matrix; batched or not). rows is null. Its
// extents may be symbolic as a matmul's (a decoding step's [1, T] @ [T, d]).
std::optional<MatmulAxes> gemv_axes(const UOpPtr& kernel);
// A float sum of loads alone over one range k whose every step moves each load by a
// page or more, contiguous along an output range ([K, N].sum(0) for N of 1024 floats
// or more: a GEMV whose a is ones). rows is null, a_ops 0, panels the other output
// ranges the loads use. Its extents may be symbolic; the loads' step along k is a
// constant (a page or more).
std::optional<MatmulAxes> column_sum_axes(const UOpPtr& kernel, const Target& target);

// A product whose column range is narrower than a vector while both factors read one
// summed range contiguously (a convolution's weight gradient: dw[co, ci, kh, kw] =
// sum x[n, ci, oh + kh, ow + kw] * dy[n, co, oh, ow], kw 3 wide, both along ow): the
// matmul_axes with `reduce` that summed range, `lanes` long at least. Its tile is
// dot_tile's: the lanes run along the sum, one accumulator per output, folded at the end.
// rows is null for a product with no rows (gemv_axes' form: a depthwise conv's dw, each
// output reading one channel of x and of dy): a tile of one row.
std::optional<MatmulAxes> dot_axes(const UOpPtr& kernel, int64_t lanes);

struct RegisterTile {
  int64_t rows;     // output rows computed at once (an unroll range)
  int64_t vectors;  // SIMD vectors of output columns computed at once (an unroll range)
  int64_t lanes;    // columns per vector (the upcast range)
};

// The lanes of a tile over n output columns with vectors of `lanes`: all of them, the
// columns padded (masked) to whole vectors, unless n is narrower than a vector by more
// than a quarter; then n, and the rows' n-lane pieces share vectors. Rows packed that way
// straddle registers, which LLVM rebuilds with shuffles around every FMA (a 14-wide conv
// row: 243 shuffles for 6 FMAs), so a narrow n close to a vector is padded instead.
int64_t tile_lanes(int64_t lanes, int64_t n);

// The tile for an [m, n] output with `lanes` float lanes per vector and
// `target`'s vector registers: rows x vectors accumulators, `vectors` b
// registers and one a broadcast within the register file. An a that costs
// `a_ops` ALU ops per value is computed again for every column tile, so a
// costly one (a fused softmax) gets tiles as wide as the columns allow.
// The bytes of output columns a many-row tile computes with `target`'s vectors
// (tile_col_vectors, two: 64 bytes on AVX2, 128 on AVX-512): the width of the panels
// schedule/panel_packing.cpp packs b into, so each k step of a tile reads one
// panel row.
int tile_panel_bytes(const Target& target);
// The rows of that many-row tile: the height of the row panels a is packed into,
// so each k step of a tile reads its rows of a as one contiguous run.
int tile_panel_rows(const Target& target);

// Row tiles per block of the tile loop when b comes in panels: the block's
// rows of a (tiles x rows x k elements of `itemsize` bytes) stay in cache
// while every panel passes by, so a is read from memory once, b once per block.
// Of `tiles` row tiles in all: returns the block size (a divisor of the padded
// count, chosen to pad few tiles).
// `target`'s L2 and L3 size the block and its cores the count of blocks.
int64_t row_block(int64_t tiles, int64_t rows, int64_t k, int64_t itemsize, const Target& target);

// `whole_rows`: a picks its load by row (MatmulAxes::a_selects_rows); one tile of all m
// rows, when they fit, makes each row a constant, so each pick folds to one load.
// The dot tile for an [m, n] output summed in vectors of `lanes` (dot_axes): rows x n
// accumulators (every column), n vectors of b and one of a per step, within the
// registers and a UOp's 255 lanes. rows 0: no tile fits.
RegisterTile dot_tile(int64_t m, int64_t n, int64_t lanes, const Target& target);
// A dot tile's sum in blocks: of its outermost summed range's `outer` steps (a batch), how
// many a block takes so `rows` rows of a (a tile's, or a group of tiles') over it (`inner`
// terms a step, of `itemsize` bytes) stay within a block of the L2 while every other output
// of those rows (the loops over b's channels and taps) passes by; 0 when the whole sum fits
// (no blocks).
int64_t dot_sum_block(int64_t rows, int64_t outer, int64_t inner, int64_t itemsize, const Target& target);
// The groups a blocked dot tile's `row_tiles` row tiles go in, one a thread: each thread's
// tiles then walk a block of the sum together, so the batch is read once a group, not once
// a tile. One a core (min_blocks), at most one a tile.
int64_t dot_tile_groups(int64_t row_tiles, const Target& target);

RegisterTile register_tile(int64_t m, int64_t n, int64_t lanes, const Target& target, int64_t a_ops = 0,
                           bool whole_rows = false);

}  // namespace loom
