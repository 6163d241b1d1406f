#pragma once
// Facts derived once per node at construction: the tensor-level shape
// (ir/shape.cpp) and the integer range [vmin, vmax] (ir/bounds.cpp).
#include "ir/uop.hpp"

#include <utility>

namespace loom {

std::optional<Shape> infer_shape(Op op, const std::vector<UOpPtr>& src, const Arg& arg);
std::pair<int64_t, int64_t> infer_bounds(Op op, DType dtype, const std::vector<UOpPtr>& src, const Arg& arg);

}  // namespace loom
