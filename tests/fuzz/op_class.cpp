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
    case Op::TANH:
    case Op::SIGMOID:
    case Op::ERF:
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

// The coarsest float dtype in the graph: BFloat16, Float16, Float32, else Float64.
DType tolerance_dtype(const UOpPtr& root) {
  DType coarsest = DType::Float64;
  const auto rank = [](DType dt) {
    return dt.scalar == Scalar::BFloat16  ? 3
           : dt.scalar == Scalar::Float16 ? 2
                                          : dt.scalar == Scalar::Float32;
  };
  for (const auto& n : toposort(root))
    if (rank(n->dtype) > rank(coarsest)) coarsest = n->dtype.base();
  return coarsest;
}

bool graph_is_approximate(const std::vector<Tensor>& tensors) {
  for (const auto& t : tensors)
    if (is_approximate(t.node()->uop)) return true;
  return false;
}

}  // namespace loom::fuzz
