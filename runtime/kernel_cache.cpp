#include "runtime/kernel_cache.hpp"

#include <loom/error.hpp>

#include <algorithm>
#include <mutex>

namespace loom {

namespace {
size_t text_bytes(const std::string& s) { return s.capacity() > 15 ? s.capacity() + 1 : 0; }
}  // namespace

size_t footprint_bytes(const CompiledKernel& k) {
  std::vector<UOpPtr> roots;
  for (const UOpPtr& root : {k.ast, k.extent})
    if (root) roots.push_back(root);
  return sizeof(CompiledKernel) + (k.code ? k.code->footprint_bytes() : 0) + graph_bytes(roots) +
         text_bytes(k.name) + text_bytes(k.options) + text_bytes(k.source) + text_bytes(k.optimized_ir) +
         text_bytes(k.linear) + text_bytes(k.assembly);
}

std::shared_ptr<const CompiledKernel> KernelCache::find(const UOpPtr& ast, const std::string& options) const {
  std::shared_lock lock(mu_);
  auto it = entries_.find(Key{ast.get(), options});
  if (it == entries_.end()) return nullptr;
  it->second->used.store(clock_.fetch_add(1, std::memory_order_relaxed), std::memory_order_relaxed);
  return it->second->kernel;
}

std::shared_ptr<const CompiledKernel> KernelCache::insert(CompiledKernel kernel) {
  if (!kernel.ast) throw Error("KernelCache::insert: kernel '" + kernel.name + "' has no AST to key it by");
  if (!kernel.fn) throw Error("KernelCache::insert: kernel '" + kernel.name + "' has no compiled function");
  Key key{kernel.ast.get(), kernel.options};
  auto entry = std::make_unique<Entry>();
  entry->bytes = footprint_bytes(kernel);
  entry->kernel = std::make_shared<const CompiledKernel>(std::move(kernel));
  std::vector<std::unique_ptr<Entry>> evicted;  // freed after the lock is released
  std::unique_lock lock(mu_);
  auto [it, fresh] = entries_.try_emplace(std::move(key), std::move(entry));
  it->second->used.store(clock_.fetch_add(1, std::memory_order_relaxed), std::memory_order_relaxed);
  if (fresh) {
    bytes_ += it->second->bytes;
    evict_locked(it->second.get(), evicted);
  }
  auto stored = it->second->kernel;
  lock.unlock();
  return stored;
}

// Evicts down to 7/8 of the limit, so a cache at its limit sorts its entries
// once per several inserts rather than on each.
void KernelCache::evict_locked(const Entry* keep, std::vector<std::unique_ptr<Entry>>& out) {
  const size_t limit = limit_.load(std::memory_order_relaxed);
  if (bytes_ <= limit) return;
  const size_t target = limit / 8 * 7;
  std::vector<Entries::iterator> order;  // least recently used first
  for (auto it = entries_.begin(); it != entries_.end(); ++it)
    if (it->second.get() != keep) order.push_back(it);
  std::sort(order.begin(), order.end(), [](const auto& x, const auto& y) {
    return x->second->used.load(std::memory_order_relaxed) < y->second->used.load(std::memory_order_relaxed);
  });
  for (auto it : order) {
    if (bytes_ <= target) break;
    bytes_ -= it->second->bytes;
    out.push_back(std::move(it->second));
    entries_.erase(it);
  }
}

size_t KernelCache::size() const {
  std::shared_lock lock(mu_);
  return entries_.size();
}

size_t KernelCache::bytes() const {
  std::shared_lock lock(mu_);
  return bytes_;
}

size_t KernelCache::limit() const { return limit_.load(std::memory_order_relaxed); }

void KernelCache::set_limit(size_t bytes) {
  std::vector<std::unique_ptr<Entry>> evicted;
  std::unique_lock lock(mu_);
  limit_ = bytes;
  evict_locked(nullptr, evicted);
  lock.unlock();
}

void KernelCache::clear() {
  Entries dropped;
  {
    std::unique_lock lock(mu_);
    dropped.swap(entries_);
    bytes_ = 0;
  }
  // `dropped` dies here, outside the lock: freeing a large AST and its code takes a while.
}

KernelCache& kernel_cache() {
  static KernelCache* cache = new KernelCache();  // never destroyed: entries hold UOps
  return *cache;
}

}  // namespace loom
