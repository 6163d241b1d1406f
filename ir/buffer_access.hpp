#pragma once
// The parts of a read: INDEX(buffer, idx..., [valid]) where buffer is a BUFFER
// or DEFINE_GLOBAL (one linear index) or a BUFFERIZE (one index per axis of
// its shape). Stages that rewrite reads (buffer_removal, dead_axis,
// reduce_collapse) take them apart and rebuild them here.
#include "ir/uop.hpp"

#include <optional>
#include <vector>

namespace loom {

// How many index sources an INDEX into `buffer` has.
size_t index_arity(const UOpPtr& buffer);
// The index sources of `index` (without the buffer and the valid).
std::vector<UOpPtr> index_of(const UOpPtr& index);
// The validity condition of `index`, or null if it has none.
UOpPtr valid_of(const UOpPtr& index);
// INDEX(buffer, idx..., [valid]); no valid when `valid` is null.
UOpPtr make_index(const UOpPtr& buffer, const std::vector<UOpPtr>& idx, const UOpPtr& valid);
// `value` where `valid` holds, else 0 (`value` itself when valid is null).
UOpPtr where_valid(const UOpPtr& valid, const UOpPtr& value);
// a AND b, where null means true.
UOpPtr and_valid(const UOpPtr& a, const UOpPtr& b);

// The value a read of the BUFFERIZE `buffer` at `index` loads, computed there instead
// (the buffer inlined): its value with its ranges replaced by the read's indices, and 0
// where the read's valid does not hold. A realization point's CONTIGUOUS is dropped.
UOpPtr inline_at(const UOpPtr& buffer, const UOpPtr& index);

// The element `index` addresses, as one linear index: a BUFFERIZE's indices
// in row-major order of its shape.
UOpPtr linear_address(const UOpPtr& index);
// The step of `index`'s linear address when `range` steps by one, if constant
// (0: the address does not use it).
std::optional<int64_t> address_stride(const UOpPtr& index, const UOpPtr& range);
// The same for a linear address itself.
std::optional<int64_t> linear_stride(const UOpPtr& address, const UOpPtr& range);

// The nodes `value` computes itself, not those of the buffers it reads: the walk
// stops at each BUFFERIZE (listed, its value not), so a kernel's body without the
// kernels before it.
std::vector<UOpPtr> own_nodes(const UOpPtr& value);

}  // namespace loom
