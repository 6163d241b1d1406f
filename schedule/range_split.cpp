#include "schedule/range_split.hpp"

#include "ir/range_split.hpp"
#include "schedule/stage.hpp"

#include <algorithm>

namespace loom {

namespace {

UOpPtr record_split(const Match& m) {
  const UOpPtr &r = m["r"], &c = m["c"];
  const UOpPtr& end = r->src[0];
  const int64_t k = c->const_int();
  const AxisKind kind = r->get<AxisArg>().kind;
  if (!end->is_const() || k <= 1 || end->const_int() <= k || end->const_int() % k != 0) return nullptr;
  if (kind != AxisKind::Loop && kind != AxisKind::Reduce) return nullptr;
  auto& pending = m.ctx<StageContext>().pending_splits;
  if (std::none_of(pending.begin(), pending.end(), [&](const auto& p) { return p.first == r; }))
    pending.emplace_back(r, k);
  return nullptr;
}

UOpPtr split_at_sink(const Match& m) {
  auto& pending = m.ctx<StageContext>().pending_splits;
  if (pending.empty()) return nullptr;
  std::vector<RangeSplit> splits;
  for (const auto& [r, k] : pending) splits.push_back({r, k, r->get<AxisArg>().kind});
  pending.clear();
  return split_ranges(m.root(), splits).root;
}

}  // namespace

const PatternMatcher& range_split() {
  static const PatternMatcher pm("range_split",
                                 {
                                     {UPat::ops({Op::RANGE}, "r") % UPat::cvar("c"), record_split},
                                     {UPat::ops({Op::RANGE}, "r") / UPat::cvar("c"), record_split},
                                     {UPat::ops({Op::SINK}), split_at_sink},
                                 });
  return pm;
}

}  // namespace loom
