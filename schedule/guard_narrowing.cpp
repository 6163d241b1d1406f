#include "schedule/guard_narrowing.hpp"

#include "ir/range_split.hpp"
#include "ir/symbolic.hpp"

#include <vector>

namespace loom {

namespace {

bool reads_no_loop(const UOpPtr& e) { return e->ranges().empty() && e->dtype.lanes == 1; }

// The loop `r` of `end` narrowed to the iterations its store's guard allows, or null.
UOpPtr narrowed_loop(const UOpPtr& root, const UOpPtr& end, size_t k, const std::vector<UOpPtr>& guard) {
  const UOpPtr& r = end->src[k];
  if (r->op != Op::RANGE || r->get<AxisArg>().kind != AxisKind::Loop) return nullptr;
  UOpPtr lo, hi;
  for (const UOpPtr& c : guard) {
    if (c->op != Op::CMPLT) continue;
    if (c->src[0] == r && reads_no_loop(c->src[1])) hi = min_by_bounds(hi, c->src[1]);      // r < hi
    if (c->src[1] == r && reads_no_loop(c->src[0])) lo = max_by_bounds(lo, c->src[0] + 1);  // lo - 1 < r
  }
  if (!lo && !hi) return nullptr;
  const UOpPtr zero = const_like(r->dtype, 0);
  const UOpPtr start = simplify(max_by_bounds(lo, zero));
  const UOpPtr stop = hi ? min_by_bounds(hi, r->src[0]) : r->src[0];
  const UOpPtr extent = simplify(max_by_bounds(simplify(stop - start), zero));
  if (extent == r->src[0] && start == zero) return nullptr;
  const UOpPtr loop = make_range(extent, next_axis_id(root), AxisKind::Loop);
  std::vector<UOpPtr> src = end->src;
  src[0] = substitute_ranges(end->src[0], {{r, loop + start}});
  src[k] = loop;
  return end->with_src(std::move(src));
}

// The iterations where a store that writes back what it loads from the same address
// elsewhere (an assign into a slice: where(g, x, out[i]) into out[i]) changes memory: the
// WHERE's condition. Null for any other store. (A store guarded by its index is not
// narrowed: panel_packing pads a product's loop to whole panels and guards its store.)
UOpPtr write_back_guard(const UOpPtr& store) {
  const UOpPtr &index = store->src[0], &value = store->src[1];
  const bool writes_back =
      value->op == Op::WHERE && value->src[2]->op == Op::LOAD && value->src[2]->src[0] == index;
  return writes_back && index->src.size() == 2 ? value->src[0] : nullptr;
}

// SINK(END(STORE(INDEX(out, address...), value), loops...)): a kernel of one store.
UOpPtr narrow(const Match& m) {
  const UOpPtr& end = m["end"];
  const UOpPtr guard = write_back_guard(end->src[0]);
  if (!guard || guard->dtype.lanes != 1) return nullptr;
  const std::vector<UOpPtr> parts = conjuncts(guard);
  for (size_t k = 1; k < end->src.size(); ++k)
    if (UOpPtr narrowed = narrowed_loop(m.root(), end, k, parts))
      return UOp::make(Op::SINK, m.root()->dtype, {std::move(narrowed)});
  return nullptr;
}

}  // namespace

const PatternMatcher& guard_narrowing() {
  using P = UPat;
  const P store =
      P::op(Op::STORE, {P::op(Op::INDEX, {P::ops({Op::DEFINE_GLOBAL})}).allow_more_src(), P::var()});
  static const PatternMatcher pm(
      "guard_narrowing", {{P::op(Op::SINK, {P::op(Op::END, {store}, "end").allow_more_src()}), narrow}});
  return pm;
}

}  // namespace loom
