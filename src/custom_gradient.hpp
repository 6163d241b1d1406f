#pragma once
// Composites that give their own gradient as Tensor-level functions, for when the rules of
// their primitives would build a slow backward (a convolution's window view differentiates
// into a scatter: src/nn_functional_conv.cpp). The front end builds the forward from
// primitives as usual and then declares its inputs and backward; the walk of src/gradient.cpp
// uses that backward for the node instead of going through the primitives. The declaration
// is keyed by the output's node (weakly: it dies with the node), and hash-consing makes any
// graph equal to it the same node, i.e. the same function, so the backward stays right for
// every path that reaches the node. docs/design.md ("Front end and gradient") describes it.
#include "ir/uop.hpp"

#include <loom/tensor.hpp>

#include <functional>
#include <optional>
#include <vector>

namespace loom::detail {

// Given the inputs and the gradient of the output (the output's shape), the gradient of each
// input (its shape and dtype; an undefined Tensor for none).
using CustomBackward =
    std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs, const Tensor& grad)>;

// Declares that `output`, computed from `inputs` (every float input it depends on), has the
// gradient `backward`, and returns `output`. Nothing is declared for an output that is a
// constant, a buffer or detached (NoGrad): there is no graph to differentiate.
Tensor with_gradient(const Tensor& output, const std::vector<Tensor>& inputs, CustomBackward backward);

// The declaration for node `u`, as the walk uses it: the inputs' nodes and the backward
// from a gradient of u's shape to theirs. Empty when none was declared.
struct CustomEdge {
  std::vector<UOpPtr> inputs;
  std::function<std::vector<UOpPtr>(const UOpPtr& grad)> vjp;
};
std::optional<CustomEdge> custom_gradient_of(const UOpPtr& u);

}  // namespace loom::detail
