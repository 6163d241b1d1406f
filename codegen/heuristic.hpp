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

}  // namespace loom
