#include "codegen/needed_loops.hpp"

#include <algorithm>
#include <iterator>

namespace loom {

NeededLoops::NeededLoops(const UOpPtr& root) {
  for (const auto& n : toposort(root)) add(n);
}

const RangeSet& NeededLoops::operator()(const UOpPtr& u) {
  if (auto it = sets_.find(u.get()); it != sets_.end()) return it->second;
  for (const auto& n : toposort(u))
    if (!sets_.contains(n.get())) add(n);
  return sets_.at(u.get());
}

void NeededLoops::add(const UOpPtr& n) {
  RangeSet set;
  for (const auto& s : n->src) {
    const RangeSet& more = sets_.at(s.get());
    RangeSet merged;
    std::set_union(set.begin(), set.end(), more.begin(), more.end(), std::back_inserter(merged));
    set = std::move(merged);
  }
  if (n->op == Op::RANGE) set.insert(std::lower_bound(set.begin(), set.end(), n.get()), n.get());
  if (n->op == Op::END || n->op == Op::REDUCE)
    for (size_t i = 1; i < n->src.size(); ++i) std::erase(set, n->src[i].get());
  sets_.emplace(n.get(), std::move(set));
  held_.push_back(n);
}

}  // namespace loom
