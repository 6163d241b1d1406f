#pragma once
// A flat hash map from node pointers to dense indices (a node's place in a
// toposort): one array, linear probing, no allocation per entry. The walks
// that run on every realize (toposort, the graph key, the in-place test) look
// up each node a few times, where std::unordered_map's node per entry and its
// modulo by a prime cost more than the walk itself.
#include "ir/uop.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <vector>

namespace loom {

class NodeIndex {
 public:
  static constexpr uint32_t kMissing = UINT32_MAX;

  explicit NodeIndex(size_t expected = 16) { rehash(std::bit_ceil(std::max<size_t>(16, expected * 2))); }

  // The index stored for `p`, or kMissing.
  uint32_t find(const void* p) const {
    for (size_t i = slot(p);; i = (i + 1) & mask_) {
      if (keys_[i] == p) return values_[i];
      if (!keys_[i]) return kMissing;
    }
  }
  // Stores `value` for `p` unless `p` has one; true when it was new.
  bool insert(const void* p, uint32_t value) {
    if (2 * (size_ + 1) > keys_.size()) rehash(2 * keys_.size());
    size_t i = slot(p);
    for (; keys_[i]; i = (i + 1) & mask_)
      if (keys_[i] == p) return false;
    keys_[i] = p;
    values_[i] = value;
    ++size_;
    return true;
  }
  // Replaces the index stored for `p`, which must be there.
  void set(const void* p, uint32_t value) {
    size_t i = slot(p);
    while (keys_[i] != p) i = (i + 1) & mask_;
    values_[i] = value;
  }
  bool contains(const void* p) const { return find(p) != kMissing; }
  size_t size() const { return size_; }

 private:
  size_t slot(const void* p) const {
    // Fibonacci hashing: nodes are 16-byte aligned heap pointers, so the low
    // bits carry nothing and the product's high bits are well spread.
    return static_cast<size_t>((reinterpret_cast<uintptr_t>(p) * 0x9e3779b97f4a7c15ULL) >> shift_) & mask_;
  }
  void rehash(size_t capacity) {
    std::vector<const void*> keys(capacity, nullptr);
    std::vector<uint32_t> values(capacity);
    keys.swap(keys_);
    values.swap(values_);
    mask_ = capacity - 1;
    shift_ = 64 - std::countr_zero(capacity);
    size_ = 0;
    for (size_t i = 0; i < keys.size(); ++i)
      if (keys[i]) insert(keys[i], values[i]);
  }

  std::vector<const void*> keys_;
  std::vector<uint32_t> values_;
  size_t mask_ = 0;
  int shift_ = 64;
  size_t size_ = 0;
};

// toposort (ir/uop.hpp) that also maps each node to its place in the order.
std::vector<UOpPtr> toposort(const std::vector<UOpPtr>& roots, NodeIndex& index);

}  // namespace loom
