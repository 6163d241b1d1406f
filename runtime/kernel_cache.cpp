#include "runtime/kernel_cache.hpp"

#include <loom/error.hpp>

#include <mutex>

namespace loom {

std::shared_ptr<const CompiledKernel> KernelCache::find(const UOpPtr& ast, const std::string& options) const {
  std::shared_lock lock(mu_);
  auto it = entries_.find(Key{ast.get(), options});
  return it == entries_.end() ? nullptr : it->second;
}

std::shared_ptr<const CompiledKernel> KernelCache::insert(CompiledKernel kernel) {
  if (!kernel.ast) throw Error("KernelCache::insert: kernel '" + kernel.name + "' has no AST to key it by");
  if (!kernel.fn) throw Error("KernelCache::insert: kernel '" + kernel.name + "' has no compiled function");
  Key key{kernel.ast.get(), kernel.options};
  auto entry = std::make_shared<const CompiledKernel>(std::move(kernel));
  std::unique_lock lock(mu_);
  return entries_.try_emplace(std::move(key), std::move(entry)).first->second;
}

size_t KernelCache::size() const {
  std::shared_lock lock(mu_);
  return entries_.size();
}

void KernelCache::clear() {
  decltype(entries_) dropped;
  {
    std::unique_lock lock(mu_);
    dropped.swap(entries_);
  }
  // `dropped` dies here, outside the lock: freeing a large AST takes a while.
}

KernelCache& kernel_cache() {
  static KernelCache* cache = new KernelCache();  // never destroyed: entries hold UOps
  return *cache;
}

}  // namespace loom
