#pragma once
// The optimiser's recipes: the transformations one Opt (ir/opt.hpp) names that
// take more than a range split, over the contraction the kernel's main END
// computes (codegen/register_tile.hpp's MatmulAxes) or over its side ENDs.
// Private to the optimiser (codegen/opt.cpp applies them).
#include "codegen/kernel_edit.hpp"
#include "codegen/register_tile.hpp"
#include "ir/target.hpp"

#include <optional>

namespace loom::kopt {

// MatmulTile: `tile` over mm's rows and columns: columns -> (outer * vectors +
// unrolled) * lanes + lane, rows -> outer * rows + unrolled, in blocks of rows and of
// k when b comes in panels (schedule/panel_packing.hpp); the Target sizes the blocks.
UOpPtr tile_matmul(UOpPtr k, const MatmulAxes& mm, const RegisterTile& tile, const Target& target,
                   int64_t itemsize);
// DotTile: mm's sum in vectors of `tile.lanes` (padded, masked), `tile.rows` rows x
// every column unrolled, one accumulator each, folded once after the sum.
// A sum longer than the L2 holds of the tile's rows runs in blocks of its outermost range,
// partial sums waiting in the output (the Target sizes them: dot_sum_block).
UOpPtr tile_dot(UOpPtr k, const MatmulAxes& mm, const RegisterTile& tile, const Target& target,
                int64_t itemsize);
// GemvTile: one-row tiles of `tile.vectors` vectors over a GEMV's columns, in chunks
// the threads share, k in blocks of rows of b outside a chunk's tiles.
UOpPtr tile_gemv(UOpPtr k, const MatmulAxes& mm, const RegisterTile& tile, const Target& target,
                 int64_t itemsize);
// ColumnSumTile: the same over a column sum ([K, N].sum(0), a GEMV whose a is ones).
UOpPtr tile_column_sum(UOpPtr k, const MatmulAxes& cs, const RegisterTile& tile, const Target& target,
                       int64_t itemsize);
// Vectors of `lanes` elements in one cache line, at least one: the widest one-row
// tile of a GEMV or column sum that reads one line of each of its block's rows a step.
int64_t line_vectors(int64_t lanes, int64_t itemsize, const Target& t);
// AlignSides: the side ENDs of a kernel of several outputs follow the main END's
// loops; their own loops, beside a register tile, in `lanes` (width and most vectors).
UOpPtr align_side_ends(const UOpPtr& kernel, std::optional<Lanes> lanes);

}  // namespace loom::kopt
