#include "schedule/reduce_unparented.hpp"

namespace loom {

namespace {

UOpPtr drop_unused_ranges(const Match& m) {
  const UOpPtr& red = m.root();
  const UOpPtr& body = red->src[0];
  const Op op = red->get<ReduceArg>().op;
  std::vector<UOpPtr> used{body}, unused;
  for (size_t i = 1; i < red->src.size(); ++i) {
    if (red->src[i]->op != Op::RANGE) return nullptr;  // an expression: range_flatten's to list
    (body->ranges().contains(red->src[i]) ? used : unused).push_back(red->src[i]);
  }
  if (unused.empty() || (op == Op::MUL && !red->dtype.is_float())) return nullptr;
  UOpPtr out = used.size() == 1 ? body : red->with_src(std::move(used));
  for (const auto& r : unused) {
    const UOpPtr n = cast(r->src[0], red->dtype);
    if (op == Op::ADD) out = out * n;
    if (op == Op::MUL) out = alu(Op::POW, {out, n});
  }
  return out;
}

}  // namespace

const PatternMatcher& reduce_unparented() {
  static const PatternMatcher pm("reduce_unparented", {{UPat::ops({Op::REDUCE}), drop_unused_ranges}});
  return pm;
}

}  // namespace loom
