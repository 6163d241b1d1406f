#pragma once
// The structural key of a tensor graph with its buffers abstracted: each BUFFER
// counts as its position (0, 1, ... in order of first appearance in the
// graph's toposort), its dtype and its size, never its id or its memory. Two
// realizes of one computation over new buffers of the same shapes get the same
// key, so the schedule cache (src/schedule_cache.hpp) can hand back the plan
// made the first time. docs/pipeline.md ("Schedule cache") documents the key.
#include "ir/uop.hpp"

#include <cstdint>
#include <string_view>
#include <vector>

namespace loom::detail {

// 128 bits: a hit runs a cached plan without comparing graphs, so a collision
// must be out of reach (two 64-bit lanes mixed independently, not one hash twice).
struct GraphKey {
  uint64_t a = 0, b = 0;
  friend bool operator==(const GraphKey&, const GraphKey&) = default;
};
struct GraphKeyHash {
  size_t operator()(const GraphKey& k) const {
    return static_cast<size_t>(k.a ^ (k.b * 0x9e3779b97f4a7c15ULL));
  }
};

// Feeds words, args and text into a GraphKey.
class KeyHasher {
 public:
  explicit KeyHasher(GraphKey seed = {0x6c6f6f6d, 0x6b6579}) : k_(seed) {}
  KeyHasher& word(uint64_t v);
  KeyHasher& text(std::string_view s);
  KeyHasher& arg(const Arg& a);
  GraphKey key() const { return k_; }

 private:
  GraphKey k_;
};

struct GraphSignature {
  GraphKey key;                 // the targets' structure, buffers by position
  std::vector<UOpPtr> nodes;    // toposort of the targets
  std::vector<uint32_t> input;  // position -> index in `nodes` of that BUFFER
  const UOpPtr& buffer(size_t position) const { return nodes[input[position]]; }
  size_t inputs() const { return input.size(); }
  // The position of BUFFER `buffer` in this graph, or -1.
  int64_t position_of(const UOp* buffer) const;
};

GraphSignature sign_graph(const std::vector<UOpPtr>& targets);

}  // namespace loom::detail
