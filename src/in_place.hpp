#pragma once
// Which assigns of a realize may write into the tensor's own buffer.
//
// An assign overwrites its buffer in place only when nothing that outlives the
// realize can still read the old value there: no tensor, graph or alias outside
// the graph being realized holds a node that (transitively) reads the buffer.
// Readers inside the schedule are fine: kernel_split runs them before the write.
// Otherwise the assign writes a fresh buffer (copy on write, at no extra cost).
#include "src/graph_key.hpp"
#include "src/tensor_node.hpp"

#include <memory>
#include <vector>

namespace loom::detail {

// For each target: the BUFFER an ASSIGN target may be written into, or null.
// `graph` is the targets' signature (its toposort). Precondition: each target
// is held by `targets` and by exactly one tensor being realized, and each node
// once by `graph`; any other holder counts as a later reader.
std::vector<UOpPtr> in_place_buffers(const std::vector<UOpPtr>& targets, const GraphSignature& graph);

// An assign is realized into its own tensor whenever a realize computes it,
// even when it was reached through another tensor's graph (a cache written by
// assign and read by the output asked for): it then happens in place, as the
// eager op would, instead of going to a fresh buffer the tensor never sees.
// Tensor::assign records the tensor holding each ASSIGN (weakly; thread-safe).
void note_assign(const std::shared_ptr<TensorNode>& holder);
// The live tensors, not already in `pending`, still holding an ASSIGN of
// `graph` (the targets' signature). Cheap when no recorded assign is pending anywhere.
std::vector<std::shared_ptr<TensorNode>> assigns_reached(
    const GraphSignature& graph, const std::vector<std::shared_ptr<TensorNode>>& pending);

// State updates a module made during a forward pass (BatchNorm's running
// statistics): the next realize on this thread, whatever it computes, realizes
// them too, so they join the training step's schedule (and a Capture's
// recording of it) instead of waiting for someone to read them. Per thread,
// like NoGrad; held weakly.
void defer_realize(const std::shared_ptr<TensorNode>& holder);
// The deferred tensors of this thread still alive and not realized; empties the list.
std::vector<std::shared_ptr<TensorNode>> take_deferred();

// The live tensors holding an assign not yet realized into one of `memory`
// (buffers' storage): loom::Capture realizes them before a replay reads it.
std::vector<std::shared_ptr<TensorNode>> assigns_into(const std::vector<const void*>& memory);

}  // namespace loom::detail
