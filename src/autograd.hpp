#pragma once
// Autodiff state around the tensors (src/autograd.cpp): which nodes are
// leaves, which buffers keep the graph they were computed from, and what the
// engine must do about them when it realizes.
#include "src/tensor_node.hpp"

#include <memory>
#include <utility>
#include <vector>

namespace loom::detail {

// The graphs to keep behind tensors that are about to be realized.
using GraphsToKeep = std::vector<std::pair<std::shared_ptr<TensorNode>, UOpPtr>>;

// Called by the engine before it realizes `nodes`. Adds the still-lazy tensors
// that backward() ran on, so the schedule that computes their gradients
// computes them too (reading the loss after the step costs nothing), and
// returns the graph of each tensor that depends on a leaf.
GraphsToKeep prepare_realize(std::vector<std::shared_ptr<TensorNode>>& nodes);
// Called after: each kept graph now stands behind its tensor's buffer, for as
// long as that buffer lives, so backward() still finds the leaves behind it.
void keep_graphs(const GraphsToKeep& kept);

// `view`'s buffer gets a new value (assign): the graph behind it is dropped.
void forget_graph_behind(const UOpPtr& view);

}  // namespace loom::detail
