#include "schedule/separate_products.hpp"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

namespace loom {

namespace {

// A float sum of a product whose result is a matrix (two or more axes past size 1).
bool is_matrix_product(const UOp& x) {
  if (x.op != Op::REDUCE_AXIS || x.get<ReduceArg>().op != Op::ADD || !x.dtype.is_float()) return false;
  if (x.src.at(0)->op != Op::MUL) return false;
  const auto& shape = x.shape();
  return shape && std::count_if(shape->begin(), shape->end(), [](int64_t n) { return n > 1; }) >= 2;
}

// The matrix products `value` computes in its own kernel, in the order met: reached
// through ALU ops, casts and movement ops other than EXPAND that have no other consumer
// (a node read twice is a buffer or computed in each reader: either way not this
// value's alone; relu's mask reads the forward product's relu, its buffer).
std::vector<UOpPtr> fused_products(const UOpPtr& value, const std::unordered_map<const UOp*, int>& readers) {
  constexpr size_t kMaxVisited = 256;  // a walk's bound: a real cell has a handful of nodes
  std::vector<UOpPtr> out;
  std::unordered_set<const UOp*> seen;
  std::vector<UOpPtr> stack{value};
  while (!stack.empty() && seen.size() < kMaxVisited) {
    const UOpPtr u = stack.back();
    stack.pop_back();
    if (!seen.insert(u.get()).second) continue;
    if (u != value && readers.at(u.get()) > 1) continue;
    if (is_matrix_product(*u)) {
      out.push_back(u);
      continue;
    }
    if (!is_alu(u->op) && u->op != Op::CAST && (!is_movement(u->op) || u->op == Op::EXPAND)) continue;
    for (auto it = u->src.rbegin(); it != u->src.rend(); ++it) stack.push_back(*it);
  }
  return out;
}

// At the SINK, once for the whole graph: the readers of each node, then every ALU
// node's products but its first realized.
UOpPtr separate(const Match& m) {
  const UOpPtr& sink = m.root();
  const std::vector<UOpPtr> nodes = toposort(sink);
  std::unordered_map<const UOp*, int> readers;
  for (const UOpPtr& n : nodes)
    for (const UOpPtr& s : n->src) ++readers[s.get()];
  std::vector<std::pair<UOpPtr, UOpPtr>> realized;
  std::unordered_set<const UOp*> done;
  for (const UOpPtr& n : nodes) {
    if (!is_alu(n->op)) continue;
    const std::vector<UOpPtr> products = fused_products(n, readers);
    for (size_t i = 1; i < products.size(); ++i)
      if (done.insert(products[i].get()).second)
        realized.emplace_back(products[i], UOp::make(Op::CONTIGUOUS, products[i]->dtype, {products[i]}));
  }
  return realized.empty() ? nullptr : substitute(sink, realized);
}

}  // namespace

const PatternMatcher& separate_products() {
  static const PatternMatcher pm("separate_products", {{UPat::ops({Op::SINK}), separate}});
  return pm;
}

}  // namespace loom
