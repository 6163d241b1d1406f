#pragma once
// Applying the optimiser's vocabulary (ir/opt.hpp) to a kernel, one Opt at a time
// and each by one function, as tinygrad's apply_opt does: range splits (pad,
// upcast, unroll, blocked sums), the recipes of codegen/recipes.hpp (register
// tiles over a contraction, aligned side ENDs) and the parallel loop. The
// heuristic (codegen/heuristic.hpp) chooses a list; a recorded list replays.
#include "ir/opt.hpp"
#include "ir/target.hpp"
#include "ir/uop.hpp"

#include <vector>

namespace loom {

// A kernel being optimised for a Target: the Opts applied so far and what they made.
//
// The range splits (Pad, Upcast, Unroll, BlockSum and the tiles) come first; the
// kernel is simplified once after the last of them, before its side ENDs are aligned
// or a loop is made parallel (settle). A kernel that already has lanes or threads
// (optimised before) is not simplified again.
class OptState {
 public:
  OptState(UOpPtr kernel, const Target& target);

  // Applies `opt`. Throws loom::Error naming the Opt when it does not fit the kernel
  // (no range of its axis, a split that does not divide, a tile over a kernel that is
  // not its contraction, a range split after settle).
  void apply(const Opt& opt);
  // Ends the range splits (see above); applying AlignSides or Parallel settles first.
  void settle();

  const UOpPtr& kernel() const { return kernel_; }
  const std::vector<Opt>& applied() const { return applied_; }
  const Target& target() const { return target_; }
  // SIMD lanes of the kernel's widest element on the Target (vector_bytes / itemsize):
  // the width of its upcasts and tiles.
  int lanes() const { return lanes_; }

 private:
  UOpPtr kernel_;
  Target target_;
  int lanes_ = 1;
  bool fresh_ = true;  // no lanes or threads when it came in
  bool settled_ = false;
  std::vector<Opt> applied_;
};

// Does every store of `kernel` move along `range`? Only then may the range run across
// threads: each task runs the whole kernel for its slice of the range, so a store
// outside it (scatter_reduce's zero fill before its scatter) would run once per task
// and wipe what the tasks before it wrote, and a store inside it that does not move
// along it (a sum across the range) would race.
bool stores_along(const UOpPtr& kernel, const UOpPtr& range);

// `opts` applied to `kernel` in order, then settled: the kernel the optimiser makes
// when its heuristic (or a search) chose `opts`.
UOpPtr apply_opts(const UOpPtr& kernel, const std::vector<Opt>& opts, const Target& target);

}  // namespace loom
