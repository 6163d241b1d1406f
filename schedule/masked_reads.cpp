#include "schedule/masked_reads.hpp"

#include <cmath>
#include <limits>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace loom {

namespace {

bool index_arithmetic(const UOpPtr& c) {
  static const std::unordered_set<Op> allowed{Op::CONST, Op::RANGE, Op::CAST,  Op::ADD,   Op::SUB,
                                              Op::MUL,   Op::CMPLT, Op::CMPEQ, Op::CMPNE, Op::AND,
                                              Op::OR,    Op::XOR,   Op::WHERE, Op::IDIV,  Op::MOD};
  for (const UOpPtr& u : toposort(c))
    if (!allowed.contains(u->op) || (u->op != Op::RANGE && u->dtype.is_float())) return false;
  return true;
}

// A constant a sum of the reads may skip: ADD's identity 0.0 (either sign: x + -0.0 is x)
// or MAX's -inf.
bool skippable(const UOpPtr& k) {
  if (!k->is_const() || !k->dtype.is_float()) return false;
  const double v = k->const_value();
  return v == 0 || v == -std::numeric_limits<double>::infinity();
}

// Does `c` compare one coordinate with another (k <= q: a triangle), not only with a constant
// (j < n: a panel's padded columns, which its reader reads whole on purpose)?
bool relates_coordinates(const UOpPtr& c) {
  for (const UOpPtr& u : toposort(c))
    if (is_comparison(u->op) && !u->src[0]->ranges().empty() && !u->src[1]->ranges().empty()) return true;
  return false;
}

// The condition and constant of a buffer whose value is WHERE(c, x, K), or none.
struct Mask {
  UOpPtr condition, constant;
};

Mask mask_of(const UOpPtr& buffer) {
  const UOpPtr& marked = buffer->src[0];  // a realization point's CONTIGUOUS marker
  UOpPtr value = marked->op == Op::CONTIGUOUS ? marked->src[0] : marked;
  double scale = 1;  // WHERE(c, x, K) * s: the constant is K * s (a gradient's scale)
  if (value->op == Op::MUL && value->src[1]->is_const() && value->src[0]->op == Op::WHERE)
    scale = value->src[1]->const_value(), value = value->src[0];
  if (value->op != Op::WHERE || !value->src[2]->is_const() || !std::isfinite(scale)) return {};
  const UOpPtr constant = const_like(value->dtype, value->src[2]->const_value() * scale);
  if (!skippable(constant)) return {};
  const UOpPtr& c = value->src[0];
  if (c->dtype.lanes != 1 || !index_arithmetic(c) || !relates_coordinates(c)) return {};
  const size_t axes = buffer->get<Shape>().size();
  std::unordered_set<const UOp*> own;
  for (size_t i = 1; i <= axes; ++i) own.insert(buffer->src[i].get());
  for (const UOpPtr& u : toposort(c))
    if (u->op == Op::RANGE && !own.contains(u.get())) return {};
  return {c, constant};
}

// The buffer's condition at the coordinates `index` reads.
UOpPtr condition_at(const UOpPtr& index, const Mask& mask) {
  const UOpPtr& buffer = index->src[0];
  const size_t axes = buffer->get<Shape>().size();
  std::vector<std::pair<UOpPtr, UOpPtr>> at;
  for (size_t i = 1; i <= axes; ++i)
    if (buffer->src[i]->op == Op::RANGE) at.emplace_back(buffer->src[i], index->src[i]);
  return substitute(mask.condition, at);
}

// Is the condition read inside a sum over a range it reads? There the select bounds that
// sum (codegen's reduce_bounds). Elsewhere a select, or a masked load, costs more than the
// loads it would save (docs/performance.md, "Causal blocks skipped").
bool bounds_a_sum(const UOpPtr& condition) {
  for (const UOpPtr& u : toposort(condition))
    if (u->op == Op::RANGE && u->get<AxisArg>().kind == AxisKind::Reduce) return true;
  return false;
}

// A scalar LOAD(INDEX(BUFFERIZE, i0..in)): one coordinate per axis, no guard of its own.
bool reads_whole_buffer(const UOpPtr& u) {
  if (u->op != Op::LOAD || u->dtype.lanes != 1 || u->src[0]->op != Op::INDEX) return false;
  const UOpPtr& index = u->src[0];
  return index->src[0]->op == Op::BUFFERIZE && index->src.size() == index->src[0]->get<Shape>().size() + 1;
}

UOpPtr mask_reads(const Match& m) {
  const UOpPtr& sink = m.root();
  const std::vector<UOpPtr> nodes = toposort(sink);
  std::unordered_map<const UOp*, Mask> masks;
  for (const UOpPtr& u : nodes)
    if (u->op == Op::BUFFERIZE)
      if (Mask mask = mask_of(u); mask.condition) masks.emplace(u.get(), mask);
  if (masks.empty()) return nullptr;
  // Reads masked already, unguarded (the group runs to a fixpoint): the source of a select
  // by their condition.
  std::unordered_set<const UOp*> masked;
  for (const UOpPtr& u : nodes)
    if (u->op == Op::WHERE && reads_whole_buffer(u->src[1]))
      if (const auto it = masks.find(u->src[1]->src[0]->src[0].get());
          it != masks.end() && u->src[2] == it->second.constant &&
          u->src[0] == condition_at(u->src[1]->src[0], it->second))
        masked.insert(u->src[1].get());
  // One walk that rebuilds each node over its rebuilt sources and masks each read: a buffer
  // read inside another's value is rebuilt once, with its reads.
  std::unordered_map<const UOp*, UOpPtr> done;
  for (const UOpPtr& u : nodes) {
    std::vector<UOpPtr> src;
    src.reserve(u->src.size());
    bool rebuilt = false;
    for (const UOpPtr& s : u->src) {
      src.push_back(done.at(s.get()));
      rebuilt |= src.back() != s;
    }
    UOpPtr node = rebuilt ? u->with_src(std::move(src)) : u;
    if (reads_whole_buffer(u) && !masked.contains(u.get()))
      if (const auto it = masks.find(u->src[0]->src[0].get()); it != masks.end())
        if (const UOpPtr condition = condition_at(node->src[0], it->second); bounds_a_sum(condition))
          node = where(condition, node, it->second.constant);
    done.emplace(u.get(), node);
  }
  const UOpPtr out = done.at(sink.get());
  return out == sink ? nullptr : out;
}

}  // namespace

const PatternMatcher& masked_reads() {
  static const PatternMatcher pm("masked_reads", {{UPat::ops({Op::SINK}), mask_reads}});
  return pm;
}

}  // namespace loom
