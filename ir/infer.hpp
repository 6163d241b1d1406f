#pragma once
// Facts derived once per node at construction: the tensor-level shape
// (ir/shape.cpp), the integer range [vmin, vmax] (ir/bounds.cpp) and the open
// ranges (ir/open_ranges.cpp).
#include "ir/uop.hpp"

#include <utility>

namespace loom {

// Throws loom::Error naming the op if the node is malformed (ir/validate.cpp).
void validate_uop(Op op, DType dtype, const std::vector<UOpPtr>& src, const Arg& arg);
std::optional<Shape> infer_shape(Op op, const std::vector<UOpPtr>& src, const Arg& arg);
// Throws loom::Error naming the op if the shape's element count or byte size
// does not fit in int64: no route may build a tensor loom cannot address.
void check_size(Op op, DType dtype, const std::optional<Shape>& shape);
std::pair<int64_t, int64_t> infer_bounds(Op op, DType dtype, const std::vector<UOpPtr>& src, const Arg& arg);
// The ranges open at a node (ir/open_ranges.cpp); `self` is the node being built.
OpenRanges infer_open_ranges(Op op, const std::vector<UOpPtr>& src, const UOp* self);

}  // namespace loom
