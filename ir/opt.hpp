#pragma once
// The optimiser's vocabulary (codegen/opt.hpp applies it): every choice the
// optimiser makes about a kernel is one Opt, a kind, the range it acts on and an
// amount, like tinygrad's Opt(op, axis, arg). A kernel's optimisation is the list
// of Opts applied to it in order, so it can be recorded (a compiled kernel keeps
// it, LOOM_DEBUG=3 and loom-dump print it, the caches are keyed by it), replayed
// and, later, searched. Here in ir/, the lowest floor, so runtime/'s compiled
// kernels and src/'s engine hold it without seeing codegen/.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace loom {

enum class OptKind : uint8_t {
  // Range splits, on the range whose axis id is `axis`:
  Pad,       // its end padded up to a multiple of `amount`; padded iterations touch no memory
  Upcast,    // split off `amount` iterations as SIMD lanes (an upcast range); 0: the whole range
  Unroll,    // split off `amount` iterations run at once (an unroll range: several accumulators)
  BlockSum,  // a float sum over it nested in blocks of at most `amount` values per accumulator
  Blocks,    // a loop of a one-END kernel split into blocks of `amount` iterations, the loop over the
             // blocks made the kernel's outermost (cache blocking: a transposing copy sweeps every
             // other loop over one block of lines at a time)
  Peel,      // the last iteration of a loop of a one-END kernel made an END of its own, both ENDs
             // under the kernel's first other loop (a pair copy's last panel, which alone clamps
             // its rows, leaves the others' reads contiguous)
  // Recipes (codegen/recipes.hpp), tiles over the contraction the kernel's main END computes:
  MatmulTile,     // register tile of `rows` x `amount` vectors, `axis` its columns (ir/contraction.hpp)
  GemvTile,       // one-row tile of `amount` vectors over a GEMV's columns `axis`, in chunks
  ColumnSumTile,  // the same over a column sum's columns `axis`
  DotTile,        // a dot tile (register_tile.hpp's dot_axes): the sum in vectors of `amount` lanes, `rows`
                  // rows x every column `axis` accumulated, folded once after the sum
  ExpandSum,      // a float sum over the short range `axis` written out as its terms, each pick by the
                  // range folded to the one load it reads
  PairDot,        // a float sum of bfloat16 products over `axis` two terms a step, on the Target's pair-dot
                  // instruction (codegen/pair_dot.hpp); `amount` 2
  // The kernel as a whole:
  AlignSides,  // a kernel of several outputs: the side ENDs follow the main one's loops,
               // their own loops in vectors of `amount` (0: as they are)
  Parallel,    // the loop `axis` runs across threads
};

std::string_view opt_kind_name(OptKind k);

struct Opt {
  OptKind kind = OptKind::Upcast;
  int64_t axis = -1;   // the RANGE's AxisArg id when the Opt is applied; -1 for the kernel
  int64_t amount = 0;  // per kind (above)
  int64_t rows = 0;    // MatmulTile: the tile's rows

  bool operator==(const Opt&) const = default;
};

// "upcast(3, 16)", "matmul_tile(1, 2, rows=6)", "align_sides(4)", "parallel(0)".
std::string to_string(const Opt& opt);
// The list as the optimiser applied it: "[upcast(3, 16), parallel(0)]".
std::string to_string(const std::vector<Opt>& opts);
// The inverse of to_string of a list; throws loom::Error naming the text that is not an Opt.
std::vector<Opt> parse_opts(std::string_view text);

}  // namespace loom
