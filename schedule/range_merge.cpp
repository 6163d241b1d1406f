#include "schedule/range_merge.hpp"

#include "ir/range_split.hpp"
#include "ir/symbolic.hpp"
#include "schedule/range_flatten.hpp"
#include "schedule/stage.hpp"

namespace loom {

namespace {

// Are r0 and r1 in the same REDUCE scopes below `u`: is every REDUCE's result
// either dependent on both or on neither?
bool same_reduce_scopes(const UOpPtr& u, const UOpPtr& r0, const UOpPtr& r1) {
  for (const auto& x : toposort(u))
    if (x->op == Op::REDUCE && x->ranges().contains(r0) != x->ranges().contains(r1)) return false;
  return true;
}

// An empty loop (end 0) is left alone: its kernel does nothing, and a merged
// range of size 0 would give the simplifier an empty interval to reason on.
bool mergeable(const UOpPtr& r0, const UOpPtr& r1) {
  return r0->op == Op::RANGE && r1->op == Op::RANGE && r0 != r1 &&
         r0->get<AxisArg>().kind == r1->get<AxisArg>().kind && r0->src[0]->is_const() &&
         r1->src[0]->is_const() && r0->src[0]->const_int() > 0 && r1->src[0]->const_int() > 0;
}

const PatternMatcher& check_rules() {
  static const PatternMatcher pm = symbolic() + range_flatten();
  return pm;
}

// u with r0 (outer) and r1 (inner) merged into one range, or null if that adds divmods.
UOpPtr try_merge(const UOpPtr& u, const UOpPtr& r0, const UOpPtr& r1, size_t divmods) {
  if (!mergeable(r0, r1) || !same_reduce_scopes(u->src[0], r0, r1)) return nullptr;
  const int64_t n1 = r1->src[0]->const_int();
  const UOpPtr merged =
      make_range(r0->src[0]->const_int() * n1, r0->get<AxisArg>().id, r0->get<AxisArg>().kind);
  const UOpPtr out = graph_rewrite(substitute(u, {{r0, merged / n1}, {r1, merged % n1}}), check_rules());
  return divmod_count(out) <= divmods ? out : nullptr;
}

// A loop two ENDs share (a kernel of several outputs) stays as it is in both.
bool shared(const Match& m, const UOpPtr& r) { return m.ctx<StageContext>().shared_loops.contains(r.get()); }

UOpPtr merge_ranges(const Match& m) {
  UOpPtr u = m.root();
  bool merged_any = false;
  for (bool again = true; again;) {
    again = false;
    const size_t divmods = divmod_count(u), n = u->src.size();
    for (size_t i = 1; i < n && !again; ++i)
      for (size_t j = i + 1; j < n && !again; ++j) {
        if (u->op == Op::END && j != i + 1) break;  // END: adjacent loops only
        if (u->op == Op::END && (shared(m, u->src[i]) || shared(m, u->src[j]))) continue;
        if (UOpPtr v = try_merge(u, u->src[i], u->src[j], divmods)) {
          u = v;
          again = merged_any = true;
        }
      }
  }
  return merged_any ? u : nullptr;
}

}  // namespace

const PatternMatcher& range_merge() {
  static const PatternMatcher pm("range_merge", {{UPat::ops({Op::END, Op::REDUCE}), merge_ranges}});
  return pm;
}

}  // namespace loom
