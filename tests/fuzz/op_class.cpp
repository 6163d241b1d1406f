#include "fuzz/op_class.hpp"

#include "src/tensor_node.hpp"

namespace loom::fuzz {

namespace {
bool approximate_node(const UOp& u) {
  if (!u.dtype.is_float()) return false;
  switch (u.op) {
    case Op::EXP:
    case Op::EXP2:
    case Op::LOG2:
    case Op::SIN:
    case Op::COS:
    case Op::POW:
    case Op::MULACC: return true;
    case Op::REDUCE_AXIS: return u.get<ReduceArg>().op != Op::MAX;
    default: return false;
  }
}
}  // namespace

bool is_approximate(const UOpPtr& root) {
  for (const auto& n : toposort(root))
    if (approximate_node(*n)) return true;
  return false;
}

DType tolerance_dtype(const UOpPtr& root) {
  for (const auto& n : toposort(root))
    if (n->dtype.scalar == Scalar::Float32) return DType::Float32;
  return DType::Float64;
}

bool graph_is_approximate(const std::vector<Tensor>& tensors) {
  for (const auto& t : tensors)
    if (is_approximate(t.node()->uop)) return true;
  return false;
}

}  // namespace loom::fuzz
