#pragma once
// Which assigns of a realize may write into the tensor's own buffer.
//
// An assign overwrites its buffer in place only when nothing that outlives the
// realize can still read the old value there: no tensor, graph or alias outside
// the graph being realized holds a node that (transitively) reads the buffer.
// Readers inside the schedule are fine: kernel_split runs them before the write.
// Otherwise the assign writes a fresh buffer (copy on write, at no extra cost).
#include "ir/uop.hpp"

#include <vector>

namespace loom::detail {

// For each target: the BUFFER an ASSIGN target may be written into, or null.
// Precondition: each target is held by `targets` and by exactly one tensor
// being realized; any other holder counts as a later reader.
std::vector<UOpPtr> in_place_buffers(const std::vector<UOpPtr>& targets);

}  // namespace loom::detail
