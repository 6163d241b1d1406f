#pragma once
// The symbolic gradient: a walk over the UOp graph in reverse topological
// order that asks a table of per-op rules for each input's contribution and
// sums them. The result is lazy UOps, scheduled with the forward graph.
#include "ir/uop.hpp"

#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace loom::detail {

// A realized tensor's BUFFER node -> the graph it was realized from (in the
// buffer's flat shape): the walk goes on through that graph, so the gradient
// reaches the leaves behind a tensor that was read before backward().
using GraphsBehind = std::unordered_map<const UOp*, UOpPtr>;

// d(root)/d(w) for each w in `wrt`, with `seed` (root's shape and dtype) as
// d(out)/d(root): null where root does not depend on w. With `stop_at_wrt`
// the walk does not look below a wrt node (leaves); without, a w below
// another w gets every path's contribution.
std::vector<UOpPtr> gradients(const UOpPtr& root, const UOpPtr& seed, const std::vector<UOpPtr>& wrt,
                              const GraphsBehind& behind, bool stop_at_wrt);

// Does a gradient flow from `root` to any node of `targets`? Through the same
// edges as gradients(): never through DETACH or an integer or Bool value.
bool gradient_reaches(const UOpPtr& root, const std::unordered_set<const UOp*>& targets,
                      const GraphsBehind& behind);

}  // namespace loom::detail
