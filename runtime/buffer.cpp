#include "runtime/buffer.hpp"

#include "ir/target.hpp"

#include <loom/error.hpp>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

namespace loom {

namespace {
// Whole vectors and lines of the host (Target::buffer_alignment), and at least what the
// kernel ABI promises every buffer (kKernelAbiAlignment): 64 bytes on x86.
size_t alignment() {
  static const auto bytes =
      static_cast<size_t>(std::max(kKernelAbiAlignment, host_target().buffer_alignment()));
  return bytes;
}
constexpr size_t kMaxRequest = size_t{1} << 48;      // beyond any real machine
constexpr size_t kMaxBlocksPerClass = 32;            // bound on each free list
constexpr size_t kMinPoolLimit = size_t{256} << 20;  // the default bound on all free lists, at least

// The host's transparent huge page (Target::huge_page_bytes, 2 MiB on x86): memory
// is the host's whatever LOOM_TARGET the kernels are compiled for.
size_t huge_page() {
  static const auto bytes = static_cast<size_t>(host_target().huge_page_bytes);
  return bytes;
}

// A block of `capacity` bytes: from malloc below a huge page; at or above it,
// its own mapping, aligned to the huge page and advised to use transparent huge pages,
// which fault in 512 times fewer pages (a fresh 64 MB buffer costs ~200 ms of
// 4 KiB faults here). Size classes from 2 MiB up are multiples of 4 KiB.
void* allocate_block(size_t capacity) {
  const size_t huge = huge_page();
  if (capacity < huge) return std::aligned_alloc(alignment(), capacity);
  const size_t mapped = capacity + huge;
  void* raw = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const auto start = (reinterpret_cast<uintptr_t>(raw) + huge - 1) & ~(huge - 1);
  const size_t head = start - reinterpret_cast<uintptr_t>(raw), tail = mapped - head - capacity;
  if (head) munmap(raw, head);
  if (tail) munmap(reinterpret_cast<void*>(start + capacity), tail);
  madvise(reinterpret_cast<void*>(start), capacity, MADV_HUGEPAGE);  // advice: failure is harmless
  return reinterpret_cast<void*>(start);
}

void free_block(void* block, size_t capacity) {
  if (capacity < huge_page())
    std::free(block);
  else
    munmap(block, capacity);
}

std::atomic<size_t> g_live_bytes{0};
std::atomic<size_t> g_live_count{0};

// The process-wide free-block registry: size class -> freed blocks of that
// capacity, most recently freed last (reused first, while still in cache). When a
// freed block does not fit under the bounds, the least recently freed blocks leave
// (of its class when the class is full, else of any class), never the new one: the
// blocks a program frees now are the ones its next step asks for, so a run of small
// steps after large ones reuses its own blocks instead of mapping and faulting in
// fresh memory every step beside a pool full of the large steps' blocks.
// One mutex guards it; allocation and release hold it only to push or pop.
class Pool {
 public:
  static Pool& get() {
    static Pool* pool = new Pool();  // never destroyed: buffers may outlive statics
    return *pool;
  }

  void* take(size_t capacity) {
    std::lock_guard lock(mu_);
    auto it = free_.find(capacity);
    if (it == free_.end() || it->second.empty()) return nullptr;
    const Freed block = it->second.back();
    it->second.pop_back();
    pooled_bytes_ -= capacity;
    return block.data;
  }

  void give(void* data, size_t capacity) {
    std::vector<std::pair<void*, size_t>> evicted;
    {
      std::lock_guard lock(mu_);
      const size_t limit = limit_.load(std::memory_order_relaxed);  // changed only under mu_
      if (capacity > limit) {
        evicted.emplace_back(data, capacity);
      } else {
        if (free_[capacity].size() >= kMaxBlocksPerClass) evict_oldest(capacity, evicted);
        while (pooled_bytes_ + capacity > limit) evict_oldest(oldest_class(), evicted);
        free_[capacity].push_back({data, ++clock_});
        pooled_bytes_ += capacity;
      }
    }
    for (auto [block, bytes] : evicted) free_block(block, bytes);
  }

  size_t pooled_bytes() {
    std::lock_guard lock(mu_);
    return pooled_bytes_;
  }

  size_t limit() const { return limit_.load(std::memory_order_relaxed); }
  // A lower limit than the pool holds evicts the least recently freed blocks down to it.
  void set_limit(size_t bytes) {
    std::vector<std::pair<void*, size_t>> evicted;
    {
      std::lock_guard lock(mu_);
      limit_.store(bytes, std::memory_order_relaxed);
      while (pooled_bytes_ > bytes) evict_oldest(oldest_class(), evicted);
    }
    for (auto [block, capacity] : evicted) free_block(block, capacity);
  }

  void trim() {
    std::unordered_map<size_t, std::vector<Freed>> drained;
    {
      std::lock_guard lock(mu_);
      drained.swap(free_);
      pooled_bytes_ = 0;
    }
    for (auto& [capacity, blocks] : drained)
      for (const Freed& block : blocks) free_block(block.data, capacity);
  }

 private:
  struct Freed {
    void* data;
    uint64_t freed_at;  // the pool's clock when it was given back
  };

  // The class whose least recently freed block is the oldest in the pool (a few dozen
  // classes at most: a scan is cheaper than keeping a second index in step).
  size_t oldest_class() const {
    size_t best = 0;
    uint64_t best_at = UINT64_MAX;
    for (const auto& [capacity, blocks] : free_)
      if (!blocks.empty() && blocks.front().freed_at < best_at)
        best = capacity, best_at = blocks.front().freed_at;
    return best;
  }

  void evict_oldest(size_t capacity, std::vector<std::pair<void*, size_t>>& evicted) {
    auto& blocks = free_.at(capacity);
    evicted.emplace_back(blocks.front().data, capacity);
    blocks.erase(blocks.begin());
    pooled_bytes_ -= capacity;
  }

  std::mutex mu_;
  std::unordered_map<size_t, std::vector<Freed>> free_;
  size_t pooled_bytes_ = 0;
  std::atomic<size_t> limit_{default_buffer_pool_limit()};
  uint64_t clock_ = 0;
};
}  // namespace

size_t buffer_size_class(size_t bytes) {
  const size_t align = alignment();
  if (bytes <= align) return align;
  const size_t step = std::max(align, std::bit_floor(bytes - 1) / 4);
  return (bytes + step - 1) / step * step;
}

size_t physical_memory_bytes() {
  static const size_t bytes = [] {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    return pages > 0 && page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page) : kMaxRequest;
  }();
  return bytes;
}

std::shared_ptr<Buffer> Buffer::allocate(size_t bytes, Fill fill) {
  // Never try a request the machine cannot hold: with overcommit it might
  // "succeed" and then kill the process on first touch.
  const size_t limit = std::min(kMaxRequest, physical_memory_bytes());
  if (bytes > limit)
    throw Error("Buffer::allocate: " + std::to_string(bytes) + " bytes requested, more than the " +
                std::to_string(limit) + " bytes of the machine's physical memory");
  const size_t capacity = buffer_size_class(bytes);
  void* data = Pool::get().take(capacity);
  const bool fresh_mapping = !data && capacity >= huge_page();  // the kernel zeroed it
  if (!data) data = allocate_block(capacity);
  if (!data) throw Error("Buffer::allocate: out of memory allocating " + std::to_string(bytes) + " bytes");
  if (fill == Fill::Zeros && !fresh_mapping) std::memset(data, 0, bytes);
  Buffer* buffer = nullptr;
  try {
    buffer = new Buffer(data, bytes, capacity);
  } catch (...) {
    Pool::get().give(data, capacity);
    throw;
  }
  g_live_bytes.fetch_add(bytes, std::memory_order_relaxed);
  g_live_count.fetch_add(1, std::memory_order_relaxed);
  return std::shared_ptr<Buffer>(buffer);  // if this throws, ~Buffer returns the block
}

Buffer::~Buffer() {
  g_live_bytes.fetch_sub(bytes_, std::memory_order_relaxed);
  g_live_count.fetch_sub(1, std::memory_order_relaxed);
  Pool::get().give(data_, capacity_);
}

size_t live_buffer_bytes() { return g_live_bytes.load(std::memory_order_relaxed); }
size_t live_buffer_count() { return g_live_count.load(std::memory_order_relaxed); }
size_t pooled_buffer_bytes() { return Pool::get().pooled_bytes(); }
void trim_buffer_pool() { Pool::get().trim(); }
size_t buffer_pool_limit() { return Pool::get().limit(); }
size_t default_buffer_pool_limit() { return std::max(kMinPoolLimit, physical_memory_bytes() / 8); }
void set_buffer_pool_limit(size_t bytes) { Pool::get().set_limit(bytes); }

}  // namespace loom
