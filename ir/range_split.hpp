#pragma once
// Range splitting, the one primitive under the range_split stage (schedule/)
// and the optimiser's upcasts and thread splits (codegen/), like tinygrad's
// shift_to:
//
//   Before:  END(STORE(INDEX(g, r0), ...), r0)            r0 = RANGE(12)
//   After:   END(STORE(INDEX(g, r1*4 + r2), ...), r1, r2)  r1 = RANGE(3), r2 = RANGE(4)
//
// Every use of the range becomes the expression, and every END or REDUCE that
// lists the range lists both new ranges in its place (outer first), so the loop
// nest stays valid. The new ranges get fresh axis ids.
#include "ir/uop.hpp"

#include <optional>
#include <utility>
#include <vector>

namespace loom {

struct RangeSplit {
  UOpPtr range;               // a RANGE whose end `factor` divides (exact_quotient)
  int64_t factor = 1;         // the size of the new range of kind `kind`
  AxisKind kind;              // that new range's kind; the other keeps `range`'s kind
  bool factor_outer = false;  // false: range -> rest*factor + new; true: range -> new*(end/factor) + rest
};

struct SplitRanges {
  UOpPtr root;
  std::vector<std::pair<UOpPtr, UOpPtr>> parts;  // per split, in order: (outer, inner)
};

// end / factor when `factor` divides `end` for every value it may take: exactly for a
// constant, by the simplifier for a symbolic end (n*16, or a padded ((n+15)/16)*16);
// nullopt when it does not, or cannot be shown to.
std::optional<UOpPtr> exact_quotient(const UOpPtr& end, int64_t factor);

// Applies all `splits` in one substitution. Throws loom::Error if a range's end
// is not one its factor divides (exact_quotient), or a BUFFERIZE lists the range
// (splitting one would change the buffer's shape). New ids start at `first_id`,
// or at one past the largest id in `root` when it is negative.
SplitRanges split_ranges(const UOpPtr& root, const std::vector<RangeSplit>& splits, int64_t first_id = -1);

// Replaces RANGE nodes by expressions, visiting only the nodes where one of
// them is open (UOp::ranges()): the cost is the size of what depends on them,
// not of the graph. Every INDEX rebuilt on a replaced range is also guarded by
// `valid` (when not null), so a read at a substituted index that may fall
// outside its buffer touches memory only where `valid` holds.
UOpPtr substitute_ranges(const UOpPtr& root, const std::vector<std::pair<UOpPtr, UOpPtr>>& ranges,
                         const UOpPtr& valid = nullptr);

// One past the largest RANGE axis id reachable from `root` (0 if none).
int64_t next_axis_id(const UOpPtr& root);

}  // namespace loom
