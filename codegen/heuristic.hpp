#pragma once
// The optimiser's heuristic: loom's hand-made choices for a kernel (which range
// goes to SIMD lanes, which unrolls, how float sums are blocked, which tile a
// contraction gets, which loop runs across threads), as a list of Opts
// (ir/opt.hpp), like tinygrad's hand_coded_optimizations. Each choice is applied
// (codegen/opt.hpp) before the next is made, since each looks at what the last made.
#include "codegen/opt.hpp"

#include <vector>

namespace loom {

// Applies the heuristic's Opts to `s` (a kernel fresh from the schedule, or one
// optimised before, which gets at most its parallel loop).
void apply_heuristic(OptState& s);
// The Opts the heuristic chooses for `kernel` on `target`: apply_opts of them makes the
// kernel optimize_kernel makes.
std::vector<Opt> heuristic_opts(const UOpPtr& kernel, const Target& target);

// The heuristic's last choices, made for whatever range splits `s` holds (its own or a
// search's): float sums longer than kBlock blocked (unless a tile blocks them), the
// splits settled, the side ENDs of several aligned, the parallel loop. A search's
// candidate is its Opts followed by these, so it keeps the heuristic's accuracy and its
// rule for which loop threads may share.
void finish_heuristic(OptState& s);

// The search's next steps from `s` (LOOM_BEAM, docs/pipeline.md): each a short list of
// Opts that fits `s`, of the kinds and amounts the heuristic chooses among for this
// kernel: on a kernel not yet split, each tile its contraction takes, in each size
// the registers hold; on one not yet tiled, lanes on each range the heuristic could
// give them to (padded to whole vectors), with 1, 2 or 4 accumulators when it reduces.
std::vector<std::vector<Opt>> search_moves(const OptState& s);

}  // namespace loom
