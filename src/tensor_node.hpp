#pragma once
// What a loom::Tensor handle points at: the tensor's current UOp. Realizing
// swaps it for a view of a BUFFER; copies of the handle share the node.
#include "ir/uop.hpp"

#include <loom/tensor.hpp>

#include <memory>

namespace loom::detail {

struct GradientBuckets;  // src/data_parallel.hpp

struct TensorNode {
  explicit TensorNode(UOpPtr u) : uop(std::move(u)) {}
  UOpPtr uop;
  // Autodiff (src/autograd.cpp). A leaf: requires_grad_() was called on it.
  bool requires_grad = false;
  // backward() ran on this tensor: realizing it later keeps no graph behind it.
  bool backward_done = false;
  // A leaf's accumulated gradient (undefined when none).
  Tensor grad;
  // The DataParallel whose buckets average this leaf's gradients across ranks (expired: none).
  std::weak_ptr<const GradientBuckets> data_parallel;
};

// NoGrad guards alive on this thread (src/autograd.cpp).
inline thread_local int no_grad_depth = 0;

// A node made under NoGrad is detached, so no gradient flows through it. A
// constant or a buffer view has no graph to cut.
inline UOpPtr detached_if_no_grad(UOpPtr u) {
  if (no_grad_depth == 0) return u;
  const bool inert = u->op == Op::DETACH || u->op == Op::CONST || u->op == Op::BUFFER ||
                     (u->op == Op::RESHAPE && u->src[0]->op == Op::BUFFER);
  if (inert) return u;
  const DType dt = u->dtype;
  return UOp::make(Op::DETACH, dt, {std::move(u)});
}

inline Tensor make_tensor(UOpPtr uop) {
  return Tensor(std::make_shared<TensorNode>(detached_if_no_grad(std::move(uop))));
}

}  // namespace loom::detail
