#pragma once
// The schedule cache: GraphKey (structure with buffers by position, the
// scheduling and codegen flags, the in-place decisions) -> the plan made for it.
// A hit skips rangeify, every stage, the kernel split and (while the kernel
// cache holds the kernels) all compiling. Bounded: the least recently used plan
// is dropped past kCapacity plans; loom::empty_cache drops them all. A plan
// holds its kernels' ASTs, never their code. Thread-safe.
#include "src/graph_key.hpp"
#include "src/plan.hpp"

#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace loom::detail {

class ScheduleCache {
 public:
  static constexpr size_t kCapacity = 4096;

  std::shared_ptr<const Plan> find(const GraphKey& key);
  // Stores `plan` under `key` unless another thread stored one first; returns the stored plan.
  std::shared_ptr<const Plan> insert(const GraphKey& key, std::shared_ptr<const Plan> plan);
  size_t size() const;
  void clear();

 private:
  using Entry = std::pair<GraphKey, std::shared_ptr<const Plan>>;
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // most recently used first
  std::unordered_map<GraphKey, std::list<Entry>::iterator, GraphKeyHash> index_;
};

ScheduleCache& schedule_cache();

}  // namespace loom::detail
