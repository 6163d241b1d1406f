// A deterministic order on nodes that depends on structure only (never on
// addresses), so the simplifier's canonical operand order is the same from run
// to run and equal expressions meet as one hash-consed node.
#include "ir/symbolic.hpp"

#include <bit>
#include <type_traits>

namespace loom {

namespace {
template <class T>
int three_way(const T& a, const T& b) {
  return a < b ? -1 : b < a ? 1 : 0;
}

// Variables first, then ranges, then every other op in enum order, constants last
// (so a constant operand of a commutative op is always its second source).
int rank(Op op) {
  if (op == Op::DEFINE_VAR || op == Op::BIND) return 0;
  if (op == Op::RANGE) return 1;
  if (op == Op::CONST) return kNumOps + 2;
  return 2 + static_cast<int>(op);
}

int double_compare(double a, double b) {
  if (int c = three_way(a, b)) return c;
  return three_way(std::bit_cast<uint64_t>(a), std::bit_cast<uint64_t>(b));  // -0.0 and 0.0, NaNs
}

// Args compared by value: variables by name, ranges by axis id, buffers by slot.
int arg_compare(const Arg& a, const Arg& b) {
  if (int c = three_way(a.index(), b.index())) return c;
  return std::visit(
      [&b](const auto& x) -> int {
        using T = std::decay_t<decltype(x)>;
        const T& y = std::get<T>(b);
        if constexpr (std::is_same_v<T, std::monostate>)
          return 0;
        else if constexpr (std::is_same_v<T, double>)
          return double_compare(x, y);
        else if constexpr (std::is_same_v<T, AxisArg>) {
          if (int c = three_way(x.id, y.id)) return c;
          return three_way(static_cast<int>(x.kind), static_cast<int>(y.kind));
        } else if constexpr (std::is_same_v<T, VarArg>) {
          if (int c = three_way(x.name, y.name)) return c;
          if (int c = three_way(x.min, y.min)) return c;
          return three_way(x.max, y.max);
        } else if constexpr (std::is_same_v<T, ReduceArg>) {
          if (int c = three_way(static_cast<int>(x.op), static_cast<int>(y.op))) return c;
          return three_way(x.axes, y.axes);
        } else if constexpr (std::is_same_v<T, Shape>) {
          if (int c = three_way(x.size(), y.size())) return c;
          for (size_t i = 0; i < x.size(); ++i) {  // numbers first, by value; then expressions by structure
            if (int c = three_way(x[i].is_symbolic(), y[i].is_symbolic())) return c;
            if (!x[i].is_symbolic()) {
              if (int c = three_way(x[i].value(), y[i].value())) return c;
            } else if (int c = structural_compare(x[i].expr(), y[i].expr())) {
              return c;
            }
          }
          return 0;
        } else
          return three_way(x, y);  // int64, list of ints, string
      },
      a);
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
  if (int c = arg_compare(a->arg, b->arg)) return c;
  if (int c = dtype_compare(a->dtype, b->dtype)) return c;
  if (int c = three_way(a->src.size(), b->src.size())) return c;
  if (depth >= kReadableDepth && a->hash() != b->hash()) return three_way(a->hash(), b->hash());
  for (size_t i = 0; i < a->src.size(); ++i)
    if (int c = compare(a->src[i].get(), b->src[i].get(), depth + 1)) return c;
  return 0;  // same op, arg, dtype and sources: interning made them one node
}
}  // namespace

int structural_compare(const UOpPtr& a, const UOpPtr& b) { return compare(a.get(), b.get(), 0); }

}  // namespace loom
