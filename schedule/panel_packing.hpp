#pragma once
// panel_packing (rangeify's graph, after buffer_removal): the b operand of a
// matmul-like sum that many rows read is copied once into column panels as
// wide as a register tile, so the tile's inner loop reads b contiguously.
//
//   Before:  BUFFERIZE(f(REDUCE(a[i, k] * b[k, j], k)), i, j)          each k step of a tile: b[k, j..j+W] at
//   N floats a step After:   BUFFERIZE(f(REDUCE(a[i, k] * P[j / W, k, j % W], k)), i, j),  P = BUFFERIZE(b[k,
//   jb*W + jl], jb, k, jl)
//
// The copy P is a kernel of its own (kernel_split makes one per BUFFERIZE), so
// a packed matmul is two kernels. Its panels are W = StageContext::panel_bytes
// wide (the engine passes the register tile's width, codegen/register_tile.hpp);
// 0 packs nothing. A product whose n columns are whole vectors that one tile of the
// most rows holds (Target::tile_wide_col_vectors: 64 floats on AVX-512) is one panel
// wide, W = n, so the tile reads a once; a b stored as that panel already (row-major
// [k, n]) is read where it lies. b may be read transposed (the keys of q k^T): its copy is what
// makes it contiguous. Where a tile's rows of a crowd one set of L1 (rows 4 KiB
// apart), a is copied too, into row panels Q[i / R, k, i % R] as tall as the tile
// (StageContext::panel_rows), and the matmul is three kernels; a costly a (a
// softmax's exp per element) is copied as it is read, so it is computed once.
// Columns that do not fill whole panels (n % W != 0, n > W) are padded to whole
// ones: P's last panel holds zeros past n, and the product runs over j padded,
// BUFFERIZE(.., i, j', j' < n), its store and other reads at j guarded by j' < n,
// so the tile reads every panel unmasked, as for n % W == 0. A b whose copy would outgrow the
// buffers it reads (a convolution's windows: im2col's shape) is read in place.
// docs/performance.md gives the thresholds' figures.
#include "ir/pattern.hpp"

namespace loom {

const PatternMatcher& panel_packing();

}  // namespace loom
