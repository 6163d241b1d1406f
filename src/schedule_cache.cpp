#include "src/schedule_cache.hpp"

#include "runtime/buffer.hpp"

namespace loom::detail {

std::shared_ptr<const Plan> ScheduleCache::find(const GraphKey& key) {
  std::lock_guard lock(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->second;
}

std::shared_ptr<const Plan> ScheduleCache::insert(const GraphKey& key, std::shared_ptr<const Plan> plan) {
  std::shared_ptr<const Plan> dropped;  // freed outside the lock
  std::lock_guard lock(mu_);
  if (auto it = index_.find(key); it != index_.end()) return it->second->second;
  lru_.emplace_front(key, std::move(plan));
  index_.emplace(key, lru_.begin());
  if (lru_.size() > kCapacity) {
    dropped = std::move(lru_.back().second);
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
  return lru_.front().second;
}

size_t ScheduleCache::size() const {
  std::lock_guard lock(mu_);
  return lru_.size();
}

void ScheduleCache::clear() {
  std::list<Entry> dropped;
  std::lock_guard lock(mu_);
  index_.clear();
  dropped.swap(lru_);
}

ScheduleCache& schedule_cache() {
  // Never destroyed: plans hold UOps. Its plans are kept only for reuse, so
  // loom::empty_cache drops them like any other spare holder's.
  static ScheduleCache* cache = [] {
    auto* c = new ScheduleCache();
    add_spare_holder([c] { c->clear(); });
    return c;
  }();
  return *cache;
}

}  // namespace loom::detail
