#pragma once
// The realize engine: schedule -> optimise -> compile (cached) -> run. The one
// place that ties schedule/, codegen/ and runtime/ together.
#include "src/tensor_node.hpp"

#include <memory>
#include <vector>

namespace loom::detail {

// Realizes the nodes' graphs in one schedule and points each node at its buffer.
// A node holding ASSIGN(view, value) gets `value` written into the view's own
// buffer unless something outliving the realize can still read the old value
// there (src/in_place.hpp; copy on write then), so graphs built before an
// assign keep seeing the old value.
void realize_nodes(const std::vector<std::shared_ptr<TensorNode>>& nodes);

// A fresh BUFFER node owning memory of `size` elements of `dtype`: zeroed, or
// left as it is for a kernel output that the kernel writes whole.
UOpPtr allocate_buffer(DType dtype, int64_t size, bool zeroed = true);

// Base address of a BUFFER node's memory.
void* buffer_data(const UOpPtr& buffer);

}  // namespace loom::detail
