#include "schedule/valid_index.hpp"

#include "ir/symbolic.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

namespace loom {

namespace {

// What the guard says of one range: lo <= r <= hi.
struct RangeBounds {
  UOpPtr range;
  int64_t lo, hi;
};

void narrow(std::vector<RangeBounds>& out, const UOpPtr& r, int64_t lo, int64_t hi) {
  for (auto& b : out)
    if (b.range == r) {
      b.lo = std::max(b.lo, lo), b.hi = std::min(b.hi, hi);
      return;
    }
  out.push_back({r, std::max(lo, r->vmin()), std::min(hi, r->vmax())});
}

// The conjuncts `r < c` and `c < r` of a guard (the form comparison_folding leaves a bound
// on one range in), collected through ANDs.
void collect(const UOpPtr& guard, std::vector<RangeBounds>& out) {
  if (guard->op == Op::AND) {
    for (const auto& s : guard->src) collect(s, out);
    return;
  }
  if (guard->op != Op::CMPLT) return;
  const UOpPtr &a = guard->src[0], &b = guard->src[1];
  if (a->op == Op::RANGE && b->is_const() && b->dtype.is_int()) narrow(out, a, a->vmin(), b->const_int() - 1);
  if (b->op == Op::RANGE && a->is_const() && a->dtype.is_int()) narrow(out, b, a->const_int() + 1, b->vmax());
}

bool mentions(const UOpPtr& u, const UOpPtr& node) {
  const auto nodes = toposort(u);
  return std::find(nodes.begin(), nodes.end(), node) != nodes.end();
}

int64_t divisions(const UOpPtr& u) {
  int64_t n = 0;
  for (const auto& x : toposort(u)) n += x->op == Op::IDIV || x->op == Op::MOD;
  return n;
}

UOpPtr address_under_guard(const Match& m) {
  const UOpPtr& index = m.root();
  if (index->src.size() < 3 || index->src[2]->dtype.lanes != 1 || index->src[1]->dtype.lanes != 1)
    return nullptr;
  const UOpPtr& address = index->src[1];
  if (divisions(address) == 0) return nullptr;
  std::vector<RangeBounds> bounds;
  collect(index->src[2], bounds);
  std::vector<std::pair<UOpPtr, UOpPtr>> to_var, back;
  for (const auto& b : bounds) {
    const bool narrower = b.lo > b.range->vmin() || b.hi < b.range->vmax();
    if (!narrower || b.lo > b.hi || !address->ranges().contains(b.range.get())) continue;
    const UOpPtr var = make_var(fmt::format("valid.r{}", b.range->get<AxisArg>().id), b.lo, b.hi);
    if (mentions(address, var)) return nullptr;  // a user's variable of that name and bounds
    to_var.emplace_back(b.range, var);
    back.emplace_back(var, b.range);
  }
  if (to_var.empty()) return nullptr;
  const UOpPtr simpler = substitute(simplify(substitute(address, to_var)), back);
  if (divisions(simpler) >= divisions(address)) return nullptr;
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
