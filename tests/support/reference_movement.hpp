#pragma once
// The movement ops on reference tensors. Each output element is copied from
// the input element its multi-index maps to (PAD's border is 0). Each checks
// its arg against the input's shape and throws loom::Error naming the op.
#include "support/reference_tensor.hpp"

#include <cstdint>
#include <vector>

namespace loom::ref {

RefTensor reshape(const RefTensor& in, const RefShape& shape);              // row-major, same element count
RefTensor permute(const RefTensor& in, const std::vector<int64_t>& order);  // out axis a is in axis order[a]
RefTensor expand(const RefTensor& in, const RefShape& shape);               // only axes of size 1 grow
RefTensor pad(const RefTensor& in, const std::vector<int64_t>& bounds);     // flat (lo, hi) pairs, >= 0
RefTensor shrink(const RefTensor& in, const std::vector<int64_t>& bounds);  // flat (start, end) pairs
RefTensor flip(const RefTensor& in, const std::vector<int64_t>& axes);      // reverses each listed axis

}  // namespace loom::ref
