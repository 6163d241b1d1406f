#pragma once
// The structural key of a tensor graph with its buffers abstracted: each BUFFER
// counts as its position (0, 1, ... in order of first appearance in the
// graph's toposort), its dtype and its size, never its id or its memory. Two
// realizes of one computation over new buffers of the same shapes get the same
// key, so the schedule cache (src/schedule_cache.hpp) can hand back the plan
// made the first time. docs/pipeline.md ("Schedule cache") documents the key.
#include "ir/key_hasher.hpp"
#include "ir/node_index.hpp"
#include "ir/uop.hpp"

#include <cstdint>
#include <string_view>
#include <vector>

namespace loom::detail {

// 128 bits (ir/key_hasher.hpp): a hit runs a cached plan without comparing
// graphs, so a collision must be out of reach.
using GraphKey = Key128;
using GraphKeyHash = Key128Hash;
using loom::KeyHasher;

// Built by one toposort, which the realize's other walks (the pending assigns,
// the in-place test) share instead of sorting the graph again.
struct GraphSignature {
  GraphKey key;                     // the targets' structure, buffers by position
  std::vector<UOpPtr> nodes;        // toposort of the targets
  NodeIndex index;                  // node -> its index in `nodes`
  std::vector<GraphKey> node_keys;  // per node of `nodes`: its structure, buffers by position
  std::vector<uint32_t> input;      // position -> index in `nodes` of that BUFFER
  const UOp* symbolic = nullptr;    // the first node whose sizes are symbolic (or a BIND), if any
  const UOpPtr& buffer(size_t position) const { return nodes[input[position]]; }
  size_t inputs() const { return input.size(); }
  // The position of BUFFER `buffer` in this graph, or -1.
  int64_t position_of(const UOp* buffer) const;
  // The key of `targets`, nodes of this graph: their keys in order.
  GraphKey key_of(const std::vector<UOpPtr>& targets) const;
};

GraphSignature sign_graph(const std::vector<UOpPtr>& targets);

}  // namespace loom::detail
