#pragma once
// Which loops a node needs open: the RANGEs it depends on, minus those an END
// or REDUCE under it closes (UOp::ranges() in ir/uop.hpp caches a like set on
// every node; this map is the linearizer's own). A value is placed in (and an effect runs once per
// iteration of) exactly these loops; the linearizer places by it and
// lower_reduce starts each accumulator by it.
#include "ir/uop.hpp"

#include <unordered_map>
#include <vector>

namespace loom {

using RangeSet = std::vector<const UOp*>;  // sorted by address: a set, not an order

class NeededLoops {
 public:
  // Computes the sets of every node under `root`.
  explicit NeededLoops(const UOpPtr& root);
  // The set of a node under the root; nodes added later are computed on demand.
  const RangeSet& operator()(const UOpPtr& u);

 private:
  void add(const UOpPtr& u);  // sources must be known
  std::unordered_map<const UOp*, RangeSet> sets_;
  std::vector<UOpPtr> held_;  // keeps the nodes of `sets_` alive, so an address is never reused
};

}  // namespace loom
