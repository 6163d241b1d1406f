#pragma once
// What a loom::Tensor handle points at: the tensor's current UOp. Realizing
// swaps it for a view of a BUFFER; copies of the handle share the node.
#include "ir/uop.hpp"

#include <loom/tensor.hpp>

namespace loom::detail {

struct TensorNode {
  UOpPtr uop;
};

inline Tensor make_tensor(UOpPtr uop) {
  return Tensor(std::make_shared<TensorNode>(TensorNode{std::move(uop)}));
}

}  // namespace loom::detail
