#pragma once
// The realize engine: schedule -> optimise -> compile (cached) -> run. The one
// place that ties schedule/, codegen/ and runtime/ together.
#include "src/tensor_node.hpp"

#include <memory>
#include <vector>

namespace loom::detail {

// Realizes the nodes' graphs in one schedule and points each node at its buffer.
void realize_nodes(const std::vector<std::shared_ptr<TensorNode>>& nodes);

// A fresh BUFFER node owning zeroed memory of `size` elements of `dtype`.
UOpPtr allocate_buffer(DType dtype, int64_t size);

// Base address of a BUFFER node's memory.
void* buffer_data(const UOpPtr& buffer);

}  // namespace loom::detail
