#include "schedule/reduce_unparented.hpp"

#include <limits>

namespace loom {

namespace {

// What a reduce over nothing is: the identity of its op (as codegen's accumulator starts).
UOpPtr identity(DType dt, Op op) {
  if (op == Op::ADD) return const_like(dt, 0);
  if (op == Op::MUL) return const_like(dt, 1);
  if (dt.is_float()) return const_float(dt, -std::numeric_limits<double>::infinity());
  return dt.is_unsigned() ? const_like(dt, 0) : const_int(dt, -(int64_t{1} << (dt.bits() - 1)));
}

// A range of size 0 empties the reduce, whatever its body: the body may read a
// buffer of no elements, and 0 * inf would be NaN where the sum is 0.
UOpPtr reduce_over_nothing(const Match& m) {
  const UOpPtr& red = m.root();
  for (size_t i = 1; i < red->src.size(); ++i)
    if (red->src[i]->op == Op::RANGE && red->src[i]->src[0]->op == Op::CONST &&
        red->src[i]->src[0]->const_int() == 0)
      return identity(red->dtype, red->get<ReduceArg>().op);
  return nullptr;
}

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
  static const PatternMatcher pm("reduce_unparented", {{UPat::ops({Op::REDUCE}), reduce_over_nothing},
                                                       {UPat::ops({Op::REDUCE}), drop_unused_ranges}});
  return pm;
}

}  // namespace loom
