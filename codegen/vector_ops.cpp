#include "codegen/vector_ops.hpp"

#include <fmt/format.h>

#include <limits>

namespace loom {

UOpPtr broadcast(const UOpPtr& x, int lanes) {
  if (lanes == 1) return x;
  return UOp::make(Op::VECTORIZE, x->dtype.vec(lanes), std::vector<UOpPtr>(static_cast<size_t>(lanes), x));
}

UOpPtr gep(const UOpPtr& v, std::vector<int64_t> lanes) {
  const DType dt = v->dtype.base().vec(static_cast<int>(lanes.size()));
  return UOp::make(Op::GEP, dt, {v}, std::move(lanes));
}

UOpPtr vconst(DType dt, double v) { return broadcast(const_like(dt.base(), v), dt.lanes); }

UOpPtr reduce_identity(Op op, DType dt) {
  const DType s = dt.base();
  switch (op) {
    case Op::ADD: return vconst(dt, 0);
    case Op::MUL: return vconst(dt, 1);
    case Op::MAX:
      if (s.is_float()) return vconst(dt, -std::numeric_limits<double>::infinity());
      if (s.is_unsigned()) return vconst(dt, 0);
      return broadcast(const_int(s, s.scalar == Scalar::Int32 ? std::numeric_limits<int32_t>::min()
                                                              : std::numeric_limits<int64_t>::min()),
                       dt.lanes);
    default:
      throw Error(
          fmt::format("REDUCE {}: the op must be ADD, MUL or MAX, got {}", to_string(dt), op_name(op)));
  }
}

}  // namespace loom
