#include "schedule/range_flatten.hpp"

#include <algorithm>

namespace loom {

namespace {

// END(END(x, inner...), outer...) -> END(x, outer..., inner...); likewise REDUCE of one op.
UOpPtr flatten_nested(const Match& m) {
  const UOpPtr &outer = m.root(), &inner = outer->src[0];
  if (outer->op == Op::REDUCE && !(outer->arg == inner->arg)) return nullptr;
  std::vector<UOpPtr> src{inner->src[0]};
  src.insert(src.end(), outer->src.begin() + 1, outer->src.end());
  src.insert(src.end(), inner->src.begin() + 1, inner->src.end());
  return outer->with_src(std::move(src));
}

// A listed expression becomes the ranges it uses, in place, by axis id.
UOpPtr expressions_to_ranges(const Match& m) {
  const UOpPtr& u = m.root();
  std::vector<UOpPtr> src{u->src[0]};
  bool changed = false;
  for (size_t i = 1; i < u->src.size(); ++i) {
    const UOpPtr& e = u->src[i];
    if (e->op == Op::RANGE) {
      src.push_back(e);
      continue;
    }
    changed = true;
    for (const UOp* r : e->ranges())
      if (std::none_of(src.begin() + 1, src.end(), [r](const UOpPtr& s) { return s.get() == r; }))
        src.push_back(r->ptr());
  }
  return changed ? u->with_src(std::move(src)) : nullptr;
}

}  // namespace

const PatternMatcher& range_flatten() {
  static const PatternMatcher pm(
      "range_flatten", {
                           {UPat::op(Op::END, {UPat::ops({Op::END})}).allow_more_src(), flatten_nested},
                           {UPat::op(Op::REDUCE, {UPat::ops({Op::REDUCE})}).allow_more_src(), flatten_nested},
                           {UPat::ops({Op::END, Op::REDUCE}), expressions_to_ranges},
                       });
  return pm;
}

}  // namespace loom
