// A select of a guarded load against zero folded into the load's guard. A guarded LOAD
// reads 0 where its guard is false (docs/ir.md), so the select only narrows the guard:
// codegen then issues one masked load, not a masked load and a masked move. A padded
// conv's x is read so in every step of its sum (its guard the padding's bounds and, once
// the optimiser pads the tile, the tile's lanes; the select the padding's bounds).
//
//   Before:  WHERE(c, LOAD(INDEX(buf, i, g)), 0.0)
//   After:   LOAD(INDEX(buf, i, g AND c))        LOAD(INDEX(buf, i, g)) when c is a term of g
//
// Only a load nothing else reads (another reader would then need a second load) and only
// +0.0 (the value a guarded load reads).
#include "codegen/codegen.hpp"
#include "ir/pattern.hpp"

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace loom {

namespace {

struct SelectContext {
  std::unordered_set<const UOp*> read_once;  // LOADs with one reader
};

// The terms of an AND tree of bools.
void and_terms(const UOpPtr& b, std::vector<const UOp*>& out) {
  if (b->op == Op::AND && b->dtype.scalar == Scalar::Bool) {
    for (const auto& s : b->src) and_terms(s, out);
    return;
  }
  out.push_back(b.get());
}

// Every term of c is one of g's.
bool implied_by(const UOpPtr& c, const UOpPtr& g) {
  std::vector<const UOp*> cs, gs;
  and_terms(c, cs), and_terms(g, gs);
  for (const UOp* t : cs)
    if (std::find(gs.begin(), gs.end(), t) == gs.end()) return false;
  return true;
}

UOpPtr fold_select(const Match& m) {
  const UOpPtr &c = m["c"], &load = m["load"], &zero = m["zero"];
  const UOpPtr& index = load->src.at(0);
  if (index->op != Op::INDEX || index->src.size() != 3) return nullptr;  // only a guarded load
  if (!m.ctx<SelectContext>().read_once.contains(load.get())) return nullptr;
  if (!load->dtype.is_float() || zero->const_value() != 0.0 || std::signbit(zero->const_value()))
    return nullptr;
  if (c->dtype != index->src[2]->dtype) return nullptr;  // a per-lane guard against one bool
  const UOpPtr& guard = index->src[2];
  if (implied_by(c, guard)) return load;
  return load->with_src({index->with_src({index->src[0], index->src[1], land(guard, c)})});
}

const PatternMatcher& gated_select_rules() {
  static const PatternMatcher pm(
      "gated_select",
      {{UPat::op(Op::WHERE, {UPat::var("c"), UPat::ops({Op::LOAD}, "load"), UPat::cvar("zero")}),
        fold_select}});
  return pm;
}

}  // namespace

UOpPtr fold_gated_selects(const UOpPtr& kernel) {
  SelectContext ctx;
  std::unordered_map<const UOp*, int> readers;
  for (const auto& n : toposort(kernel))
    for (const auto& s : n->src)
      if (s->op == Op::LOAD) ++readers[s.get()];
  for (const auto& [load, count] : readers)
    if (count == 1) ctx.read_once.insert(load);
  return graph_rewrite(kernel, gated_select_rules(), &ctx);
}

}  // namespace loom
