#include "schedule/valid_index.hpp"

#include "ir/symbolic.hpp"

#include <fmt/format.h>

#include <unordered_set>
#include <vector>

namespace loom {

namespace {

// A load inside the address (a gather's index) runs whether or not the index's guard holds:
// the guard only gates the outer access. Simplified under that guard, the load's own guard
// could fold to true and let it read out of bounds, so a rewrite that changes a load is refused.
bool weakens_a_load(const UOpPtr& address, const UOpPtr& simpler) {
  std::unordered_set<const UOp*> loads;
  for (const UOpPtr& u : toposort(address))
    if (u->op == Op::LOAD) loads.insert(u.get());
  if (loads.empty()) return false;
  for (const UOpPtr& u : toposort(simpler))
    if (u->op == Op::LOAD && !loads.contains(u.get())) return true;
  return false;
}

UOpPtr address_under_guard(const Match& m) {
  const UOpPtr& index = m.root();
  if (index->src.size() < 3 || index->src[2]->dtype.lanes != 1 || index->src[1]->dtype.lanes != 1)
    return nullptr;
  const UOpPtr& address = index->src[1];
  const size_t divisions = divmod_count(address);
  if (divisions == 0) return nullptr;
  std::vector<std::pair<UOpPtr, UOpPtr>> to_var, back;
  for (const auto& b : conjunct_bounds(index->src[2])) {
    const UOpPtr& r = b.x;
    const bool narrower = b.lo > r->vmin() || b.hi < r->vmax();
    if (r->op != Op::RANGE || !narrower || b.lo > b.hi || !address->ranges().contains(r.get())) continue;
    const UOpPtr var = make_var(fmt::format("valid.r{}", r->get<AxisArg>().id), static_cast<int64_t>(b.lo),
                                static_cast<int64_t>(b.hi));
    if (reaches(address, var)) return nullptr;  // a user's variable of that name and bounds
    to_var.emplace_back(r, var);
    back.emplace_back(var, r);
  }
  if (to_var.empty()) return nullptr;
  const UOpPtr simpler = substitute(simplify(substitute(address, to_var)), back);
  if (divmod_count(simpler) >= divisions || weakens_a_load(address, simpler)) return nullptr;
  std::vector<UOpPtr> src = index->src;
  src[1] = simpler;
  return index->with_src(std::move(src));
}

}  // namespace

const PatternMatcher& valid_index() {
  static const PatternMatcher pm("valid_index",
                                 {{UPat::ops({Op::INDEX}).allow_more_src(), address_under_guard}});
  return pm;
}

}  // namespace loom
