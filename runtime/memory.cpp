// loom::empty_cache (include/loom/memory.hpp) and the registry of holders it
// releases: what loom keeps only to go faster next time is given back, so a
// process returns to about its starting footprint (docs/design.md §7, "What
// memory is held"). Live tensors, and kernels a Capture or a run holds, stay.
#include "ir/uop.hpp"
#include "runtime/buffer.hpp"
#include "runtime/jit.hpp"
#include "runtime/kernel_cache.hpp"

#include <loom/memory.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>

#include <malloc.h>

namespace loom {

namespace {
// The spare holders (a documented thread-safe registry): id -> release function.
struct SpareHolders {
  std::mutex mu;
  uint64_t next = 1;
  std::map<uint64_t, std::function<void()>> release;
  static SpareHolders& get() {
    static SpareHolders* holders = new SpareHolders();  // never destroyed: Captures may outlive statics
    return *holders;
  }
};
}  // namespace

uint64_t add_spare_holder(std::function<void()> release) {
  SpareHolders& h = SpareHolders::get();
  std::lock_guard lock(h.mu);
  h.release.emplace(h.next, std::move(release));
  return h.next++;
}

void remove_spare_holder(uint64_t id) {
  SpareHolders& h = SpareHolders::get();
  std::lock_guard lock(h.mu);
  h.release.erase(id);
}

// In this order: the plans first (they hold kernel ASTs), then the kernels
// (their ASTs, texts and code), so every node only a cache held has died when
// the intern table is rebuilt to fit the rest; last, the freed heap pages go
// back to the system (glibc keeps them otherwise).
void empty_cache() {
  {
    SpareHolders& h = SpareHolders::get();
    std::lock_guard lock(h.mu);
    for (const auto& [id, release] : h.release) release();
  }
  kernel_cache().clear();
  Jit::release_unused();
  trim_buffer_pool();
  trim_intern_table();
  malloc_trim(0);
}

}  // namespace loom
