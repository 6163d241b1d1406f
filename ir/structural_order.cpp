// A deterministic order on nodes that depends on structure only (never on
// addresses), so the simplifier's canonical operand order is the same from run
// to run and equal expressions meet as one hash-consed node.
#include "ir/symbolic.hpp"

#include <bit>

namespace loom {

namespace {
template <class T>
int three_way(const T& a, const T& b) {
  return a < b ? -1 : b < a ? 1 : 0;
}

// Variables first, then ranges, then every other op in enum order, constants last
// (so a constant operand of a commutative op is always its second source).
int rank(Op op) {
  if (op == Op::DEFINE_VAR) return 0;
  if (op == Op::RANGE) return 1;
  if (op == Op::CONST) return kNumOps + 2;
  return 2 + static_cast<int>(op);
}

int const_compare(const UOp& a, const UOp& b) {
  const auto* x = std::get_if<int64_t>(&a.arg);
  const auto* y = std::get_if<int64_t>(&b.arg);
  if (x && y) return three_way(*x, *y);
  if (int c = three_way(a.const_value(), b.const_value())) return c;
  return three_way(std::bit_cast<uint64_t>(a.const_value()), std::bit_cast<uint64_t>(b.const_value()));
}

// Readable order among leaves of one op: variables by name, ranges by axis id.
int leaf_compare(const UOp& a, const UOp& b) {
  switch (a.op) {
    case Op::DEFINE_VAR: {
      const auto &x = a.get<VarArg>(), &y = b.get<VarArg>();
      if (int c = three_way(x.name, y.name)) return c;
      if (int c = three_way(x.min, y.min)) return c;
      return three_way(x.max, y.max);
    }
    case Op::RANGE: {
      const auto &x = a.get<AxisArg>(), &y = b.get<AxisArg>();
      if (int c = three_way(x.id, y.id)) return c;
      return three_way(static_cast<int>(x.kind), static_cast<int>(y.kind));
    }
    case Op::CONST: return const_compare(a, b);
    default: return 0;
  }
}

int dtype_compare(DType a, DType b) {
  if (int c = three_way(static_cast<int>(a.scalar), static_cast<int>(b.scalar))) return c;
  if (int c = three_way(a.lanes, b.lanes)) return c;
  return three_way(a.ptr, b.ptr);
}

// Sources are compared recursively for a few levels (readable orders for small
// index expressions); below that the structural hash decides, which keeps the
// cost bounded on shared DAGs. Only if two different nodes collide in hash does
// the recursion go all the way down.
constexpr int kReadableDepth = 6;

int compare(const UOp* a, const UOp* b, int depth) {
  if (a == b) return 0;
  if (int c = three_way(rank(a->op), rank(b->op))) return c;
  if (int c = leaf_compare(*a, *b)) return c;
  if (int c = dtype_compare(a->dtype, b->dtype)) return c;
  if (int c = three_way(a->src.size(), b->src.size())) return c;
  if (depth >= kReadableDepth && a->hash() != b->hash()) return three_way(a->hash(), b->hash());
  for (size_t i = 0; i < a->src.size(); ++i)
    if (int c = compare(a->src[i].get(), b->src[i].get(), depth + 1)) return c;
  return three_way(arg_hash(a->arg), arg_hash(b->arg));
}
}  // namespace

int structural_compare(const UOpPtr& a, const UOpPtr& b) { return compare(a.get(), b.get(), 0); }

}  // namespace loom
