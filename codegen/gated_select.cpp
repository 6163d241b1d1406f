// A select an access's guard can express folded into the guard.
//
// A guarded LOAD reads 0 where its guard is false (docs/ir.md), so a select of it
// against zero only narrows the guard: codegen then issues one masked load, not a
// masked load and a masked move. A padded conv's x is read so in every step of its
// sum (its guard the padding's bounds and, once the optimiser pads the tile, the
// tile's lanes; the select the padding's bounds).
//
//   Before:  WHERE(c, LOAD(INDEX(buf, i, g)), 0.0)
//   After:   LOAD(INDEX(buf, i, g AND c))        LOAD(INDEX(buf, i, g)) when c is a term of g
//
// Only a load nothing else reads (another reader would then need a second load) and only
// +0.0 (the value a guarded load reads).
//
// A guarded STORE is skipped where its guard is false, so a store of a select that
// keeps the element's own value where c fails stores only where c holds: an in-place
// update of a few rows (a KV cache's new row, `x.assign(where(m, v, x))`) writes those
// rows, not the whole buffer. A half's own value is the same through its widening.
//
//   Before:  STORE(INDEX(buf, i, g), WHERE(c, x, LOAD(INDEX(buf, i, g))))
//   After:   STORE(INDEX(buf, i, g AND c), x)
//   Before:  STORE(INDEX(buf, i, g), CAST(WHERE(NOT c, CAST(LOAD(INDEX(buf, i, g))), y)))
//   After:   STORE(INDEX(buf, i, g AND c), CAST(y))
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

// `index` guarded also by `c`; null where the guard is per lane and c is not.
UOpPtr narrowed(const UOpPtr& index, const UOpPtr& c) {
  if (index->op != Op::INDEX) return nullptr;
  if (index->src.size() < 3) return index->with_src({index->src[0], index->src[1], c});
  const UOpPtr& guard = index->src[2];
  if (c->dtype != guard->dtype) return nullptr;
  return implied_by(c, guard) ? index : index->with_src({index->src[0], index->src[1], land(guard, c)});
}

UOpPtr fold_select(const Match& m) {
  const UOpPtr &c = m["c"], &load = m["load"], &zero = m["zero"];
  const UOpPtr& index = load->src.at(0);
  if (index->op != Op::INDEX || index->src.size() != 3) return nullptr;  // only a guarded load
  if (!m.ctx<SelectContext>().read_once.contains(load.get())) return nullptr;
  if (!load->dtype.is_float() || zero->const_value() != 0.0 || std::signbit(zero->const_value()))
    return nullptr;
  const UOpPtr narrower = narrowed(index, c);
  if (!narrower) return nullptr;
  return narrower == index ? load : load->with_src({narrower});
}

UOpPtr negation(const UOpPtr& c) { return alu(Op::XOR, {c, const_int(c->dtype, 1)}); }

// A widened half's round trip (CAST to Float32 and back) is exact.
bool widened(const UOpPtr& narrow, const UOpPtr& wide) {
  return narrow->dtype.is_half() && wide->dtype == DType::Float32;
}

// STORE(idx, WHERE(c, x, LOAD(idx))) stores x where c holds and nothing elsewhere.
UOpPtr store_changed(const UOpPtr& store, const UOpPtr& c, const UOpPtr& x) {
  const UOpPtr index = narrowed(store->src[0], c);
  return index ? store->with_src({index, x}) : nullptr;
}

const PatternMatcher& gated_select_rules() {
  using P = UPat;
  static const P idx = P::var("idx"), own = P::op(Op::LOAD, {idx}, "own");  // the stored element's own value
  static const P own_wide = P::op(Op::CAST, {own}, "wide");
  static const PatternMatcher pm(
      "gated_select",
      {{P::op(Op::WHERE, {P::var("c"), P::ops({Op::LOAD}, "load"), P::cvar("zero")}), fold_select},
       {P::op(Op::STORE, {idx, P::op(Op::WHERE, {P::var("c"), P::var("x"), own})}, "store"),
        [](const Match& m) { return store_changed(m["store"], m["c"], m["x"]); }},
       {P::op(Op::STORE, {idx, P::op(Op::WHERE, {P::var("c"), own, P::var("y")})}, "store"),
        [](const Match& m) { return store_changed(m["store"], negation(m["c"]), m["y"]); }},
       {P::op(Op::STORE, {idx, P::op(Op::CAST, {P::op(Op::WHERE, {P::var("c"), P::var("x"), own_wide})})},
              "store"),
        [](const Match& m) {  // guard: the round trip is exact
          if (!widened(m["own"], m["wide"])) return UOpPtr{};
          return store_changed(m["store"], m["c"], cast(m["x"], m["own"]->dtype));
        }},
       {P::op(Op::STORE, {idx, P::op(Op::CAST, {P::op(Op::WHERE, {P::var("c"), own_wide, P::var("y")})})},
              "store"),
        [](const Match& m) {  // guard: the round trip is exact
          if (!widened(m["own"], m["wide"])) return UOpPtr{};
          return store_changed(m["store"], negation(m["c"]), cast(m["y"], m["own"]->dtype));
        }}});
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
