#pragma once
// What a loom::Tensor handle points at: the tensor's current UOp. Realizing
// swaps it for a view of a BUFFER; copies of the handle share the node.
#include "ir/uop.hpp"

#include <loom/tensor.hpp>

#include <memory>
#include <mutex>
#include <optional>
#include <vector>

namespace loom::detail {

struct GradientBuckets;  // src/data_parallel.hpp
struct TensorNode;

// One movement step from a view's base towards the view (src/tensor_views.hpp).
struct ViewStep {
  Op op;  // RESHAPE, EXPAND, PERMUTE, SHRINK, PAD (a stepped slice's) or DETACH
  Arg arg;
};
// What a view tensor views: its base and the steps from the base's value to its own.
struct ViewOf {
  std::shared_ptr<TensorNode> base;
  std::vector<ViewStep> steps;
};

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
  // Made by a view op (reshape, permute, slice, ...): an assign writes through
  // to the base, and the view follows the base's value (src/tensor_views.hpp).
  std::optional<ViewOf> view;
  // A base: its live views, rebuilt whenever its value changes. Guarded by
  // views_mutex, since views of one tensor (a parameter) may be made on several threads.
  std::vector<std::weak_ptr<TensorNode>> views;
  std::mutex views_mutex;
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
